-- lib/wait_tasks.lua: Wait tasks: suspended until a signal, a time or a child run ends.

-- A wait task (engine/spec/wait_tasks.py) has the reserved type WAIT_TYPE: it is queued like any
-- ready task (P:q:~wait, a wake-up on P:wake:~wait), and activate_waits takes it from
-- there: suspended, with no agent, slot or lease. A signal kept for it (its mailbox,
-- P:w:<wid>:sq:<name>) ends it at once; else a timer (its signal's timeout, its sleep) goes in
-- K_TIMERS, scored by its ready time plus that span. A signal (signal.lua), a timer
-- (fire_timers) or an operator ends it through end_wait, which does what complete.lua
-- does for a handler's outcome: record, counters, children, the workflow's end.
local WAIT_TYPE = '~wait'
local MAX_KEPT_SIGNALS = 100  -- per run and name (engine/runtime/signals.py caps the bytes)

-- The wait spec of task i (its definition's <i>A, decoded), or nil.
local function wait_spec(wk, i, digest)
  local raw = redis.call('HGET', dkey(wk, digest), i .. D_WAIT)
  if not raw then return nil end
  return cjson.decode(raw)
end

-- End wait task i of workflow wid, now `from` (suspended, or ready: reached, not yet
-- activated): `how` is 'succeeded' (output JSON `value`, '' for none), 'failed' (error
-- text `value`) or 'skipped'; `meta` (JSON, or nil) says what ended it (field <i>a).
local function end_wait(wid, wk, i, from, how, value, meta)
  local m = redis.call('HMGET', wk, F_STATE, F_CREATED, i)
  local wst, ct = m[1], tonumber(m[2])
  local live = wst == 'running' or wst == 'paused'
  local member = wid .. ':' .. i
  if from == 'ready' then redis.call('ZREM', k_queue(WAIT_TYPE), member) end
  redis.call('ZREM', K_TIMERS, member)
  local t = tparse(m[3])
  t.s, t.d = how, NOW - ct
  if t.b == '' then t.b = t.d end
  if t.a == 0 then t.a = 1 end
  if meta then redis.call('HSET', wk, i .. T_SIGNAL, meta) end
  move_count(from, how)
  if how == 'succeeded' then
    if value ~= '' then
      redis.call('HSET', wk, i, tpack(t), i .. T_OUTPUT, value)
    else
      redis.call('HSET', wk, i, tpack(t))
    end
    redis.call('HDEL', wk, i .. T_ERROR)
    redis.call('HINCRBY', wk, F_OK, 1)
    redis.call('HINCRBY', wk, F_LEFT, -1)
    emit('succeeded', wid, i)
    local kids = split_csv(redis.call('HGET', dkey(wk), i .. D_CHILDREN))
    if #kids > 0 then release_children(wid, wk, kids, ct, wst == 'running') end
  else
    if how == 'failed' then
      redis.call('HSET', wk, i, tpack(t), i .. T_ERROR, value)
      redis.call('HINCRBY', wk, F_BAD, 1)
      emit('failed', wid, i, value)
    else
      redis.call('HSET', wk, i, tpack(t))
      redis.call('HINCRBY', wk, F_SKIP, 1)
      emit('skipped', wid, i)
    end
    redis.call('HINCRBY', wk, F_LEFT, -1)
    if live then skip_descendants(wid, wk, i) end
  end
  if live then finish_if_done(wid, wk) end
end

-- A kept signal as its mailbox holds it: its record (JSON: by, at, i id, c comment, r
-- rejected, u identity) then "\n" and its payload JSON as sent, so a payload of
-- megabytes is neither escaped nor parsed (cjson escapes a newline in the record).
local function kept_pack(sig)
  local record = {by = sig.by, at = sig.at, i = sig.i, c = sig.c, r = sig.r, u = sig.u}
  return cjson.encode(record) .. '\n' .. (sig.p or '')
end

local function kept_unpack(s)
  local cut = string.find(s, '\n', 1, true)
  local sig = cjson.decode(string.sub(s, 1, cut - 1))
  sig.p = string.sub(s, cut + 1)
  return sig
end

-- Signals `name` kept by an earlier release (field q:<name> of hash sk: one JSON list,
-- rewritten whole on every signal) move to the mailbox, oldest first, and count in
-- `bytes`: once per run and name, before its mailbox is first read or written.
local function migrate_kept(wk, sk, name)
  local raw = redis.call('HGET', sk, 'q:' .. name)
  if not raw then return end
  local packed, bytes = {}, 0
  for _, sig in ipairs(cjson.decode(raw)) do
    packed[#packed + 1] = kept_pack(sig)
    bytes = bytes + #packed[#packed]
  end
  if #packed > 0 then
    redis.call('RPUSH', k_mailbox(wk, name), unpack(packed))
    redis.call('HINCRBY', sk, 'bytes', bytes)
  end
  redis.call('HDEL', sk, 'q:' .. name)
end

-- The oldest signal `name` kept for workflow wk (a table: p payload JSON, i id, by, at,
-- c comment, r rejected, u identity), taken out of its mailbox; nil if none.
local function take_signal(wk, name)
  local sk = k_signals(wk)
  migrate_kept(wk, sk, name)
  local s = redis.call('LPOP', k_mailbox(wk, name))
  if not s then return nil end
  if redis.call('HINCRBY', sk, 'bytes', -#s) <= 0 then redis.call('HDEL', sk, 'bytes') end
  return kept_unpack(s)
end

-- What a signal record puts in the task's <i>a field.
local function signal_meta(name, sig)
  return cjson.encode({name = name, id = sig.i, by = sig.by, identity = sig.u, at = sig.at,
    comment = sig.c, rejected = sig.r})
end

-- End wait task i with signal `sig` (see take_signal).
local function apply_signal(wid, wk, i, from, name, sig)
  local meta = signal_meta(name, sig)
  if sig.r then
    local why = 'rejected'
    if sig.by and sig.by ~= '' then why = why .. ' by ' .. sig.by end
    if sig.c and sig.c ~= '' then why = why .. ': ' .. sig.c end
    end_wait(wid, wk, i, from, 'failed', why, meta)
  else
    end_wait(wid, wk, i, from, 'succeeded', sig.p or '', meta)
  end
end

-- Wait tasks reached since the last call (at most `limit`) become suspended: a signal
-- kept for one ends it at once, a timer is armed for one with a timeout or a sleep.
-- A task no longer ready (cancelled, cleaned up) or of a workflow not running (paused:
-- release queues it again) leaves the queue. Returns how many were taken.
local function activate_waits(limit)
  local q = k_queue(WAIT_TYPE)
  local members = redis.call('ZRANGE', q, 0, limit - 1)
  for _, member in ipairs(members) do
    redis.call('ZREM', q, member)
    local wid, i = split_member(member)
    local wk = wkey(wid)
    local m = redis.call('HMGET', wk, F_STATE, F_CREATED, i, F_DIGEST)
    if m[1] == 'running' and tstate(m[3]) == 'ready' then
      local spec = wait_spec(wk, i, m[4])
      local t = tparse(m[3])
      t.s, t.a, t.b = 'suspended', t.a + 1, NOW - tonumber(m[2])
      redis.call('HSET', wk, i, tpack(t))
      move_count('ready', 'suspended')
      emit('suspended', wid, i)
      local sig = nil
      if spec.s then sig = take_signal(wk, spec.s) end
      if spec.c then  -- a child run: the keeper starts it (engine/runtime/child_runs.py)
        redis.call('ZADD', K_SPAWN, NOW, member)
      elseif spec.n then  -- the run's input, as an output (the steps manager's job)
        end_wait(wid, wk, i, 'suspended', 'succeeded', read_input(wk, redis.call('HGET', wk, F_INPUT)), nil)
      elseif sig then
        apply_signal(wid, wk, i, 'suspended', spec.s, sig)
      else
        local due = nil
        if spec.u then
          due = spec.u
        elseif spec.p or spec.t then
          due = tonumber(m[2]) + tonumber(t.q) + (spec.p or spec.t)
        end
        if due then redis.call('ZADD', K_TIMERS, string.format('%.0f', due), member) end
      end
    end
  end
  return #members
end

-- Timers that are due (at most `limit`) end their wait tasks: a sleep succeeds; a
-- signal's timeout does what its on_timeout says (fail, succeed, skip). Returns how many.
local function fire_timers(limit)
  local due = redis.call('ZRANGEBYSCORE', K_TIMERS, '-inf', NOW, 'LIMIT', 0, limit)
  for _, member in ipairs(due) do
    redis.call('ZREM', K_TIMERS, member)
    local wid, i = split_member(member)
    local wk = wkey(wid)
    local m = redis.call('HMGET', wk, F_STATE, i, F_DIGEST)
    if m[1] and tstate(m[2]) == 'suspended' then
      local spec = wait_spec(wk, i, m[3])
      local meta = cjson.encode({late = true, at = NOW})  -- status: timed_out
      if not spec.s then
        end_wait(wid, wk, i, 'suspended', 'succeeded', '', cjson.encode({at = NOW}))
      elseif spec.o == 'succeed' then
        end_wait(wid, wk, i, 'suspended', 'succeeded', '', meta)
      elseif spec.o == 'skip' then
        end_wait(wid, wk, i, 'suspended', 'skipped', '', meta)
      else
        end_wait(wid, wk, i, 'suspended', 'failed', 'no signal ' .. spec.s
          .. ' within ' .. (spec.t / 1000) .. 's', meta)
      end
    end
  end
  return #due
end

-- How long until the next timer is due (ms, 0 if due now), or -1 for none.
local function next_timer()
  local head = redis.call('ZRANGE', K_TIMERS, 0, 0, 'WITHSCORES')
  if #head == 0 then return -1 end
  return math.max(0, tonumber(head[2]) - NOW)
end

-- Entries of zset `key` that are due (at most `limit`), leased to the caller for 30 s
-- (re-scored): a keeper that dies before its ack leaves them to the next one.
local KEEPER_LEASE_MS = 30000
local function lease_due(key, limit)
  local due = redis.call('ZRANGEBYSCORE', key, '-inf', NOW, 'LIMIT', 0, limit)
  for _, member in ipairs(due) do
    redis.call('ZADD', key, NOW + KEEPER_LEASE_MS, member)
  end
  return due
end

-- The due child runs to start, as "wid:i:attempt" (the attempt names the child's key);
-- entries of tasks no longer suspended leave the set.
local function due_spawns(limit)
  local out = {}
  for _, member in ipairs(lease_due(K_SPAWN, limit)) do
    local wid, i = split_member(member)
    local s, a = tparts(redis.call('HGET', wkey(wid), i))
    if s == 'suspended' then
      out[#out + 1] = member .. ':' .. a
    else
      redis.call('ZREM', K_SPAWN, member)
    end
  end
  return out
end
