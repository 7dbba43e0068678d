-- waits.lua: wait tasks' side of housekeeping, run on a wake-up of P:wake:~wait and when
-- the next timer is due: wait tasks just reached become suspended (a signal kept for one
-- ends it), and due timers end theirs (lib/waits.lua). Every step is idempotent: any
-- number of agents may call it.
-- KEYS[1]  P:timers;  ARGV[3] at most this many of each per call.
-- Returns {waits activated, timers fired, ms until the next timer or -1, more}: more is 1
-- when a limit was reached (call again at once).
local limit = tonumber(ARGV[3])
local activated = activate_waits(limit)
local fired = fire_timers(limit)
local more = 0
if activated >= limit or fired >= limit then more = 1 end
flush()
return {activated, fired, next_timer(), more}
