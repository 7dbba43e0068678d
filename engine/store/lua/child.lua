-- child.lua: a run: task's child run started, or ended (engine/runtime/child_runs.py).
-- KEYS[1]  P:w:<wid> (the parent run);  ARGV[3] wid; ARGV[4] the task's index; ARGV[5]
-- the attempt the child was started for (the fencing token); ARGV[6] what happened:
--   "link"       the child ARGV[7] was started ("" when the parent is gone: the entry goes)
--   "succeeded"  it succeeded: ARGV[7] its result (JSON), the task's output
--   "failed"     it failed: ARGV[7] why; the task fails, or runs again with a new child
--                while it has attempts left (max_attempts)
--   "fatal"      it was cancelled, or could not start: ARGV[7] why; the task fails
--   "count"      (before a child starts) KEYS[1] is the root run of the parent's tree,
--                ARGV[3] its id, ARGV[4] the parent task "<wid>:<idx>:<attempt>" about to
--                start a child, ARGV[7] the most the tree may have: counted once per
--                parent task in P:w:<root>:dc; returns "ok", "over" (as many are counted
--                already: nothing written) or "gone" (no such root run)
-- ARGV[8] the child's id (for the record; "" when none started). Anything for an attempt
-- that is no longer suspended does nothing. Returns "ok" or "stale".
local wid, wk, i, attempt, how, value = ARGV[3], KEYS[1], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
if how == 'count' then
  if redis.call('EXISTS', wk) == 0 then return 'gone' end
  local dk = k_descendants(wk)
  if redis.call('SISMEMBER', dk, i) == 1 then return 'ok' end  -- a keeper's retry
  if redis.call('SCARD', dk) >= tonumber(value) then return 'over' end
  redis.call('SADD', dk, i)
  return 'ok'
end
local member = wid .. ':' .. i
local m = redis.call('HMGET', wk, F_STATE, i, F_DIGEST)
local s, a = tparts(m[2])
if not m[1] or s ~= 'suspended' or a ~= attempt then
  if how == 'link' then redis.call('ZREM', K_SPAWN, member) end
  return 'stale'
end
if how == 'link' then
  redis.call('ZREM', K_SPAWN, member)
  redis.call('HSET', k_children(wk), i, value)
  redis.call('HSET', wk, i .. T_CHILD, value)
  emit('child', wid, -1, {tonumber(i), value})
  flush()
  return 'ok'
end
-- what ended it: its child, or (none started: refused, too deep, too many) nothing
local meta = cjson.encode(ARGV[8] ~= '' and {child = ARGV[8], at = NOW} or {nochild = true, at = NOW})
if how == 'succeeded' then
  end_wait(wid, wk, i, 'suspended', 'succeeded', value, meta)
elseif how == 'failed' then
  local failures = redis.call('HINCRBY', wk, i .. T_FAILURES, 1)
  local most = tonumber(redis.call('HGET', dkey(wk, m[3]), i .. D_ATTEMPTS) or '1')
  if failures < most and (m[1] == 'running' or m[1] == 'paused') then
    -- another attempt: reached again, a new child (its key has the new attempt)
    local ct = tonumber(redis.call('HGET', wk, F_CREATED))
    local t = tparse(m[2])
    t.s, t.q = 'ready', NOW - ct
    redis.call('HSET', wk, i, tpack(t), i .. T_ERROR, value)
    redis.call('HDEL', k_children(wk), i)
    move_count('suspended', 'ready')
    emit('retrying', wid, i, {failures, 0})
    if m[1] == 'running' then
      redis.call('ZADD', k_queue(WAIT_TYPE), queue_score(0, wid), member)
      wake[WAIT_TYPE] = true
    end
  else
    end_wait(wid, wk, i, 'suspended', 'failed', value, meta)
  end
else
  end_wait(wid, wk, i, 'suspended', 'failed', value, meta)
end
flush()
return 'ok'
