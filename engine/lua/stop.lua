-- stop.lua: an agent leaves cleanly; anything it still held goes back to ready.
-- KEYS[1]  P:agents:live
-- ARGV[3] agent id; then pairs of (member "<wid>:<idx>", attempt) for tasks it claimed
-- but never started: their attempt did not happen and is not counted.
local agent = ARGV[3]
local run_key = P .. ':run:' .. agent
local unstarted = {}
for k = 4, #ARGV - 1, 2 do unstarted[ARGV[k]] = ARGV[k + 1] end
for _, member in ipairs(redis.call('SMEMBERS', run_key)) do
  local wid, i = split_member(member)
  local wk = wkey(wid)
  local f = redis.call('HMGET', wk, 'st', 'ct', i .. 's', i .. 'g', i .. 'a')
  if f[3] == 'running' and f[4] == agent then
    if unstarted[member] ~= nil and unstarted[member] == f[5] then
      local a = tonumber(f[5]) - 1
      redis.call('HDEL', wk, i .. 'g', i .. 'b')
      if a > 0 then redis.call('HSET', wk, i .. 'a', a) else redis.call('HDEL', wk, i .. 'a') end
    end
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
