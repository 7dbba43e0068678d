-- push.lua: create workflows of one shard, and queue their root tasks.
-- KEYS[1]  P:seq
-- ARGV[3]  the call's push token ("" for none): a call sent again with the same token
--          (its first reply was lost) returns the first call's ids and writes nothing;
-- ARGV[4]  who pushes; ARGV[5] shard count N; ARGV[6] this shard's index S;
-- ARGV[7]  ms from now to start them (0: now; more: they are `scheduled` till then, their
--          ready tasks held out of the queues, the time in their field `at`);
-- ARGV[8]  how many definitions follow.
-- Then per definition (engine/definition.py, compile_workflow):
--   digest, ntasks, nroots, then per root (idx, type, priority; idx "<i>@<ms>" for a
--   root with a delay: held in P:delayed that long), ntypes, types...,
--   nstatic, static field/value pairs (stored once in P:d:<digest>),
--   ninit, initial runtime field/value pairs (every task's s and w or q).
-- Then how many workflows follow, and per workflow: its definition's number (1-based), name,
-- input JSON ("" for none; stored once per workflow as input_layout in _lib.lua says: field
-- `in`, maybe pieces beside it or a key of its own).
-- Returns the new workflow ids, in order.
-- Python validated every definition: nothing here can fail half-way, so the first write
-- is safe.
local token = ARGV[3]
if token ~= '' then
  local done = redis.call('GET', k_push_token(token))
  if done then return cjson.decode(done) end
end
local who_json = cjson.encode(ARGV[4])
local shards = tonumber(ARGV[5])
local shard = tonumber(ARGV[6])
local later = tonumber(ARGV[7])
local ndefs = tonumber(ARGV[8])
local pos = 9
local st = 'running'
local start_at = NOW
if later > 0 then
  st = 'scheduled'
  start_at = NOW + later
end

local defs = {}
for d = 1, ndefs do
  local digest = ARGV[pos]
  local dk = k_definition(digest)
  local ntasks = tonumber(ARGV[pos + 1])
  local nroots = tonumber(ARGV[pos + 2])
  local roots_at = pos + 3
  pos = roots_at + 3 * nroots
  local ntypes = tonumber(ARGV[pos])
  for t = 1, ntypes do redis.call('SADD', K_TYPES, ARGV[pos + t]) end
  pos = pos + ntypes + 1
  local nstatic = tonumber(ARGV[pos])
  if redis.call('EXISTS', dk) == 0 then
    local static = {}
    for k = pos + 1, pos + 2 * nstatic do static[#static + 1] = ARGV[k] end
    write_all('HSET', dk, static)
  end
  pos = pos + 2 * nstatic + 1
  local ninit = tonumber(ARGV[pos])
  -- The new workflow hash, with slots 2 (name) and 6 (input) filled per workflow.
  -- `in` early and always there (empty: no input): a claim reads it for every task, and
  -- a field that is missing costs a scan of the whole hash
  local fields = {'name', '', 'st', st, 'in', '', 'ct', NOW, 'd', digest, 'n', ntasks,
    'left', ntasks, 'ok', 0, 'bad', 0, 'skip', 0}
  if st == 'scheduled' then
    fields[#fields + 1] = 'at'
    fields[#fields + 1] = start_at
  end
  local deadline = nil  -- ms after its start (init field dl)
  for k = pos + 1, pos + 2 * ninit do
    fields[#fields + 1] = ARGV[k]
    if ARGV[k] == 'dl' and (k - pos) % 2 == 1 then deadline = tonumber(ARGV[k + 1]) end
  end
  pos = pos + 2 * ninit + 1
  local roots = {}
  for r = 0, nroots - 1 do
    local at = roots_at + 3 * r
    local idx, delay = string.match(ARGV[at], '^([^@]*)@?(%d*)$')
    roots[#roots + 1] = {idx, ARGV[at + 1], tonumber(ARGV[at + 2]), tonumber(delay)}
  end
  defs[d] = {key = dk, ntasks = ntasks, roots = roots, fields = fields, uses = 0,
    deadline = deadline}
end

local nwf = tonumber(ARGV[pos])
pos = pos + 1
-- Ids for the whole call at once: the same numbers nwf INCRBYs would hand out.
local last = redis.call('INCRBY', KEYS[1], shards * nwf)
local first = last - shards * (nwf - 1) + shard
local ids = {}
local all, running = {}, {}
local by_name, name_order, name_json = {}, {}, {}
local by_type = {}
local deadlines = {}
local held = {}  -- roots with a delay: into P:delayed
for k = 0, nwf - 1 do
  local def = defs[tonumber(ARGV[pos + 3 * k])]
  local name = ARGV[pos + 3 * k + 1]
  local input = ARGV[pos + 3 * k + 2]
  local wid = tostring(first + shards * k)
  local wk = wkey(wid)
  local head, pieces, own = input_layout(input, def.ntasks)
  def.uses = def.uses + 1
  def.fields[2] = name
  def.fields[6] = head
  write_all('HSET', wk, def.fields)
  if pieces then redis.call('HSET', wk, unpack(pieces)) end
  if own then redis.call('APPEND', k_input(wk), own) end  -- a new key: APPEND sets it
  all[#all + 1] = wid
  all[#all + 1] = wid
  running[#running + 1] = NOW
  running[#running + 1] = wid
  local same = by_name[name]
  if same == nil then
    same = {}
    by_name[name] = same
    name_order[#name_order + 1] = name
    name_json[name] = '[' .. cjson.encode(name) .. ',' .. who_json .. ']'
  end
  same[#same + 1] = wid
  same[#same + 1] = wid
  for _, root in ipairs(def.roots) do
    if root[4] then
      held[#held + 1] = NOW + root[4]
      held[#held + 1] = wid .. ':' .. root[1]
    else
      local q = by_type[root[2]]
      if q == nil then
        q = {}
        by_type[root[2]] = q
      end
      q[#q + 1] = queue_score(root[3], wid)
      q[#q + 1] = wid .. ':' .. root[1]
    end
  end
  if def.deadline and st == 'running' then  -- a scheduled one's counts from its start
    deadlines[#deadlines + 1] = NOW + def.deadline
    deadlines[#deadlines + 1] = wid
    redis.call('HSET', wkey(wid), 'due', NOW + def.deadline)
  end
  emit_json('pushed', wid, -1, name_json[name])
  ids[#ids + 1] = wid
end
if nwf > 0 then
  write_all('ZADD', K_ALL, all)
  write_all('ZADD', k_state(st), running)
  if st == 'scheduled' then
    local due = {}
    for k = 2, #running, 2 do
      due[#due + 1] = start_at
      due[#due + 1] = running[k]
    end
    write_all('ZADD', K_SCHEDULED, due)
  end
end
for _, name in ipairs(name_order) do
  local same = by_name[name]
  write_all('ZADD', k_name(name), same)
  redis.call('ZINCRBY', K_NAMES, math.floor(#same / 2), name)
end
write_all('ZADD', K_DEADLINES, deadlines)
if st == 'running' then
  write_all('ZADD', K_DELAYED, held)
  for typ, q in pairs(by_type) do
    write_all('ZADD', k_queue(typ), q)
    wake[typ] = true
  end
end
for _, def in ipairs(defs) do
  if def.uses > 0 then
    redis.call('HINCRBY', def.key, 'r', def.uses)
    local nroots = #def.roots
    count('t:ready', nroots * def.uses)
    count('t:waiting', (def.ntasks - nroots) * def.uses)
    count('t:pushed', def.ntasks * def.uses)
  end
end
count('w:' .. st, nwf)
count('w:pushed', nwf)
if token ~= '' then
  -- long enough for any client's retries, short enough to cost nothing. SETEX, not SET:
  -- Redis 7.0's acl_check_cmd('SET') (the permission guard) crashes the server.
  redis.call('SETEX', k_push_token(token), 600, cjson.encode(ids))
end
flush()
return ids
