-- lib/lease.lua: The lease clock: leases count only time Redis was seen running.

-- Leases count only time Redis was seen running. While any agent lives, heartbeats and
-- housekeeping reach each shard every few seconds (K_LCLK: `t` the NOW of the last one,
-- `a` the gap that caller allows, a third of its lease); a longer gap means Redis
-- itself stood still (frozen, swapping, a long fork, a restart) or nobody called. Every
-- live lease is then moved on by the part of the gap beyond the allowance (the smaller
-- of the caller's and the last caller's), so an agent is declared dead only for
-- heartbeats it missed while Redis ran: at most a third of a lease of a freeze counts,
-- and with a heartbeat every third of a lease, a frozen Redis never turns healthy
-- agents' running tasks over to others. A lease is never moved past its own length
-- after the first call that follows the gap, so a truly dead agent is still reaped at
-- most one lease later. register, heartbeat and reap call it before they read or write
-- a lease (`lease_ms`: the caller's lease; nil for a caller without one). Returns the
-- gap counted out (ms).
local STALL_MS = 5000  -- the allowance when no caller said one
local function lease_clock(lease_ms)
  local c = redis.call('HMGET', K_LCLK, 't', 'a')
  local last, allow = tonumber(c[1]), tonumber(c[2]) or STALL_MS
  local own = allow
  if lease_ms and lease_ms > 0 then
    own = math.floor(lease_ms / 3)
    if own < allow then allow = own end
  end
  redis.call('HSET', K_LCLK, 't', NOW, 'a', own)
  if not last then return 0 end
  local gap = NOW - last - allow
  if gap <= 0 then return 0 end
  local live = redis.call('ZRANGE', K_AGENTS_LIVE, 0, -1, 'WITHSCORES')
  for k = 1, #live, 2 do
    redis.call('ZADD', K_AGENTS_LIVE, tonumber(live[k + 1]) + gap, live[k])
  end
  if #live > 0 then emit('agent.leases_extended', 0, -1, {gap + allow, #live / 2}) end
  return gap
end
