-- pause.lua: hold a running workflow. Running tasks finish; ready tasks leave the queues
-- (a task in retry backoff stays there and is held when its backoff ends).
-- KEYS[1]  P:w:<wid>;  ARGV[3] wid.
local wid, wk = ARGV[3], KEYS[1]
local m = redis.call('HMGET', wk, 'st', 'n', 'ct')
if not m[1] then return redis.error_reply('RFNOTFOUND workflow ' .. wid .. ' does not exist') end
if m[1] ~= 'running' then
  return redis.error_reply('RFSTATE workflow ' .. wid .. ' is ' .. m[1] .. '; only a running workflow can be paused')
end
set_wstate(wid, wk, 'running', 'paused', tonumber(m[3]))  -- running/paused: by creation
local held = 0
for i = 0, tonumber(m[2]) - 1 do
  if tstate(redis.call('HGET', wk, i)) == 'ready' then
    local typ = redis.call('HGET', dkey(wk), i .. 'T') or ''
    held = held + redis.call('ZREM', P .. ':q:' .. typ, wid .. ':' .. i)
  end
end
emit('paused', wid, -1, held)
flush()
return held
