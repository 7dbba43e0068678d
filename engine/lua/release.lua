-- release.lua: resume a paused workflow: its held ready tasks go back to their queues.
-- KEYS[1]  P:w:<wid>;  ARGV[3] wid.
local wid, wk = ARGV[3], KEYS[1]
local m = redis.call('HMGET', wk, 'st', 'n', 'ct')
if not m[1] then return redis.error_reply('RFNOTFOUND workflow ' .. wid .. ' does not exist') end
if m[1] ~= 'paused' then
  return redis.error_reply('RFSTATE workflow ' .. wid .. ' is ' .. m[1] .. '; only a paused workflow can be released')
end
set_wstate(wid, wk, 'paused', 'running', tonumber(m[3]))
local released = 0
for i = 0, tonumber(m[2]) - 1 do
  if tstate(redis.call('HGET', wk, i)) == 'ready'
      and not redis.call('ZSCORE', P .. ':delayed', wid .. ':' .. i) then
    enqueue(wid, wk, i)
    released = released + 1
  end
end
emit('released', wid, -1, released)
flush()
return released
