-- lib/rate_limits.lua: Rate limits: a bucket per (task type, key), GCRA on Redis's clock.

-- A task whose definition has a rate limit (field <i>L, "<interval us>|<burst>|<key>",
-- engine/spec/rate_limits.py encode_spec; its key "=<constant>" or "@": the run's field
-- F_RATE_KEYS) is not queued in P:q:<type> but in its bucket's queue P:rq:<b>, b being
-- "<#type>:<type>:<key>". While that queue has tasks the bucket stands for them as the
-- member "~<b>": in P:q:<type>, scored as its head task, while a token exists; else in
-- P:delayed, scored by the ms the next token exists (promote_due puts it back). A claim
-- popping "~<b>" takes tokens and as many head tasks (take_tokens): the queue of a type
-- holds one member per bucket, whatever the backlog, and a bucket without a token costs
-- nothing until its time. The bucket's hash P:rb:<b> holds t, its theoretical arrival
-- time (us), e, the interval (us), and b, the burst: a task may start at `now` when
-- t - now <= (b - 1) * e, and then t = max(t, now) + e. So over any w us at most
-- b + w / e tasks start. A bucket with no ready task expires once it is full (t <= now).

local NOW_US = tonumber(T[1]) * 1000000 + tonumber(T[2])

-- The bucket of task i (definition index di, of type typ) of workflow wk whose definition
-- dk has rate limits: its name, interval and burst; nil when this task has none.
local rate_keys_of = {}  -- wk -> its F_RATE_KEYS decoded, once per call
local function rate_bucket(wk, dk, i, di, typ)
  local spec = redis.call('HGET', dk, di .. D_RATE)
  if not spec then return nil end
  local e, b, key = string.match(spec, '^(%d+)|(%d+)|(.*)$')
  if string.byte(key, 1) == 61 then  -- "=<constant>"
    key = string.sub(key, 2)
  else
    local keys = rate_keys_of[wk]
    if keys == nil then
      keys = cjson.decode(redis.call('HGET', wk, F_RATE_KEYS) or '{}')
      rate_keys_of[wk] = keys
    end
    key = keys[tostring(i)] or ''
  end
  return #typ .. ':' .. typ .. ':' .. key, tonumber(e), tonumber(b)
end

-- The type of bucket b.
local function bucket_type(b)
  local n, rest = string.match(b, '^(%d+):(.*)$')
  return string.sub(rest, 1, tonumber(n))
end

-- Bucket b has no ready task left: its state is kept only until it is full again.
local function bucket_idle(b, t)
  local hk = k_bucket(b)
  if t > NOW_US then
    redis.call('PEXPIREAT', hk, string.format('%.0f', math.ceil(t / 1000)))
  else
    redis.call('DEL', hk)
  end
end

-- Where bucket b stands while it has ready tasks (its head scored `head`): in its type's
-- queue when a token exists now, else in P:delayed until one does. Returns that time (ms)
-- when it has to wait, else nil.
local function bucket_stand(b, typ, t, e, burst, head)
  local at = t - (burst - 1) * e
  if at <= NOW_US then
    redis.call('ZADD', k_queue(typ), head, '~' .. b)
    wake[typ] = true
    return nil
  end
  local ms = math.ceil(at / 1000)
  redis.call('ZADD', K_DELAYED, string.format('%.0f', ms), '~' .. b)
  return ms
end

-- Queue task `member` (i, definition index di, of type typ, queue score `score`) of a
-- workflow whose definition dk has rate limits into its bucket. False when the task has
-- no rate limit (the caller queues it as usual).
local function rate_enqueue(wk, dk, member, i, di, typ, score)
  local b, e, burst = rate_bucket(wk, dk, i, di, typ)
  if b == nil then return false end
  local rq, hk = k_rate_queue(b), k_bucket(b)
  local first = redis.call('ZCARD', rq) == 0
  redis.call('ZADD', rq, score, member)
  redis.call('HSET', hk, 'e', e, 'b', burst)  -- the latest task's limit is the bucket's
  if first then
    redis.call('PERSIST', hk)
    bucket_stand(b, typ, tonumber(redis.call('HGET', hk, 't') or '0'), e, burst, score)
  else  -- already standing: a better head moves it up in its type's queue
    redis.call('ZADD', k_queue(typ), 'XX', 'LT', score, '~' .. b)
  end
  return true
end

-- Take ready task `member` (i, di, typ) out of its bucket, if it has one and is there.
-- True when it was taken out.
local function rate_dequeue(wk, dk, member, i, di, typ)
  local b = rate_bucket(wk, dk, i, di, typ)
  if b == nil or redis.call('ZREM', k_rate_queue(b), member) == 0 then return false end
  if redis.call('EXISTS', k_rate_queue(b)) == 0 then
    redis.call('ZREM', k_queue(typ), '~' .. b)
    redis.call('ZREM', K_DELAYED, '~' .. b)
    bucket_idle(b, tonumber(redis.call('HGET', k_bucket(b), 't') or '0'))
  end
  return true
end

-- Bucket b's time in P:delayed has come (promote_due): it stands in its type's queue
-- again, or leaves if it has no task any more.
local function bucket_due(b)
  local head = redis.call('ZRANGE', k_rate_queue(b), 0, 0, 'WITHSCORES')
  if #head == 0 then return end
  local typ = bucket_type(b)
  redis.call('ZADD', k_queue(typ), head[2], '~' .. b)
  wake[typ] = true
end

-- Up to `room` tasks of bucket b, as many as it has tokens for now: their members, and
-- the ms its next token exists when it ran out with tasks left (nil otherwise).
local function take_bucket(b, room)
  local hk, rq = k_bucket(b), k_rate_queue(b)
  local s = redis.call('HMGET', hk, 't', 'e', 'b')
  local t, e, burst = tonumber(s[1] or '0'), tonumber(s[2] or '0'), tonumber(s[3] or '1')
  local tol = (burst - 1) * e
  local taken = {}
  if t - NOW_US <= tol then
    local n = room  -- the tokens there are: k = 0, 1... while max(t, now) + k * e - now <= tol
    if e > 0 then n = math.min(room, math.floor((tol - math.max(t, NOW_US) + NOW_US) / e) + 1) end
    local popped = redis.call('ZPOPMIN', rq, n)
    for k = 1, #popped, 2 do
      taken[#taken + 1] = popped[k]
      t = math.max(t, NOW_US) + e
    end
    redis.call('HSET', hk, 't', string.format('%.0f', t))
  end
  local head = redis.call('ZRANGE', rq, 0, 0, 'WITHSCORES')
  if #head == 0 then
    bucket_idle(b, t)
    return taken, nil
  end
  return taken, bucket_stand(b, bucket_type(b), t, e, burst, head[2])
end

-- A claim's popped members, buckets ("~<b>") replaced by the tasks their tokens allow, at
-- most `want` in all; and the earliest ms a bucket that ran out gets its next token.
local function take_tokens(members, want)
  local out, buckets = {}, {}
  for _, m in ipairs(members) do
    if string.byte(m, 1) == 126 then
      buckets[#buckets + 1] = string.sub(m, 2)
    else
      out[#out + 1] = m
    end
  end
  local next_at = nil
  for n, b in ipairs(buckets) do
    local room = math.max(1, want - #out - (#buckets - n))
    local taken, at = take_bucket(b, room)
    for _, m in ipairs(taken) do out[#out + 1] = m end
    if at and (next_at == nil or at < next_at) then next_at = at end
  end
  return out, next_at
end
