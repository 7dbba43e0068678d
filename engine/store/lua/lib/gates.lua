-- lib/gates.lua: Flow control: gates, held workflows, schedules' runs.

-- Flow control at a workflow's start and end: gates (concurrency keys), a schedule's
-- runs, a workflow's own retention. A workflow's gates are its field `g`, JSON
-- [[gate, limit], ...]: it runs only while it holds a slot of each; P:cc counts the
-- running holders per gate, P:cq:<gate> queues the workflows waiting (scored by id:
-- oldest first). Slots are taken all at once or not at all, so a waiting workflow holds
-- none, and every end path (finish_if_done, end_workflow) gives them back.

local function gate_busy(g, limit)
  return tonumber(redis.call('HGET', K_CC, g) or '0') >= tonumber(limit)
end

-- The first of `gates` with no room, or nil.
local function full_gate(gates)
  for _, g in ipairs(gates) do
    if gate_busy(g[1], g[2]) then return g[1] end
  end
  return nil
end

-- Take a slot of each gate and return true, or queue wid at the first full one.
local function admit(wid, gates)
  local full = full_gate(gates)
  if full then
    redis.call('ZADD', k_gate_queue(full), tonumber(wid), wid)
    return false
  end
  for _, g in ipairs(gates) do redis.call('HINCRBY', K_CC, g[1], 1) end
  return true
end

-- Start a workflow held back: `scheduled` (its time came, or it was released) or
-- `queued` (its gates made room and it holds their slots). Its ready tasks go to their
-- queues (or wait out their delay) and its deadline starts. A scheduled workflow with
-- gates takes their slots first, or waits `queued`. Returns how many tasks it queued.
local function start_held(wid, wk, who)
  local m = redis.call('HMGET', wk, F_STATE, F_COUNT, F_CREATED, F_GATES)
  redis.call('ZREM', K_SCHEDULED, wid)
  if m[1] ~= 'scheduled' and m[1] ~= 'queued' then return 0 end
  if m[1] == 'scheduled' then
    redis.call('HDEL', wk, F_START_AT)
    if m[4] and not admit(wid, cjson.decode(m[4])) then
      set_wstate(wid, wk, 'scheduled', 'queued', tonumber(m[3]))
      emit('queued', wid, -1)
      return 0
    end
  end
  set_wstate(wid, wk, m[1], 'running', tonumber(m[3]))
  local dl = redis.call('HGET', wk, F_DEADLINE)
  if dl then
    redis.call('ZADD', K_DEADLINES, NOW + tonumber(dl), wid)
    redis.call('HSET', wk, F_DUE, NOW + tonumber(dl))
  end
  local started = 0
  for i = 0, tonumber(m[2]) - 1 do
    local rec = redis.call('HGET', wk, i)
    if tstate(rec) == 'ready' then
      local delay = tonumber(redis.call('HGET', dkey(wk), i .. D_DELAY) or '0')
      if delay > 0 then
        redis.call('ZADD', K_DELAYED, NOW + delay, wid .. ':' .. i)
        local t = tparse(rec)
        t.q = NOW - tonumber(m[3]) + delay
        redis.call('HSET', wk, i, tpack(t))
      else
        enqueue(wid, wk, tostring(i))
        started = started + 1
      end
    end
  end
  if who then emit('started', wid, -1, {started, who}) else emit('started', wid, -1) end
  return started
end


-- Gate g has a free slot: start the oldest workflow waiting for it, if all its gates
-- have room; one that waits for another full gate moves to that gate's queue.
local function open_gate(g)
  local q = k_gate_queue(g)
  for _ = 1, 100 do
    local head = redis.call('ZRANGE', q, 0, 0)[1]
    if not head then return end
    redis.call('ZREM', q, head)
    local wk = wkey(head)
    local gates = redis.call('HGET', wk, F_GATES)
    if gates and redis.call('HGET', wk, F_STATE) == 'queued' then
      gates = cjson.decode(gates)
      local full = full_gate(gates)
      if full == g then  -- no room after all: it stays first
        redis.call('ZADD', q, tonumber(head), head)
        return
      elseif full then
        redis.call('ZADD', k_gate_queue(full), tonumber(head), head)
      else
        for _, x in ipairs(gates) do redis.call('HINCRBY', K_CC, x[1], 1) end
        start_held(head, wk, nil)
        return
      end
    end
  end
end

-- A run of schedule sn ended `final`: the schedule records it, and pauses itself on a
-- failure when it says pause_on_failure (field pof).
local function schedule_run_ended(sn, wid, final)
  local sk = k_schedule(sn)
  local s = redis.call('HMGET', sk, 'pof', 'paused', 'spec')
  if not s[3] then return end  -- the schedule was removed: its runs go on alone
  redis.call('HSET', sk, 'ls', final, 'le', NOW, 'lw', wid)
  if final == 'failed' and s[1] == '1' and s[2] ~= '1' then
    redis.call('HSET', sk, 'paused', '1')
    redis.call('ZREM', K_SDUE, sn)
    emit('schedule.paused', wid, -1, {sn, 'failed'})
    redis.call('PUBLISH', K_SCHEDCHAN, sn)
  end
end
