-- register.lua: an agent starts (or restarts) and takes back the tasks recorded as its own.
-- KEYS[1]  P:agents
-- ARGV[3] agent id; ARGV[4] info JSON; ARGV[5] lease ms; ARGV[6] 1: the agent's start.
-- Returns the rows of the tasks it held (put_row in lib/claim_row.lua, one flat list):
-- each restarts with a new attempt number, so a lingering older process of the same id is
-- fenced off.
-- At its start, refused (RFEARLIER, the ids), registering nothing, while agents of an
-- earlier release are live: their info names an earlier task record form ("records") than
-- this agent's, or none, and they would misread the records this one writes
-- (lib/record.lua).
local agent = ARGV[3]
local function form_of(info)
  return tonumber(string.match(info, '"records": *(%d+)') or '1')
end
local form = form_of(ARGV[4])
local earlier = {}
local live = ARGV[6] == '1' and redis.call('ZRANGEBYSCORE', K_AGENTS_LIVE, NOW, '+inf') or {}
for _, id in ipairs(live) do
  if id ~= agent and form_of(redis.call('HGET', K_AGENTS, id) or '') < form then
    earlier[#earlier + 1] = id
  end
end
if #earlier > 0 then
  return redis.error_reply('RFEARLIER ' .. table.concat(earlier, ' '))
end
lease_clock(tonumber(ARGV[5]))
redis.call('HSET', K_AGENTS, agent, ARGV[4])
redis.call('HSET', K_AGENTS_STATE, agent, 'online')
redis.call('HDEL', K_AGENTS_DRAIN, agent)
redis.call('ZADD', K_AGENTS_LIVE, NOW + tonumber(ARGV[5]), agent)
redis.call('ZADD', K_AGENTS_SEEN, NOW, agent)
local rows = {}
local restarted = 0
local agent_json = cjson.encode(agent)
each_held(agent, function(member, wid, i, wk, f, t)
  local mine = t.s == 'running' and t.g == agent
  if mine and (f[1] == 'running' or f[1] == 'paused') then
    start_task(wid, wk, i, agent, agent_json, {f[1], f[2], f[4], f[5]}, f[3],
      item_of(i) == nil, nil, nil, rows, member)
    restarted = restarted + 1
  else
    if mine then drop_cancelled(wk, i, tonumber(f[2]), t) end
    redis.call('SREM', k_running(agent), member)
  end
end)
emit('agent.online', 0, -1, {agent, restarted})
flush()
return rows
