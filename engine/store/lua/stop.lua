-- stop.lua: an agent leaves cleanly; anything it still held goes back to ready.
-- KEYS[1]  P:agents:live
-- ARGV[3] agent id; then pairs of (member "<wid>:<idx>", attempt) for tasks it claimed
-- but never started: their attempt did not happen and is not counted.
local agent = ARGV[3]
local unstarted = {}
for k = 4, #ARGV - 1, 2 do unstarted[ARGV[k]] = ARGV[k + 1] end
each_held(agent, function(member, wid, i, wk, f, t)
  if t.s ~= 'running' or t.g ~= agent then return end
  if unstarted[member] ~= nil and tonumber(unstarted[member]) == t.a then
    t.a, t.g, t.b = t.a - 1, '', ''
  end
  if f[1] == 'running' or f[1] == 'paused' then
    t.s, t.q = 'ready', NOW - tonumber(f[2])
    set_record(wk, i, tpack(t))
    move_task(i, 'running', 'ready')
    if f[1] == 'running' then enqueue(wid, wk, i) end
    emit_task('requeued', wid, i, agent)
  else
    drop_cancelled(wk, i, tonumber(f[2]), t)
  end
end)
redis.call('DEL', k_running(agent))
redis.call('ZREM', KEYS[1], agent)
redis.call('ZADD', K_AGENTS_SEEN, NOW, agent)
redis.call('HSET', K_AGENTS_STATE, agent, 'stopped')
redis.call('HDEL', K_AGENTS_DRAIN, agent)
emit('agent.stopped', 0, -1, agent)
flush()
return 1
