-- lib/queues.lua: Bulk reads and writes, ready queues, workflow states.

-- HSET or ZADD a long flat argument list in slices (Lua's unpack stops near 8,000 values).
local function write_all(cmd, key, list)
  local chunk = 4000
  for from = 1, #list, chunk do
    redis.call(cmd, key, unpack(list, from, math.min(from + chunk - 1, #list)))
  end
end

-- HMGET any number of fields, in slices; the values in the fields' order.
local function hmget_all(key, fields)
  if #fields <= 4000 then
    if #fields == 0 then return {} end
    return redis.call('HMGET', key, unpack(fields))
  end
  local out = {}
  for from = 1, #fields, 4000 do
    local got = redis.call('HMGET', key, unpack(fields, from, math.min(from + 3999, #fields)))
    for k = 1, #got do out[#out + 1] = got[k] end
  end
  return out
end

local function split_member(member)
  local c = string.find(member, ':', 1, true)
  return string.sub(member, 1, c - 1), string.sub(member, c + 1)
end

-- Higher priority first, then older workflow first: lowest score pops first. The score
-- (1000 - priority) * 10^12 + wid is written out as text: 1000 - priority (1..1999: the
-- priority range; once per priority and call), then the id in 12 digits (formatting a
-- number costs Lua more than this).
local SCORE_PREFIX = setmetatable({}, {__index = function(t, priority)
  local v = tostring(1000 - priority)
  t[priority] = v
  return v
end})
local function queue_score(priority, wid)
  wid = tostring(wid)
  if #wid > 12 or priority <= -1000 or priority >= 1000 then
    return string.format('%.0f', (1000 - priority) * 1000000000000 + tonumber(wid))
  end
  return SCORE_PREFIX[priority] .. string.rep('0', 12 - #wid) .. wid
end

-- Put task i of workflow wid into its type's ready queue (its rate limit's bucket, if it
-- has one) and wake that type's agents.
local function enqueue(wid, wk, i)
  local _, _, di = rec_at(wk, i)
  local dk = dkey(wk)
  local f = redis.call('HMGET', dk, di .. D_TYPE, di .. D_PRIORITY)
  local typ = f[1] or ''
  local score = queue_score(tonumber(f[2] or '0'), wid)
  if has_feature(dk, D_RATE) and rate_enqueue(wk, dk, wid .. ':' .. i, i, di, typ, score) then
    return
  end
  redis.call('ZADD', k_queue(typ), score, wid .. ':' .. i)
  wake[typ] = true
end

-- Take task i out of whichever ready structure holds it (queue or backoff).
local function dequeue(wid, wk, i)
  local member = wid .. ':' .. i
  local _, _, di = rec_at(wk, i)
  local dk = dkey(wk)
  local typ = redis.call('HGET', dk, di .. D_TYPE) or ''
  if has_feature(dk, D_RATE) and rate_dequeue(wk, dk, member, i, di, typ) then return end
  redis.call('ZREM', k_queue(typ), member)
  redis.call('ZREM', K_DELAYED, member)
end

local function set_wstate(wid, wk, old, new, score, finished)
  if finished then  -- an end: when, as ms after the creation (F_FINISHED) in the same write
    redis.call('HSET', wk, F_STATE, new, F_FINISHED, finished)
  else
    redis.call('HSET', wk, F_STATE, new)
  end
  redis.call('ZREM', k_state(old), wid)
  redis.call('ZADD', k_state(new), score, wid)
  count('w:' .. old, -1)
  count('w:' .. new, 1)
end
