-- complete.lua: an agent reports the outcome of tasks it ran.
-- KEYS[1]  P:stats
-- ARGV[3] agent id; ARGV[4] how many results follow; then per result:
--   wid, idx, attempt (the fencing token the claim returned), "ok" | "err", value
--   (output JSON for ok, "" for no output; error text for err).
-- Returns per result 1 (recorded) or 0 (rejected: the task was handed on or reset, so
-- this attempt's outcome must not overwrite a newer one).
local agent = ARGV[3]
local nres = tonumber(ARGV[4])
local out = {}
local run_key = P .. ':run:' .. agent
for r = 0, nres - 1 do
  local at = 5 + 5 * r
  local wid, i, attempt, how, value = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4]
  local wk = wkey(wid)
  local m = redis.call('HMGET', wk, 'st', 'ct', i .. 's', i .. 'a', i .. 'g', i .. 'C', i .. 'f', i .. 'M', 'bk')
  if m[3] ~= 'running' or m[4] ~= attempt or m[5] ~= agent then
    out[#out + 1] = 0
    emit('rejected', wid, tonumber(i), {agent, tonumber(attempt)})
    -- Not ours any more (handed on, finished or cleaned up): forget it. A newer attempt
    -- of our own (taken back at a restart) stays in the set.
    if m[3] ~= 'running' or m[5] ~= agent then
      redis.call('SREM', run_key, wid .. ':' .. i)
    end
  else
    out[#out + 1] = 1
    redis.call('SREM', run_key, wid .. ':' .. i)
    local wst, ct = m[1], tonumber(m[2])
    local live = (wst == 'running' or wst == 'paused')
    if how == 'ok' then
      redis.call('HSET', wk, i .. 's', 'succeeded', i .. 'd', NOW - ct)
      if value ~= '' then redis.call('HSET', wk, i .. 'o', value) end
      redis.call('HDEL', wk, i .. 'e')
      move_count('running', 'succeeded')
      redis.call('HINCRBY', wk, 'ok', 1)
      redis.call('HINCRBY', wk, 'left', -1)
      emit('succeeded', wid, tonumber(i))
      for _, c in ipairs(split_csv(m[6])) do
        if redis.call('HGET', wk, c .. 's') == 'waiting' then
          if redis.call('HINCRBY', wk, c .. 'w', -1) <= 0 then
            redis.call('HDEL', wk, c .. 'w')
            redis.call('HSET', wk, c .. 's', 'ready', c .. 'q', NOW - ct)
            move_count('waiting', 'ready')
            if wst == 'running' then enqueue(wid, wk, c) end
          end
        end
      end
    else
      local failures = redis.call('HINCRBY', wk, i .. 'f', 1)
      redis.call('HSET', wk, i .. 'e', value, i .. 'd', NOW - ct)
      if live and failures < tonumber(m[8] or '1') then
        local delay = tonumber(m[9] or '1000') * 2 ^ (failures - 1)
        redis.call('HSET', wk, i .. 's', 'ready', i .. 'q', NOW - ct + delay)
        redis.call('ZADD', P .. ':delayed', string.format('%.0f', NOW + delay), wid .. ':' .. i)
        move_count('running', 'ready')
        emit('retrying', wid, tonumber(i), {failures, delay})
      else
        redis.call('HSET', wk, i .. 's', 'failed')
        move_count('running', 'failed')
        redis.call('HINCRBY', wk, 'bad', 1)
        redis.call('HINCRBY', wk, 'left', -1)
        emit('failed', wid, tonumber(i), value)
        if live then skip_descendants(wid, wk, i) end
      end
    end
    if live then finish_if_done(wid, wk) end
  end
end
flush()
return out
