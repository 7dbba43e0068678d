-- release.lua: resume a paused workflow: its held ready tasks go back to their queues;
-- or start a scheduled one now.
-- KEYS[1]  P:w:<wid>;  ARGV[3] wid; ARGV[4] who asks.
local wid, wk, who = ARGV[3], KEYS[1], ARGV[4]
local m, refused = open_workflow(wid, wk, {'paused', 'scheduled'},
  'only a paused or scheduled workflow can be released', F_COUNT, F_CREATED)
if refused then return refused end
if m[1] == 'scheduled' then
  local started = start_held(wid, wk, who)
  flush()
  return started
end
set_wstate(wid, wk, 'paused', 'running', tonumber(m[3]))
local released = 0
local function release(i)
  if not redis.call('ZSCORE', K_DELAYED, wid .. ':' .. i) then
    enqueue(wid, wk, i)
    released = released + 1
  end
end
for i = 0, tonumber(m[2]) - 1 do
  local s = tstate(redis.call('HGET', wk, i))
  if s == 'ready' then
    release(i)
  elseif s == 'running' and redis.call('HEXISTS', wk, i .. M_STORED) == 1 then
    for _, item in ipairs(items_in(wk, i, 'ready')) do release(item) end
    materialize(wid, wk, tostring(i), true)  -- items that ended while paused made room
  end
end
emit('released', wid, -1, {released, who})
flush()
return released
