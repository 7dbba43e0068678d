-- drain.lua: an operator asks a live agent to drain: stop claiming, finish what it runs,
-- report and leave. The agent's next heartbeat reads the request (heartbeat.lua returns
-- 2); its stop (stop.lua) or a new registration clears it.
-- KEYS[1]  P:agents:live
-- ARGV[3] agent id.
-- Returns 1 (asked), 0 when the agent is known here but not live (stopped or dead), -1
-- when this shard does not know it.
local agent = ARGV[3]
if not redis.call('ZSCORE', KEYS[1], agent) then
  if redis.call('HEXISTS', K_AGENTS, agent) == 1 then return 0 end
  return -1
end
redis.call('HSET', K_AGENTS_DRAIN, agent, NOW)
emit('agent.draining', 0, -1, agent)
flush()
return 1
