-- retry.lua: run failed tasks again with their inputs unchanged.
-- Without task indexes: every failed and skipped task of a failed workflow.
-- With task indexes: those failed tasks (workflow running, paused or failed) and the
-- skipped descendants none of whose other parents failed, was skipped or cancelled.
-- A task index may name one item of a map, "c.k": that failed item runs again (and the
-- map with it, if the map had failed for it).
-- KEYS[1]  P:w:<wid>;  ARGV[3] wid; ARGV[4] who asks; ARGV[5..] task indexes (optional).
local wid, wk, who = ARGV[3], KEYS[1], ARGV[4]
local whole = #ARGV < 5
local m, refused
if whole then
  m, refused = open_workflow(wid, wk, {'failed'},
    'only a failed workflow can be retried', 'n', 'ct')
else
  m, refused = open_workflow(wid, wk, {'failed', 'running', 'paused'},
    'its tasks cannot be retried', 'n', 'ct')
end
if refused then return refused end
if m[1] == 'failed' and redis.call('HGET', wk, 'why') == 'deadline' then
  return redis.error_reply('RFSTATE workflow ' .. wid .. ' failed past its deadline; push it again')
end
local st, n, ct = m[1], tonumber(m[2]), tonumber(m[3])
local reset = {}
local order = {}
local function add(i) if not reset[i] then reset[i] = true; order[#order + 1] = i end end
local only = {}  -- map -> the failed items to run again (absent: all its failed items)
local running_maps = {}  -- a running map whose listed items run again: {c, {k...}}
if whole then
  for i = 0, n - 1 do
    local s = tstate(redis.call('HGET', wk, i))
    if s == 'failed' or s == 'skipped' then add(tostring(i)) end
  end
else
  for k = 5, #ARGV do
    local c, ik = item_of(ARGV[k])
    local s
    if c ~= nil then
      s = tstate(redis.call('HGET', k_items(wk, c), ik))
      if s ~= 'failed' or redis.call('SISMEMBER', k_failed(wk, c), ik) == 0 then
        local name = redis.call('HGET', dkey(wk), c .. 'N') or c
        return redis.error_reply('RFSTATE item ' .. ik .. ' of task ' .. name .. ' of workflow ' .. wid .. ' is ' .. tostring(s) .. '; only a failed item can be retried')
      end
      local ms = tstate(redis.call('HGET', wk, c))
      if ms == 'failed' then
        only[c] = only[c] or {}
        table.insert(only[c], ik)
        s = nil
        add(c)
      elseif ms == 'running' then
        running_maps[#running_maps + 1] = {c, ik}
        s = nil
      else
        return redis.error_reply('RFSTATE task ' .. c .. ' of workflow ' .. wid .. ' is ' .. ms .. '; its items cannot be retried')
      end
    else
      s = tstate(redis.call('HGET', wk, ARGV[k]))
    end
    if s ~= nil and s ~= 'failed' then
      local name = redis.call('HGET', dkey(wk), ARGV[k] .. 'N') or ARGV[k]
      return redis.error_reply('RFSTATE task ' .. name .. ' of workflow ' .. wid .. ' is ' .. tostring(s) .. '; only a failed task can be retried')
    end
    if c == nil then add(ARGV[k]) end
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
  redis.call('HDEL', wk, i .. 'f', i .. 'e', i .. 'o', i .. 'q')
  t.d = ''
  local is_map = redis.call('HEXISTS', dkey(wk), i .. 'm') == 1
  local failed_items = is_map and waiting == 0 and redis.call('HEXISTS', wk, i .. 'n') == 1
    and redis.call('SCARD', k_failed(wk, i)) > 0
  if is_map and not failed_items then
    -- expanded again from its parent's output (which may have changed)
    if redis.call('HEXISTS', wk, i .. 'h') == 1 then
      forget_items(wid, wk, i)
      redis.call('HDEL', wk, i .. 'h', i .. 'n', i .. 'x', i .. 'y', i .. 'k', i .. 'z', i .. 'c')
    end
  end
  if failed_items then
    -- only its failed items run again
    local mk = k_items(wk, i)
    local again = only[i] or redis.call('SMEMBERS', k_failed(wk, i))
    for _, k in ipairs(again) do
      rerun_item(wid, wk, i, k, ct, live)
      redis.call('SADD', k_flying(wk, i), k)
      redis.call('SREM', k_failed(wk, i), k)
    end
    redis.call('HINCRBY', wk, i .. 'z', 0 - #again)
    redis.call('HINCRBY', wk, i .. 'y', #again)
    t.s, t.b = 'running', NOW - ct
    redis.call('HSET', wk, i, tpack(t))
    move_count(s, 'running')
  elseif is_map and waiting == 0 then
    t.s, t.q, t.b = 'running', NOW - ct, NOW - ct
    redis.call('HSET', wk, i, tpack(t))
    move_count(s, 'running')
    start_expansion(wid, i)
  elseif waiting == 0 then
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
-- items of a map still running: they run again, the map waits for them
local items_again = 0
for _, pair in ipairs(running_maps) do
  local c, k = pair[1], pair[2]
  rerun_item(wid, wk, c, k, ct, st == 'running')
  redis.call('SREM', k_failed(wk, c), k)
  redis.call('SADD', k_flying(wk, c), k)
  redis.call('HINCRBY', wk, c .. 'z', -1)
  redis.call('HINCRBY', wk, c .. 'y', 1)
  items_again = items_again + 1
end
-- 0 - x, not -x: Lua's -0 is sent as "-0", which HINCRBY refuses
redis.call('HINCRBY', wk, 'bad', 0 - bad)
redis.call('HINCRBY', wk, 'skip', 0 - skip)
redis.call('HINCRBY', wk, 'left', #order)
emit('retried', wid, -1, {#order + items_again, who})
flush()
return #order + items_again
