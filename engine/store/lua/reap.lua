-- reap.lua: housekeeping any agent runs every few seconds; every step is idempotent.
--  1. agents whose lease expired: their running tasks go back to ready (or fail after
--     too many lost leases), the agent is marked dead;
--  2. retries whose backoff is over go to their queues;
--  3. finished workflows older than the retention period (or their own) are cleaned up,
--     at most ARGV[5] a call (lib/retention.lua);
--  4. agents not seen for a day are forgotten;
--  5. attempts past their task's timeout are returned, for the caller to fail (timed_out).
-- KEYS[1]  P:agents:live
-- ARGV[3] retention ms (0 = keep forever); ARGV[4] max lost leases per task;
-- ARGV[5] at most this many workflows cleaned per call;
-- ARGV[6] the agent asking ("" for anyone), ARGV[7] ms: with an agent, this shard's
--         housekeeping is its own for that long (P:hk), renewed by each of its calls, and
--         a call by another agent meanwhile does nothing and returns {-1}: each shard is
--         looked after by one agent at a time, not by every agent;
-- ARGV[8] the asking agent's lease ms (absent: none; see lease_clock in lib/lease.lua);
-- ARGV[9] "1": step 3 only, for a shard whose last batch was full (Engine.maintain calls
--         again while its batches come back full, within a time budget: a backlog goes
--         in calls that each hold Redis briefly).
-- Returns {agents reaped, tasks requeued, retries promoted, workflows cleaned, {timed out
-- attempts: {wid, idx, attempt, agent, timeout ms}...}}.
local keeper = ARGV[6] or ''
-- before the keeper check: every call is a sign of Redis running (lease_clock, lib/lease.lua)
local stalled = lease_clock(tonumber(ARGV[8]))
if keeper ~= '' then
  local owner = redis.call('GET', K_HK)
  if owner and owner ~= keeper then
    if stalled > 0 then flush() end
    return {-1}
  end
  redis.call('PSETEX', K_HK, ARGV[7], keeper)
end
local retention = tonumber(ARGV[3])
local max_lost = tonumber(ARGV[4])
local limit = tonumber(ARGV[5])
if ARGV[9] == '1' then
  local cleaned = sweep_retention(retention, limit)
  flush()
  return {0, 0, 0, cleaned, {}}
end
local reaped, requeued, cleaned = 0, 0, 0
for _, agent in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', NOW, 'LIMIT', 0, 100)) do
  each_held(agent, function(member, wid, i, wk, f, t)
    if t.s == 'running' and t.g == agent then
      local ct = tonumber(f[2])
      local h, fld = rec_at(wk, i)
      local lost = redis.call('HINCRBY', h, fld .. T_LOST, 1)
      if f[1] ~= 'running' and f[1] ~= 'paused' then
        drop_cancelled(wk, i, ct, t)
      elseif lost > max_lost then
        t.s, t.d = 'failed', NOW - ct
        redis.call('HSET', h, fld, tpack(t),
          fld .. T_ERROR, 'agent ' .. agent .. ' was lost while running it ' .. lost .. ' times')
        move_task(i, 'running', 'failed')
        emit_task('failed', wid, i, 'agent lost')
        local c, k = item_of(i)
        local item, step = nil, nil
        if c ~= nil then item, step = step_key(k) end
        if c == nil then
          redis.call('HINCRBY', wk, F_BAD, 1)
          redis.call('HINCRBY', wk, F_LEFT, -1)
          skip_descendants(wid, wk, i)
        elseif step == nil then
          item_ended(wid, wk, c, k, false, true, f[1] == 'running')
        else
          step_ended(wid, wk, c, item, step, false, 'agent lost', f[1] == 'running',
            NOW - ct, function(ok)
              move_count('running', 'failed')
              item_ended(wid, wk, c, item, false, true, f[1] == 'running')
            end)
        end
        finish_if_done(wid, wk)
      else
        t.s, t.q = 'ready', NOW - ct
        set_record(wk, i, tpack(t))
        move_task(i, 'running', 'ready')
        if f[1] == 'running' then enqueue(wid, wk, i) end
        emit_task('requeued', wid, i, agent)
        requeued = requeued + 1
      end
    end
  end)
  redis.call('DEL', k_running(agent))
  redis.call('ZREM', KEYS[1], agent)
  redis.call('HSET', K_AGENTS_STATE, agent, 'dead')
  emit('agent.dead', 0, -1, agent)
  reaped = reaped + 1
end
local promoted = promote_due(1000) + start_due(1000)
end_late(limit)
-- Finished workflows past their retention, a batch (lib/retention.lua): a full one says
-- more are due, and Engine.maintain calls this script again with only this step (ARGV[9])
cleaned = sweep_retention(retention, limit)
for _, agent in ipairs(redis.call('ZRANGEBYSCORE', K_AGENTS_SEEN, '-inf', NOW - 86400000, 'LIMIT', 0, 100)) do
  if not redis.call('ZSCORE', KEYS[1], agent) then
    redis.call('ZREM', K_AGENTS_SEEN, agent)
    redis.call('HDEL', K_AGENTS, agent)
    redis.call('HDEL', K_AGENTS_STATE, agent)
    redis.call('HDEL', K_AGENTS_DRAIN, agent)
  end
end
local late = timed_out(limit)
flush()
return {reaped, requeued, promoted, cleaned, late}
