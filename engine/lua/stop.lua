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
  local f = redis.call('HMGET', wk, 'st', 'ct', i)
  local t = tparse(f[3])
  if t.s == 'running' and t.g == agent then
    if unstarted[member] ~= nil and tonumber(unstarted[member]) == t.a then
      t.a, t.g, t.b = t.a - 1, '', ''
    end
    if f[1] == 'running' or f[1] == 'paused' then
      t.s, t.q = 'ready', NOW - tonumber(f[2])
      redis.call('HSET', wk, i, tpack(t))
      move_count('running', 'ready')
      if f[1] == 'running' then enqueue(wid, wk, i) end
      emit('requeued', wid, tonumber(i), agent)
    else
      drop_cancelled(wk, i, tonumber(f[2]), t)
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
