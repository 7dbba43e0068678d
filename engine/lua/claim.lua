-- claim.lua: an agent takes up to `count` ready tasks of one type.
-- KEYS[1]  P:q:<type>
-- ARGV[3] agent id; ARGV[4] count.
-- Returns one row per task (see start_task in _lib.lua), or the error "RFLEASE ..." when
-- the agent holds no live lease (it was declared dead: it must register again).
local agent = ARGV[3]
local want = tonumber(ARGV[4])
if not redis.call('ZSCORE', P .. ':agents:live', agent) then
  return redis.error_reply('RFLEASE agent ' .. agent .. ' holds no lease')
end
promote_due(100)
local rows = {}
local popped = redis.call('ZPOPMIN', KEYS[1], want)
for k = 1, #popped, 2 do
  local wid, i = split_member(popped[k])
  local wk = wkey(wid)
  local f = redis.call('HMGET', wk, 'st', 'ct', i .. 's')
  -- Pause, cancel and cleanup take tasks out of the queues, so this only guards against
  -- a queue entry written by hand or by an older version.
  if f[1] == 'running' and f[3] == 'ready' then
    move_count('ready', 'running')
    rows[#rows + 1] = start_task(wid, wk, i, agent, tonumber(f[2]))
  end
end
flush()
return rows
