-- stop.lua: an agent leaves cleanly; anything it still held goes back to ready.
-- KEYS[1]  P:agents:live
-- ARGV[3] agent id.
local agent = ARGV[3]
local run_key = P .. ':run:' .. agent
for _, member in ipairs(redis.call('SMEMBERS', run_key)) do
  local wid, i = split_member(member)
  local wk = wkey(wid)
  local f = redis.call('HMGET', wk, 'st', 'ct', i .. 's', i .. 'g')
  if f[3] == 'running' and f[4] == agent then
    if f[1] == 'running' or f[1] == 'paused' then
      redis.call('HSET', wk, i .. 's', 'ready', i .. 'q', NOW - tonumber(f[2]))
      move_count('running', 'ready')
      if f[1] == 'running' then enqueue(wid, wk, i) end
      emit('requeued', wid, tonumber(i), agent)
    else
      drop_cancelled(wk, i, tonumber(f[2]))
    end
  end
end
redis.call('DEL', run_key)
redis.call('ZREM', KEYS[1], agent)
redis.call('ZADD', P .. ':agents:seen', NOW, agent)
redis.call('HSET', P .. ':agents:state', agent, 'stopped')
emit('agent.stopped', 0, -1, agent)
flush()
return 1
