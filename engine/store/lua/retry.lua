-- retry.lua: run failed tasks again with their inputs unchanged.
-- Without task indexes: every failed and skipped task of a failed workflow.
-- With task indexes: those failed tasks (workflow running, paused or failed) and the
-- skipped descendants none of whose other parents failed, was skipped or cancelled.
-- KEYS[1]  P:w:<wid>;  ARGV[3] wid; ARGV[4..] task indexes (optional).
local wid, wk = ARGV[3], KEYS[1]
local whole = #ARGV < 4
local m, refused
if whole then
  m, refused = open_workflow(wid, wk, {'failed'},
    'only a failed workflow can be retried', 'n', 'ct')
else
  m, refused = open_workflow(wid, wk, {'failed', 'running', 'paused'},
    'its tasks cannot be retried', 'n', 'ct')
end
if refused then return refused end
local st, n, ct = m[1], tonumber(m[2]), tonumber(m[3])
local reset = {}
local order = {}
local function add(i) if not reset[i] then reset[i] = true; order[#order + 1] = i end end
if whole then
  for i = 0, n - 1 do
    local s = tstate(redis.call('HGET', wk, i))
    if s == 'failed' or s == 'skipped' then add(tostring(i)) end
  end
else
  for k = 4, #ARGV do
    local s = tstate(redis.call('HGET', wk, ARGV[k]))
    if s ~= 'failed' then
      local name = redis.call('HGET', dkey(wk), ARGV[k] .. 'N') or ARGV[k]
      return redis.error_reply('RFSTATE task ' .. name .. ' of workflow ' .. wid .. ' is ' .. tostring(s) .. '; only a failed task can be retried')
    end
    add(ARGV[k])
  end
  -- A skipped descendant joins once one of its parents is retried and none of the
  -- others has failed, been skipped or cancelled: parents still waiting, ready or
  -- running may yet succeed, and the descendant then waits for them.
  local changed = true
  while changed do
    changed = false
    for i = 0, n - 1 do
      local si = tostring(i)
      if not reset[si] and tstate(redis.call('HGET', wk, si)) == 'skipped' then
        local ok = true
        local parents = split_csv(redis.call('HGET', dkey(wk), si .. 'U'))
        local any_reset = false
        for _, p in ipairs(parents) do
          if reset[p] then
            any_reset = true
          else
            local ps = tstate(redis.call('HGET', wk, p))
            if ps == 'failed' or ps == 'skipped' or ps == 'cancelled' then ok = false end
          end
        end
        if ok and any_reset then add(si); changed = true end
      end
    end
  end
end
local live = (st == 'running')
if st == 'failed' then
  set_wstate(wid, wk, 'failed', 'running', ct)
  redis.call('HDEL', wk, 'ft')
  live = true
end
local bad, skip = 0, 0
for _, i in ipairs(order) do
  local t = tparse(redis.call('HGET', wk, i))
  local s = t.s
  if s == 'failed' then bad = bad + 1 else skip = skip + 1 end
  local waiting = 0
  local parents = split_csv(redis.call('HGET', dkey(wk), i .. 'U'))
  for _, p in ipairs(parents) do
    if reset[p] or tstate(redis.call('HGET', wk, p)) ~= 'succeeded' then waiting = waiting + 1 end
  end
  -- parents already succeeded, counted as complete.lua counts them (several parents only)
  if #parents > 1 and waiting > 0 and #parents > waiting then
    redis.call('HSET', wk, i .. 'w', #parents - waiting)
  else
    redis.call('HDEL', wk, i .. 'w')
  end
  redis.call('HDEL', wk, i .. 'f', i .. 'e', i .. 'o')
  t.d = ''
  if waiting == 0 then
    t.s, t.q = 'ready', NOW - ct
    redis.call('HSET', wk, i, tpack(t))
    move_count(s, 'ready')
    if live then enqueue(wid, wk, i) end
  else
    t.s = 'waiting'
    redis.call('HSET', wk, i, tpack(t))
    move_count(s, 'waiting')
  end
end
-- 0 - x, not -x: Lua's -0 is sent as "-0", which HINCRBY refuses
redis.call('HINCRBY', wk, 'bad', 0 - bad)
redis.call('HINCRBY', wk, 'skip', 0 - skip)
redis.call('HINCRBY', wk, 'left', #order)
emit('retried', wid, -1, #order)
flush()
return #order
