-- release.lua: resume a paused workflow: its held ready tasks go back to their queues.
-- KEYS[1]  P:w:<wid>;  ARGV[3] wid.
local wid, wk = ARGV[3], KEYS[1]
local m, refused = open_workflow(wid, wk, {'paused'},
  'only a paused workflow can be released', 'n', 'ct')
if refused then return refused end
set_wstate(wid, wk, 'paused', 'running', tonumber(m[3]))
local released = 0
for i = 0, tonumber(m[2]) - 1 do
  if tstate(redis.call('HGET', wk, i)) == 'ready'
      and not redis.call('ZSCORE', K_DELAYED, wid .. ':' .. i) then
    enqueue(wid, wk, i)
    released = released + 1
  end
end
emit('released', wid, -1, released)
flush()
return released
