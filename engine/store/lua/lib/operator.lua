-- lib/operator.lua: An operator's steps on a workflow: open, end, remove.

-- Delete every key and index entry of a finished workflow, and its counters. `who` did
-- it (nil: retention). A cancelled workflow can still have running tasks: they leave
-- their agent's set (the agent's late outcome is then rejected, as the hash is gone).
local function remove_workflow(wid, wk, st, who)
  local m = redis.call('HMGET', wk, F_NAME, F_COUNT, F_DIGEST, F_LOG_BYTES)
  local n = tonumber(m[2])
  local dk = dkey(wk, m[3])
  local name = m[1] or redis.call('HGET', dk, D_RUN_NAME)  -- read before dk may go
  for i = 0, n - 1 do
    local t = tparse(redis.call('HGET', wk, i))
    local s = t.s
    count('t:' .. s, -1)
    if s == 'running' and t.g ~= '' then
      redis.call('SREM', k_running(t.g), wid .. ':' .. i)
    elseif s == 'ready' then
      dequeue(wid, wk, i)
    elseif s == 'suspended' then
      redis.call('ZREM', K_TIMERS, wid .. ':' .. i)
      redis.call('ZREM', K_SPAWN, wid .. ':' .. i)
    end
    if redis.call('HEXISTS', wk, i .. M_STORED) == 1 then forget_items(wid, wk, i) end
  end
  local o = redis.call('HMGET', wk, F_IDEM_KEY, F_TEMPLATE)
  if o[1] and redis.call('GET', k_idem(o[1])) == wid then redis.call('DEL', k_idem(o[1])) end
  if o[2] then redis.call('ZREM', k_by_template(o[2]), wid) end
  redis.call('ZREM', K_EXPIRE, wid)
  redis.call('DEL', wk, k_input(wk), k_signals(wk), k_children(wk), k_descendants(wk), k_logs(wk),
    k_progress(wk))
  if m[4] then redis.call('HINCRBY', K_LOGS, 'bytes', 0 - tonumber(m[4])) end
  if redis.call('HINCRBY', dk, D_USERS, -1) <= 0 then redis.call('DEL', dk) end
  redis.call('ZREM', K_ALL, wid)
  redis.call('ZREM', k_state(st), wid)
  redis.call('ZREM', k_name(name), wid)
  if tonumber(redis.call('ZINCRBY', K_NAMES, -1, name)) <= 0 then
    redis.call('ZREM', K_NAMES, name)
  end
  count('w:' .. st, -1)
  if who then emit('cleaned', wid, -1, {1, who}) else emit('cleaned', wid, -1) end
end

-- The opening of every operator step on one workflow: read its state (and `more` fields)
-- and refuse unless the state is one of `allowed`. Returns the fields read (state first),
-- or nil and the error reply to return. `needs` ends the refusal: "only a running
-- workflow can be paused".
local function open_workflow(wid, wk, allowed, needs, ...)
  local m = redis.call('HMGET', wk, F_STATE, ...)
  if not m[1] then
    return nil, redis.error_reply('RFNOTFOUND workflow ' .. wid .. ' does not exist')
  end
  for _, st in ipairs(allowed) do
    if m[1] == st then return m end
  end
  return nil, redis.error_reply('RFSTATE workflow ' .. wid .. ' is ' .. m[1] .. '; ' .. needs)
end

