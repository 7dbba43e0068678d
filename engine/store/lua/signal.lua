-- signal.lua: a signal reaches a workflow: it ends the wait task waiting for it, or is
-- kept for one not reached yet (never lost), once per signal id.
-- KEYS[1]  P:w:<wid>;  ARGV[3] wid; ARGV[4] the signal's name; ARGV[5] its payload JSON
-- ("" for none); ARGV[6] its id ("" for none: every call is a signal of its own);
-- ARGV[7] who sends it, as the sender says; ARGV[8] "ok" or "reject" (the wait task
-- fails: "rejected by <who>: <comment>"); ARGV[9] a comment ("" for none); ARGV[10] the
-- most bytes the run's mailboxes may hold; ARGV[11] who sends it, as authenticated (an
-- HTTP token's label, the OS user).
-- The first wait task for that name (in definition order) that is suspended or reached
-- takes it; if none is, but one may still be reached, the signal is kept: pushed on the
-- mailbox of that run and name (P:w:<wid>:sq:<name>, a list; lib/wait_tasks.lua), at most
-- MAX_KEPT_SIGNALS per name and ARGV[10] bytes in all per run; the run's end deletes
-- them (workflow_ended, told by the letter b of F_AT_END). Refused: an unknown or
-- finished workflow, a name no task of it waits for, a name whose wait tasks have all
-- ended, a full mailbox.
-- Returns {outcome, task name or ""}: outcome "delivered", "kept", or
-- "duplicate:<first outcome>" for an id applied before (nothing written).
local wid, wk, name, payload, sid = ARGV[3], KEYS[1], ARGV[4], ARGV[5], ARGV[6]
local who, how, comment, ident = ARGV[7], ARGV[8], ARGV[9], ARGV[11]
local m, refused = open_workflow(wid, wk, {'running', 'paused', 'scheduled', 'queued'},
  'only a workflow that has not finished takes signals', F_DIGEST)
if refused then return refused end
local sk = k_signals(wk)
if sid ~= '' then
  local first = redis.call('HGET', sk, 'id:' .. sid)
  if first then
    local at = string.find(first, ':', 1, true)
    return {'duplicate:' .. string.sub(first, 1, at - 1), string.sub(first, at + 1)}
  end
end
local dk = dkey(wk, m[2])
local waiters = split_csv(redis.call('HGET', dk, D_SIGNAL_WAITERS .. name))
if #waiters == 0 then
  local names = redis.call('HGET', dk, D_SIGNALS)
  local known = 'it waits for no signal'
  if names then known = 'it waits for ' .. table.concat(cjson.decode(names), ', ') end
  return redis.error_reply('RFSTATE workflow ' .. wid .. ' has no task waiting for signal '
    .. name .. ' (' .. known .. ')')
end
local sig = {p = payload, by = who, at = NOW, u = ident}
if sid ~= '' then sig.i = sid end
if comment ~= '' then sig.c = comment end
if how == 'reject' then sig.r = true end
local taker, open, ended = nil, false, {}
for _, i in ipairs(waiters) do
  local s = tstate(redis.call('HGET', wk, i))
  if s == 'suspended' or (s == 'ready' and not redis.call('ZSCORE', K_DELAYED, wid .. ':' .. i)) then
    taker = {i, s}
    break
  elseif s == 'waiting' or s == 'ready' then
    open = true
  else
    ended[#ended + 1] = redis.call('HGET', dk, i .. D_NAME) .. ' ' .. s
  end
end
local outcome, task = 'kept', ''
if taker then
  task = redis.call('HGET', dk, taker[1] .. D_NAME)
  apply_signal(wid, wk, taker[1], taker[2], name, sig)
  outcome = 'delivered'
elseif open then
  migrate_kept(wk, sk, name)
  local mailbox = k_mailbox(wk, name)
  if redis.call('LLEN', mailbox) >= MAX_KEPT_SIGNALS then
    return redis.error_reply('RFSTATE workflow ' .. wid .. ' already keeps '
      .. MAX_KEPT_SIGNALS .. ' signals ' .. name .. ' for its waits not reached yet')
  end
  local packed, cap = kept_pack(sig), tonumber(ARGV[10])
  local held = tonumber(redis.call('HGET', sk, 'bytes') or '0')
  if held + #packed > cap then
    return redis.error_reply('RFSTATE workflow ' .. wid .. ' keeps ' .. held
      .. ' bytes of signals for its waits not reached yet: this one (' .. #packed
      .. ' bytes) would pass the ' .. cap .. '-byte limit per run')
  end
  redis.call('RPUSH', mailbox, packed)
  redis.call('HINCRBY', sk, 'bytes', #packed)
  local at_end = redis.call('HGET', wk, F_AT_END)  -- false: a run of an earlier release
  if at_end and not string.find(at_end, 'b', 1, true) then  -- b: mailboxes
    redis.call('HSET', wk, F_AT_END, at_end .. 'b')
  end
else
  return redis.error_reply('RFSTATE workflow ' .. wid .. ': every task waiting for signal '
    .. name .. ' has ended (' .. table.concat(ended, ', ') .. ')')
end
if sid ~= '' then redis.call('HSET', sk, 'id:' .. sid, outcome .. ':' .. task) end
emit('signal', wid, -1, {name, outcome, task, who, ident})
flush()
return {outcome, task}
