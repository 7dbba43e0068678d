-- retry.lua: run failed tasks again with their inputs unchanged.
-- Without task indexes: every failed task of a failed workflow.
-- With task indexes: those failed tasks (workflow running, paused or failed).
-- The tasks downstream of them are decided again: an upstream_failed or skipped task
-- waits again unless its other parents still decide it as before (its rule counts only
-- the parents not run again); a finally task runs again after them; a waiting child
-- counts its parents again. Tasks that succeeded otherwise stay as they are.
-- A task index may name one item of a map, "c.k": that failed item runs again (and the
-- map with it, if the map had failed for it).
-- KEYS[1]  P:w:<wid>;  ARGV[3] wid; ARGV[4] who asks; ARGV[5..] task indexes (optional).
local wid, wk, who = ARGV[3], KEYS[1], ARGV[4]
local whole = #ARGV < 5
local m, refused
if whole then
  m, refused = open_workflow(wid, wk, {'failed'},
    'only a failed workflow can be retried', F_COUNT, F_CREATED)
else
  m, refused = open_workflow(wid, wk, {'failed', 'running', 'paused'},
    'its tasks cannot be retried', F_COUNT, F_CREATED)
end
if refused then return refused end
if m[1] == 'failed' and redis.call('HGET', wk, F_REASON) == 'deadline' then
  return redis.error_reply('RFSTATE workflow ' .. wid .. ' failed past its deadline; push it again')
end
if m[1] == 'failed' and redis.call('HGET', wk, F_REASON) == 'abort' then
  return redis.error_reply('RFSTATE workflow ' .. wid .. ' was aborted by a task; push it again')
end
local st, n, ct = m[1], tonumber(m[2]), tonumber(m[3])
-- A failed workflow runs again only in a slot of each of its gates (concurrency keys).
local gates = nil
if st == 'failed' then
  gates = redis.call('HGET', wk, F_GATES)
  if gates then
    gates = cjson.decode(gates)
    local full = full_gate(gates)
    if full then
      return redis.error_reply('RFSTATE workflow ' .. wid .. ' runs under concurrency key '
        .. full .. ', which is at its limit; retry it when one of its runs ends')
    end
  end
