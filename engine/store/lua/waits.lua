-- waits.lua: wait tasks' side of housekeeping, run on a wake-up of P:wake:~wait and when
-- the next timer is due: wait tasks just reached become suspended (a signal kept for one
-- ends it), and due timers end theirs (lib/wait_tasks.lua); child runs to start, child runs
-- that ended and orphans to cancel are handed to the caller (engine/runtime/child_runs.py), each
-- leased 30 s until acknowledged. Every step is idempotent: any number of agents may
-- call it.
-- KEYS[1]  P:timers;  ARGV[3] at most this many of each per call; ARGV[4..] entries
-- acknowledged: "e:<child wid>" (its end was reported), "o:<child wid>" (cancelled).
-- Returns {waits activated, timers fired, ms until the next timer or -1, more, child runs
-- to start ("wid:i:attempt"), child runs that ended, orphans}: more is 1 when a limit was
-- reached (call again at once).
local limit = tonumber(ARGV[3])
for k = 4, #ARGV do
  local kind, wid = string.sub(ARGV[k], 1, 1), string.sub(ARGV[k], 3)
  if kind == 'e' then redis.call('ZREM', K_CHILD_ENDS, wid) else redis.call('ZREM', K_ORPHANS, wid) end
end
local activated = activate_waits(limit)
local fired = fire_timers(limit)
local more = 0
if activated >= limit or fired >= limit then more = 1 end
local spawns = due_spawns(limit)
local ends = lease_due(K_CHILD_ENDS, limit)
local orphans = lease_due(K_ORPHANS, limit)
flush()
return {activated, fired, next_timer(), more, spawns, ends, orphans}
