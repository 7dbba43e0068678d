-- schedule.lua: store, pause, unpause or remove one schedule (tick.lua fires it).
-- KEYS[1]  P:s:<name>
-- ARGV[3]  what: put | pause | unpause | rm;  ARGV[4] the name;  ARGV[5] who asks.
-- put      ARGV[6] spec JSON, ARGV[7] next tick ms, ARGV[8] its due ms ("" and "": no
--          tick left), ARGV[9] paused "1" | "0" | "" (keep as stored; new: "0"),
--          ARGV[10] pause_on_failure "1" | "0". A schedule put again keeps its counters,
--          last run and fired ticks; its version `v` goes up, so a scheduler that planned
--          with the old spec is refused (tick.lua).
-- unpause  ARGV[6] "keep": from the stored next tick (the ticks missed while paused are
--          then caught up as the schedule says); "set": from ARGV[7] next tick ms and
--          ARGV[8] its due ms (computed from now; "" "": no tick is left).
-- Returns 1 (put: 1 created, 0 updated; pause/unpause: 0 when it already was).
-- Every change is published on P:sched (schedulers wake up and plan again).
local sk, name, what, who = KEYS[1], ARGV[4], ARGV[3], ARGV[5]
local by = ',"by":' .. cjson.encode(who)
local out = 1
if what == 'put' then
  local spec, nt, nx, paused, pof = ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10]
  local old = redis.call('HMGET', sk, 'v', 'paused')
  if old[1] then
    out = 0
    if paused == '' then paused = old[2] or '0' end
    redis.call('HSET', sk, 'spec', spec, 'nt', nt, 'nx', nx, 'paused', paused, 'pof', pof)
    redis.call('HINCRBY', sk, 'v', 1)
  else
    if paused == '' then paused = '0' end
    -- every field there from the start: a missing field costs HMGET a scan
    redis.call('HSET', sk, 'spec', spec, 'v', 1, 'nt', nt, 'nx', nx, 'lt', '', 'cur', '',
      'paused', paused, 'pof', pof, 'ls', '', 'le', '', 'runs', 0, 'skipped', 0, 'missed', 0,
      'buffered', 0)
    redis.call('ZADD', K_SNAMES, NOW, name)
  end
  if paused == '0' and nx ~= '' then
    redis.call('ZADD', K_SDUE, nx, name)
  else
    redis.call('ZREM', K_SDUE, name)
  end
  schedule_event('put', 0, name, by)
else
  local h = redis.call('HMGET', sk, 'v', 'paused', 'nt', 'nx')
  if not h[1] then
    return redis.error_reply('RFNOTFOUND schedule ' .. name .. ' does not exist')
  end
  if what == 'pause' then
    if h[2] == '1' then out = 0 end
    redis.call('HSET', sk, 'paused', '1')
    redis.call('ZREM', K_SDUE, name)
    schedule_event('paused', 0, name, by)
  elseif what == 'unpause' then
    if h[2] ~= '1' then out = 0 end
    local nt, nx = ARGV[7], ARGV[8]
    if ARGV[6] == 'keep' then nt, nx = h[3], h[4] end
    redis.call('HSET', sk, 'paused', '0', 'nt', nt, 'nx', nx)
    if nx ~= '' then
      redis.call('ZADD', K_SDUE, nx, name)
    else
      redis.call('ZREM', K_SDUE, name)
    end
    schedule_event('unpaused', 0, name, by)
  elseif what == 'rm' then
    -- its runs are left alone: they finish (or not) as any workflow
    redis.call('DEL', sk, k_sticks(name))
    redis.call('ZREM', K_SDUE, name)
    redis.call('ZREM', K_SNAMES, name)
    schedule_event('removed', 0, name, by)
  else
    return redis.error_reply('RFSTATE unknown schedule operation ' .. what)
  end
end
redis.call('PUBLISH', K_SCHEDCHAN, name)
flush()
return out
