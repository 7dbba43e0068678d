-- cancel.lua: end a running or paused workflow as cancelled. Tasks not yet started are
-- cancelled; running tasks finish and their outcome is recorded, but nothing more starts.
-- KEYS[1]  P:w:<wid>;  ARGV[3] wid; ARGV[4] who asks.
local wid, wk, who = ARGV[3], KEYS[1], ARGV[4]
local m, refused = open_workflow(wid, wk, {'running', 'paused', 'scheduled'},
  'only a running, paused or scheduled workflow can be cancelled', 'n')
if refused then return refused end
redis.call('ZREM', K_SCHEDULED, wid)
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
  elseif s == 'running' and redis.call('HEXISTS', wk, i .. 'h') == 1 then
    -- a map: its items not started are cancelled with it; running ones finish
    local c = tostring(i)
    local mk = k_items(wk, c)
    local gone = 0
    local steps = tonumber(redis.call('HGET', dkey(wk), c .. 'S') or '0')
    if steps > 0 then
      -- items of several steps: each in flight ends cancelled now (a step running goes
      -- on, its outcome recorded, and starts nothing); their ready steps leave the queues
      for _, k in ipairs(redis.call('SMEMBERS', k_flying(wk, c))) do
        for st = 0, steps - 1 do
          local r = redis.call('HGET', mk, k .. '.' .. st)
          if tstate(r) == 'ready' then
            dequeue(wid, wk, c .. '.' .. k .. '.' .. st)
            local sr = tparse(r)
            sr.s = 'cancelled'
            redis.call('HSET', mk, k .. '.' .. st, tpack(sr))
          end
        end
        local r = tparse(redis.call('HGET', mk, k))
        r.s = 'cancelled'
        redis.call('HSET', mk, k, tpack(r))
        redis.call('SREM', k_flying(wk, c), k)
        move_count('running', 'cancelled')
        gone = gone + 1
      end
    end
    for _, item in ipairs(items_in(wk, c, 'ready')) do
      dequeue(wid, wk, item)
      local _, k = item_of(item)
      local r = tparse(redis.call('HGET', mk, k))
      r.s = 'cancelled'
      redis.call('HSET', mk, k, tpack(r))
      redis.call('SREM', k_flying(wk, c), k)
      move_count('ready', 'cancelled')
      gone = gone + 1
    end
    local f = redis.call('HMGET', wk, c .. 'h', c .. 'x')
    local pending = tonumber(f[1] or '0') - tonumber(f[2] or '0')
    count('t:waiting', 0 - pending)
    count('t:cancelled', pending)
    redis.call('UNLINK', k_pending(wk, c))
    redis.call('HSET', wk, c .. 'x', f[1] or '0')
    redis.call('HINCRBY', wk, c .. 'c', gone + pending)
    redis.call('HINCRBY', wk, c .. 'y', 0 - gone)
    redis.call('ZREM', K_EXPAND, wid .. ':' .. c)
    t.s = 'cancelled'
    redis.call('HSET', wk, i, tpack(t))
    move_count('running', 'cancelled')
    cancelled = cancelled + 1
  end
end
-- 0 - x, not -x: Lua's -0 is sent as "-0", which HINCRBY refuses
redis.call('HINCRBY', wk, 'left', 0 - cancelled)
set_wstate(wid, wk, m[1], 'cancelled', NOW)
redis.call('HSET', wk, 'ft', NOW)
emit('cancelled', wid, -1, {cancelled, who})
flush()
return cancelled
