-- lib/housekeeping.lua: Housekeeping: timeouts, due workflows and retries.

-- A running task (record `t`) whose agent is gone (lost, stopped or restarted) while its
-- workflow was cancelled: it will not run again.
local function drop_cancelled(wk, i, ct, t)
  t.s, t.d = 'cancelled', NOW - ct
  set_record(wk, i, tpack(t))
  if item_of(i) == nil then redis.call('HINCRBY', wk, F_LEFT, -1) end
  move_task(i, 'running', 'cancelled')
end

-- Start workflow wid, scheduled to start later (or now: released early): its ready
-- tasks (its roots) go to their queues. Returns how many.
-- Attempts past their task's timeout (at most `limit`): {wid, i, attempt, agent,
-- timeout ms} each, for the caller to fail as their agent would (complete.lua as that
-- agent: the same retries, skips and counters; the agent's own late result is then
-- rejected by the fencing token). Entries of attempts that ended are dropped here.
local function timed_out(limit)
  local out = {}
  local due = redis.call('ZRANGEBYSCORE', K_TIMEOUTS, '-inf', NOW, 'LIMIT', 0, limit)
  for _, member in ipairs(due) do
    local wid, rest = split_member(member)
    local i, a = string.match(rest, '^(.*):([^:]*)$')
    local wk = wkey(wid)
    local f = read_for_task(wk, i)
    local s, ra, _, _, _, g = tparts(f[3])
    if f[1] and s == 'running' and ra == a then
      local _, _, di = rec_at(wk, i)
      out[#out + 1] = {wid, i, a, g, redis.call('HGET', dkey(wk, f[4]), di .. D_TIMEOUT) or '0'}
    else
      redis.call('ZREM', K_TIMEOUTS, member)
    end
  end
  return out
end

-- Start the scheduled workflows whose time has come (at most `limit`).
local function start_due(limit)
  local due = redis.call('ZRANGEBYSCORE', K_SCHEDULED, '-inf', NOW, 'LIMIT', 0, limit)
  for _, wid in ipairs(due) do start_held(wid, wkey(wid), nil) end
  return #due
end

-- Move tasks whose retry backoff is over into their queues (held if paused), and rate
-- limit buckets whose next token has come back into theirs.
local function promote_due(limit)
  local due = redis.call('ZRANGEBYSCORE', K_DELAYED, '-inf', NOW, 'LIMIT', 0, limit)
  for _, member in ipairs(due) do
    redis.call('ZREM', K_DELAYED, member)
    if string.byte(member, 1) == 126 then
      bucket_due(string.sub(member, 2))
    else
      local wid, i = split_member(member)
      local wk = wkey(wid)
      local h, fld = rec_at(wk, i)
      if redis.call('HGET', wk, F_STATE) == 'running'
          and tstate(redis.call('HGET', h, fld)) == 'ready' then
        enqueue(wid, wk, i)
      end
    end
  end
  return #due
end
