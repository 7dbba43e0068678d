-- heartbeat.lua: renew an agent's lease.
-- KEYS[1]  P:agents:live
-- ARGV[3] agent id; ARGV[4] lease ms.
-- Returns 1 (2: an operator asked it to drain, drain.lua), or 0 when the lease had
-- already expired and been reaped: the agent's tasks were handed on and it must register
-- again. A gap since the shard's last lease call
-- longer than Redis can explain moves every lease on first (lease_clock in lib/lease.lua).
local agent = ARGV[3]
if lease_clock(tonumber(ARGV[4])) > 0 then flush() end
if not redis.call('ZSCORE', KEYS[1], agent) then return 0 end
redis.call('ZADD', KEYS[1], NOW + tonumber(ARGV[4]), agent)
redis.call('ZADD', K_AGENTS_SEEN, NOW, agent)
if redis.call('HEXISTS', K_AGENTS_DRAIN, agent) == 1 then return 2 end
return 1