-- End workflow wid (state `st`, `n` tasks) as `final` ("cancelled" by an operator, or
-- "failed" past its deadline: `why` says so): its tasks not started are cancelled (a
-- map's items not started with them); running tasks finish and their outcome is recorded,
-- but nothing more starts. Returns how many tasks were cancelled.
local function end_workflow(wid, wk, st, n, final, who, why)
  redis.call('ZREM', K_SCHEDULED, wid)
  redis.call('ZREM', K_DEADLINES, wid)
  local m = {st, n}
  local cancelled = 0
  for i = 0, tonumber(m[2]) - 1 do
    local t = tparse(redis.call('HGET', wk, i))
    local s = t.s
    if s == 'waiting' or s == 'ready' or s == 'suspended' then
      if s == 'ready' then dequeue(wid, wk, i) end
      if s == 'suspended' then
        redis.call('ZREM', K_TIMERS, wid .. ':' .. i)
        redis.call('ZREM', K_SPAWN, wid .. ':' .. i)
        local child = redis.call('HGET', k_children(wk), i)
        if child then  -- its child run goes with it (the keeper cancels it)
          redis.call('ZADD', K_ORPHANS, NOW, child)
          wake['~wait'] = true
        end
      end
      t.s = 'cancelled'
      redis.call('HSET', wk, i, tpack(t))
      redis.call('HDEL', wk, i .. T_PARENTS_OK)
      move_count(s, 'cancelled')
      cancelled = cancelled + 1
    elseif s == 'running' and redis.call('HEXISTS', wk, i .. M_STORED) == 1 then
      -- a map: its items not started are cancelled with it; running ones finish
      local c = tostring(i)
      local mk = k_items(wk, c)
      local gone = 0
      local steps = tonumber(redis.call('HGET', dkey(wk), c .. D_STEPS) or '0')
      if steps > 0 then
        -- items of several steps: each in flight ends cancelled now (a step running goes
        -- on, its outcome recorded, and starts nothing); their ready steps leave the queues
        for _, k in ipairs(redis.call('SMEMBERS', k_flying(wk, c))) do
          cancel_ready_steps(wid, wk, c, k, steps)
          local r = tparse(redis.call('HGET', mk, k))
          r.s = 'cancelled'
          redis.call('HSET', mk, k, tpack(r))
          redis.call('SREM', k_flying(wk, c), k)
          move_count('running', 'cancelled')
          gone = gone + 1
        end
      end
      for _, item in ipairs(items_in(wk, c, 'ready')) do
        dequeue(wid, wk, item)
        local _, k = item_of(item)
        local r = tparse(redis.call('HGET', mk, k))
        r.s = 'cancelled'
        redis.call('HSET', mk, k, tpack(r))
        redis.call('SREM', k_flying(wk, c), k)
        move_count('ready', 'cancelled')
        gone = gone + 1
      end
      local f = redis.call('HMGET', wk, c .. M_STORED, c .. M_STARTED)
      local pending = tonumber(f[1] or '0') - tonumber(f[2] or '0')
      count('t:waiting', 0 - pending)
      count('t:cancelled', pending)
      redis.call('UNLINK', k_pending(wk, c))
      redis.call('HSET', wk, c .. M_STARTED, f[1] or '0')
      redis.call('HINCRBY', wk, c .. M_CANCELLED, gone + pending)
      redis.call('HINCRBY', wk, c .. M_FLYING, 0 - gone)
      redis.call('ZREM', K_EXPAND, wid .. ':' .. c)
      t.s = 'cancelled'
      redis.call('HSET', wk, i, tpack(t))
      move_count('running', 'cancelled')
      cancelled = cancelled + 1
    end
  end
  -- 0 - x, not -x: Lua's -0 is sent as "-0", which HINCRBY refuses
  local left = redis.call('HINCRBY', wk, F_LEFT, 0 - cancelled)
  set_finished(wid, wk, st, final, redis.call('HGET', wk, F_CREATED), left)
  workflow_ended(wid, wk, st, final)
  if why then
    redis.call('HSET', wk, F_REASON, why)
    emit(final, wid, -1, why)
  else
    emit(final, wid, -1, {cancelled, who})
  end
  return cancelled
end

-- Workflows past their deadline (at most `limit`) end failed, with the reason "deadline".
local function end_late(limit)
  local due = redis.call('ZRANGEBYSCORE', K_DEADLINES, '-inf', NOW, 'LIMIT', 0, limit)
  for _, wid in ipairs(due) do
    local wk = wkey(wid)
    local m = redis.call('HMGET', wk, F_STATE, F_COUNT)
    if m[1] == 'running' or m[1] == 'paused' then
      end_workflow(wid, wk, m[1], m[2], 'failed', nil, 'deadline')
    else
      redis.call('ZREM', K_DEADLINES, wid)
    end
  end
  return #due
end
