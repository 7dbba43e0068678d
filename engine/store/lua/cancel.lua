-- cancel.lua: end a running or paused workflow as cancelled. Tasks not yet started are
-- cancelled; running tasks finish and their outcome is recorded, but nothing more starts.
-- KEYS[1]  P:w:<wid>;  ARGV[3] wid.
local wid, wk = ARGV[3], KEYS[1]
local m, refused = open_workflow(wid, wk, {'running', 'paused'},
  'only a running or paused workflow can be cancelled', 'n')
if refused then return refused end
local cancelled = 0
for i = 0, tonumber(m[2]) - 1 do
  local t = tparse(redis.call('HGET', wk, i))
  local s = t.s
  if s == 'waiting' or s == 'ready' then
    if s == 'ready' then dequeue(wid, wk, i) end
    t.s = 'cancelled'
    redis.call('HSET', wk, i, tpack(t))
    redis.call('HDEL', wk, i .. 'w')
    move_count(s, 'cancelled')
    cancelled = cancelled + 1
  end
end
-- 0 - x, not -x: Lua's -0 is sent as "-0", which HINCRBY refuses
redis.call('HINCRBY', wk, 'left', 0 - cancelled)
set_wstate(wid, wk, m[1], 'cancelled', NOW)
redis.call('HSET', wk, 'ft', NOW)
emit('cancelled', wid, -1, cancelled)
flush()
return cancelled
