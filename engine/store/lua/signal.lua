-- signal.lua: a signal reaches a workflow: it ends the wait task waiting for it, or is
-- kept for one not reached yet (never lost), once per signal id.
-- KEYS[1]  P:w:<wid>;  ARGV[3] wid; ARGV[4] the signal's name; ARGV[5] its payload JSON
-- ("" for none); ARGV[6] its id ("" for none: every call is a signal of its own);
-- ARGV[7] who sends it; ARGV[8] "ok" or "reject" (the wait task fails: "rejected by
-- <who>: <comment>"); ARGV[9] a comment ("" for none).
-- The first wait task for that name (in definition order) that is suspended or reached
-- takes it; if none is, but one may still be reached, the signal is kept (at most
-- MAX_KEPT_SIGNALS per name). Refused: an unknown or finished workflow, a name no task
-- of it waits for, a name whose wait tasks have all ended.
-- Returns {outcome, task name or ""}: outcome "delivered", "kept", or
-- "duplicate:<first outcome>" for an id applied before (nothing written).
local wid, wk, name, payload, sid = ARGV[3], KEYS[1], ARGV[4], ARGV[5], ARGV[6]
local who, how, comment = ARGV[7], ARGV[8], ARGV[9]
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
local sig = {p = payload, by = who, at = NOW}
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
  local raw = redis.call('HGET', sk, 'q:' .. name)
  local kept = raw and cjson.decode(raw) or {}
  if #kept >= MAX_KEPT_SIGNALS then
    return redis.error_reply('RFSTATE workflow ' .. wid .. ' already keeps '
      .. MAX_KEPT_SIGNALS .. ' signals ' .. name .. ' for its waits not reached yet')
  end
  kept[#kept + 1] = sig
  redis.call('HSET', sk, 'q:' .. name, cjson.encode(kept))
else
  return redis.error_reply('RFSTATE workflow ' .. wid .. ': every task waiting for signal '
    .. name .. ' has ended (' .. table.concat(ended, ', ') .. ')')
end
if sid ~= '' then redis.call('HSET', sk, 'id:' .. sid, outcome .. ':' .. task) end
emit('signal', wid, -1, {name, outcome, task, who})
flush()
return {outcome, task}