end
local reset = {}
local order = {}
local function add(i) if not reset[i] then reset[i] = true; order[#order + 1] = i end end
local only = {}  -- map -> the failed items to run again (absent: all its failed items)
local running_maps = {}  -- a running map whose listed items run again: {c, {k...}}
if whole then
  for i = 0, n - 1 do
    if tstate(redis.call('HGET', wk, i)) == 'failed' then add(tostring(i)) end
  end
else
  for k = 5, #ARGV do
    local c, ik = item_of(ARGV[k])
    local s
    if c ~= nil then
      s = tstate(redis.call('HGET', k_items(wk, c), ik))
      if s ~= 'failed' or redis.call('SISMEMBER', k_failed(wk, c), ik) == 0 then
        local name = redis.call('HGET', dkey(wk), c .. D_NAME) or c
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
      local name = redis.call('HGET', dkey(wk), ARGV[k] .. D_NAME) or ARGV[k]
      return redis.error_reply('RFSTATE task ' .. name .. ' of workflow ' .. wid .. ' is ' .. tostring(s) .. '; only a failed task can be retried')
    end
    if c == nil then add(ARGV[k]) end
  end
end
-- Every task is read once: its state, parents, rule and W. A task run again counts as
-- not ended for its children (`reset`).
local dk = dkey(wk)
local states, defs = {}, {}
local function state_of(i)
  local s = states[i]
  if s == nil then
    s = tstate(redis.call('HGET', wk, i))
    states[i] = s
  end
  return s
end
local function def_of(i)
  local d = defs[i]
  if d == nil then
    local f = redis.call('HMGET', dk, i .. D_PARENTS, i .. D_CHILDREN, i .. D_RULE, i .. D_WAIT_FOR)
    d = {ups = split_csv(f[1]), kids = split_csv(f[2]), rule = f[3] or 'all_success', w = f[4]}
    defs[i] = d
  end
  return d
end
-- What task i's rule decides from its parents that are not run again, and its counter.
local function counted(i)
  local d = def_of(i)
  local s, f, k = 0, 0, 0
  for _, p in ipairs(d.ups) do
    if not reset[p] then
      local ps = state_of(p)
      if ps == 'succeeded' then s = s + 1
      elseif ps == 'failed' or ps == 'upstream_failed' then f = f + 1
      elseif ps == 'skipped' then k = k + 1 end
    end
  end
  local verdict = rule_decide(d.rule, #d.ups, s, f, k)
  local v = s + RB * k
  if d.w and string.byte(d.w, -1) == 114 then v = v + RB2 * f end
  return verdict, v
end
-- Downstream, in waves: a decided child of a task run again is decided again if its
-- other parents no longer decide it alone; a finally task runs again after them.
local walk = {}
for _, i in ipairs(order) do walk[#walk + 1] = i end
local recount = {}  -- waiting children of tasks run again: their counters change
while #walk > 0 do
  local i = table.remove(walk)
  for _, c in ipairs(def_of(i).kids) do
    if not reset[c] then
      local s = state_of(c)
      local again = false
      if s == 'upstream_failed' or s == 'skipped' then
        local verdict = counted(c)
        again = verdict == nil or verdict == 'run'
      elseif s == 'succeeded' and def_of(c).rule == 'finally' then
        again = true
      elseif s == 'waiting' then
        recount[#recount + 1] = c
      end
      if again then
        add(c)
        walk[#walk + 1] = c
      end
    end
  end
end
for _, c in ipairs(recount) do
  if not reset[c] and state_of(c) == 'waiting' then
    local _, v = counted(c)
    if v > 0 then
      redis.call('HSET', wk, c .. T_PARENTS_OK, v)
    else
      redis.call('HDEL', wk, c .. T_PARENTS_OK)
    end
  end
end
local live = (st == 'running')
if st == 'failed' then
  set_wstate(wid, wk, 'failed', 'running', ct)
  if gates then
    for _, g in ipairs(gates) do redis.call('HINCRBY', K_CC, g[1], 1) end
  end
  redis.call('ZREM', K_EXPIRE, wid)
  redis.call('HDEL', wk, F_FINISHED, F_FINISHED_EPOCH)
  live = true
end
local was = {}  -- how many tasks run again were in each state
for _, i in ipairs(order) do
  local t = tparse(redis.call('HGET', wk, i))
  local s = t.s
  was[s] = (was[s] or 0) + 1
  -- its counter from the parents not run again; `waiting` 0 when its rule is met now
  local verdict, v = counted(i)
  local waiting = 1
  if verdict == 'run' then waiting = 0 end
  if v > 0 and waiting > 0 then
    redis.call('HSET', wk, i .. T_PARENTS_OK, v)
  else
    redis.call('HDEL', wk, i .. T_PARENTS_OK)
  end
  redis.call('HDEL', wk, i .. T_FAILURES, i .. T_ERROR, i .. T_OUTPUT, i .. M_ERRORS, i .. T_WHY)
  t.d = ''
  local is_map = redis.call('HEXISTS', dkey(wk), i .. D_MAP) == 1
  local failed_items = is_map and waiting == 0 and redis.call('HEXISTS', wk, i .. M_TOTAL) == 1
    and redis.call('SCARD', k_failed(wk, i)) > 0
  if is_map and not failed_items then
    -- expanded again from its parent's output (which may have changed)
    if redis.call('HEXISTS', wk, i .. M_STORED) == 1 then
      forget_items(wid, wk, i)
      redis.call('HDEL', wk, i .. M_STORED, i .. M_TOTAL, i .. M_STARTED, i .. M_FLYING, i .. M_OK,
        i .. M_BAD, i .. M_CANCELLED)
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
    redis.call('HINCRBY', wk, i .. M_BAD, 0 - #again)
    redis.call('HINCRBY', wk, i .. M_FLYING, #again)
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
  redis.call('HINCRBY', wk, c .. M_BAD, -1)
  redis.call('HINCRBY', wk, c .. M_FLYING, 1)
  items_again = items_again + 1
end
-- 0 - x, not -x: Lua's -0 is sent as "-0", which HINCRBY refuses
for _, f in ipairs({{F_OK, 'succeeded'}, {F_BAD, 'failed'}, {F_SKIP, 'skipped'},
    {F_UPSTREAM, 'upstream_failed'}}) do
  if was[f[2]] then redis.call('HINCRBY', wk, f[1], 0 - was[f[2]]) end
end
redis.call('HINCRBY', wk, F_LEFT, #order)
emit('retried', wid, -1, {#order + items_again, who})
flush()
return #order + items_again
