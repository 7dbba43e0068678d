-- push.lua: create workflows of one shard, and queue their root tasks.
-- KEYS[1]  P:seq
-- ARGV[3]  shard count N; ARGV[4] this shard's index S; ARGV[5] how many workflows follow.
-- Then per workflow:
--   name, nroots, then per root (idx, type, priority), ntypes, types...,
--   ntasks, nfields, then nfields field/value pairs (every static task field, every
--   task's s/w, and the meta fields n left ok bad skip bk).
-- Returns the new workflow ids, in order.
-- Python validated every definition (engine/definition.py): nothing here can fail
-- half-way, so the first write is safe.
local shards = tonumber(ARGV[3])
local shard = tonumber(ARGV[4])
local count_wf = tonumber(ARGV[5])
local pos = 6
local ids = {}
for _ = 1, count_wf do
  local wid = tostring(redis.call('INCRBY', KEYS[1], shards) + shard)
  local wk = wkey(wid)
  local name = ARGV[pos]
  local nroots = tonumber(ARGV[pos + 1])
  local roots_at = pos + 2
  pos = roots_at + 3 * nroots
  local ntypes = tonumber(ARGV[pos])
  for t = 1, ntypes do redis.call('SADD', P .. ':types', ARGV[pos + t]) end
  pos = pos + ntypes + 1
  local ntasks = tonumber(ARGV[pos])
  local nfields = tonumber(ARGV[pos + 1])
  pos = pos + 2
  local chunk = 3000
  local i = 0
  while i < nfields do
    local last = math.min(i + chunk, nfields)
    redis.call('HSET', wk, unpack(ARGV, pos + 2 * i, pos + 2 * last - 1))
    i = last
  end
  pos = pos + 2 * nfields
  redis.call('HSET', wk, 'name', name, 'st', 'running', 'ct', NOW)
  redis.call('ZADD', P .. ':all', wid, wid)
  redis.call('ZADD', P .. ':ws:running', NOW, wid)
  redis.call('ZADD', P .. ':wn:' .. name, wid, wid)
  redis.call('ZINCRBY', P .. ':names', 1, name)
  for r = 0, nroots - 1 do
    local at = roots_at + 3 * r
    local idx, typ, pri = ARGV[at], ARGV[at + 1], tonumber(ARGV[at + 2])
    redis.call('ZADD', P .. ':q:' .. typ, queue_score(pri, wid), wid .. ':' .. idx)
    wake[typ] = true
  end
  count('t:ready', nroots)
  count('t:waiting', ntasks - nroots)
  count('t:pushed', ntasks)
  count('w:running', 1)
  count('w:pushed', 1)
  emit('pushed', wid, -1, name)
  ids[#ids + 1] = wid
end
flush()
return ids
