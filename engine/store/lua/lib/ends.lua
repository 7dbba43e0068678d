-- lib/ends.lua: A workflow's end: its result, retention, what it releases.

-- The result of a finished workflow with failures: 'failed' if some failure is not
-- handled, i.e. no task downstream of it whose rule exists for failures (one_failed,
-- all_failed: the definition's `hf`) succeeded; a finally task's failure (`fy`) does
-- not count. O(tasks + edges), only for a workflow with failures that has such tasks.
local function failed_result(wk)
  local dk = dkey(wk)
  local h = redis.call('HMGET', dk, D_HANDLERS, D_FINALLY)
  if not h[1] and not h[2] then return 'failed' end
  local n = tonumber(redis.call('HGET', wk, F_COUNT))
  local fields = {}
  for i = 0, n - 1 do fields[#fields + 1] = tostring(i) end
  local recs = hmget_all(wk, fields)
  local final = {}
  for _, i in ipairs(split_csv(h[2])) do final[i] = true end
  local open, left = {}, 0
  for i = 0, n - 1 do
    if tstate(recs[i + 1]) == 'failed' and not final[tostring(i)] then
      open[tostring(i)] = true
      left = left + 1
    end
  end
  if left == 0 then return 'succeeded' end
  local stack, seen = {}, {}
  for _, x in ipairs(split_csv(h[1])) do
    if tstate(recs[tonumber(x) + 1]) == 'succeeded' then stack[#stack + 1] = x end
  end
  while #stack > 0 and left > 0 do
    for _, p in ipairs(split_csv(redis.call('HGET', dk, table.remove(stack) .. D_PARENTS))) do
      if not seen[p] then
        seen[p] = true
        if open[p] then
          open[p] = nil
          left = left - 1
        end
        stack[#stack + 1] = p
      end
    end
  end
  if left == 0 then return 'succeeded' end
  return 'failed'
end

-- A finished workflow's own retention: it goes `ttl` ms from now, or (-1) only when
-- cleaned up by hand: at +inf in P:expire, which housekeeping never reaches and the
-- deployment's sweep steps over. Returns when it goes (ms), or -1.
local function arm_retention(wid, ttl)
  if ttl < 0 then
    redis.call('ZADD', K_EXPIRE, '+inf', wid)
    return -1
  end
  redis.call('ZADD', K_EXPIRE, NOW + ttl, wid)
  return NOW + ttl
end

-- Every end of a workflow (it was `prev`, it is `final`) comes here: its gates' slots go
-- to the next waiting workflows (a queued one only leaves its queue), its schedule hears
-- of it, its own retention starts, and the signals it keeps for waits go (its mailboxes:
-- their waits will never be reached now).
local function workflow_ended(wid, wk, prev, final)
  local at_end = redis.call('HGET', wk, F_AT_END)
  if at_end == '' then return end  -- none (F_AT_END)
  if not at_end or string.find(at_end, 'b', 1, true) then  -- signals kept (signal.lua)
    local names = redis.call('HGET', dkey(wk), D_SIGNALS)  -- the mailboxes it may have
    if names then
      -- k_signals and k_mailbox spelt out: complete.lua, which ends runs, has no room
      -- for two more locals (tests/test_waits_mailbox.py checks they go)
      local sk = wk .. ':sig'
      for _, name in ipairs(cjson.decode(names)) do
        redis.call('DEL', wk .. ':sq:' .. name)
        redis.call('HDEL', sk, 'q:' .. name)  -- an earlier release's
      end
      redis.call('HDEL', sk, 'bytes')
    end
  end
  local m = redis.call('HMGET', wk, F_GATES, F_SCHEDULE, F_TTL, F_PARENT, F_TEMPLATE, F_CREATED)
  if m[1] then
    local gates = cjson.decode(m[1])
    if prev == 'queued' then
      for _, g in ipairs(gates) do redis.call('ZREM', k_gate_queue(g[1]), wid) end
    elseif prev ~= 'scheduled' then
      for _, g in ipairs(gates) do
        if redis.call('HINCRBY', K_CC, g[1], -1) <= 0 then redis.call('HDEL', K_CC, g[1]) end
      end
      for _, g in ipairs(gates) do open_gate(g[1]) end
    end
  end
  if m[2] then schedule_run_ended(m[2], wid, final) end
  if m[3] then arm_retention(wid, tonumber(m[3])) end
  if m[4] then  -- a child run: its parent task hears of it (engine/runtime/child_runs.py)
    redis.call('ZADD', K_CHILD_ENDS, NOW, wid)
    wake['~wait'] = true
  end
  if m[5] then template_run_ended(m[5], final, NOW - tonumber(m[6] or NOW)) end
end

-- Workflow wid (hash wk, created at `ct` as read) ends, `prev` -> `final`: its state and
-- finish time in one write; its `left`, once 0, goes (absent reads as 0: a run kept for
-- its retention is 8 bytes smaller).
local function set_finished(wid, wk, prev, final, ct, left)
  set_wstate(wid, wk, prev, final, NUM[NOW], NUM[NOW - tonumber(ct)])
  if left == 0 then redis.call('HDEL', wk, F_LEFT) end
end

-- Close a workflow whose last unfinished task just ended.
local function finish_if_done(wid, wk)
  local m = redis.call('HMGET', wk, F_STATE, F_LEFT, F_BAD, F_CREATED)
  local left = tonumber(m[2] or '0')
  if (m[1] == 'running' or m[1] == 'paused') and left <= 0 then
    -- skipped and upstream_failed tasks never fail a workflow: failures alone do,
    -- unless handled (failed_result)
    local final = 'succeeded'
    if tonumber(m[3] or '0') > 0 then final = failed_result(wk) end
    set_finished(wid, wk, m[1], final, m[4], left)
    emit(final, wid, '-1')
    workflow_ended(wid, wk, m[1], final)
  end
end
