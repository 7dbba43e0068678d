-- pause.lua: hold a running workflow. Running tasks finish; ready tasks leave the queues
-- (a task in retry backoff stays there and is held when its backoff ends).
-- KEYS[1]  P:w:<wid>;  ARGV[3] wid; ARGV[4] who asks.
local wid, wk, who = ARGV[3], KEYS[1], ARGV[4]
local m, refused = open_workflow(wid, wk, {'running'},
  'only a running workflow can be paused', F_COUNT, F_CREATED)
if refused then return refused end
set_wstate(wid, wk, 'running', 'paused', tonumber(m[3]))  -- running/paused: by creation
local held = 0
for i = 0, tonumber(m[2]) - 1 do
  local s = tstate(redis.call('HGET', wk, i))
  if s == 'ready' then
    local typ = redis.call('HGET', dkey(wk), i .. D_TYPE) or ''
    if has_feature(dkey(wk), D_RATE) and rate_dequeue(wk, dkey(wk), wid .. ':' .. i, i, i, typ) then
      held = held + 1
    else
      held = held + redis.call('ZREM', k_queue(typ), wid .. ':' .. i)
    end
  elseif s == 'running' and redis.call('HEXISTS', wk, i .. M_STORED) == 1 then
    local typ = redis.call('HGET', dkey(wk), i .. D_TYPE) or ''
    for _, item in ipairs(items_in(wk, i, 'ready')) do
      local t = typ
      if not counted(item) then  -- a step: its own type
        local _, _, di = rec_at(wk, item)
        t = redis.call('HGET', dkey(wk), di .. D_TYPE) or ''
      end
      held = held + redis.call('ZREM', k_queue(t), wid .. ':' .. item)
    end
  end
end
emit('paused', wid, -1, {held, who})
flush()
return held
