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
local agent_json = cjson.encode(agent)
local done = {}        -- members leaving the agent's running set
local wf_ok = {}       -- per workflow key: succeeded tasks to add
local wf_order = {}    -- workflows touched, in order, as {wid, wk, live}
local function touch(wid, wk, live)
  if wf_ok[wk] == nil then
    wf_ok[wk] = 0
    wf_order[#wf_order + 1] = {wid, wk, live}
  end
end
for r = 0, nres - 1 do
  local at = 5 + 5 * r
  local wid, i, attempt, how, value = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4]
  local wk = wkey(wid)
  local member = wid .. ':' .. i
  -- Only what every outcome needs: each field is a scan of a compact hash.
  local m = redis.call('HMGET', wk, 'st', 'ct', i .. 's', i .. 'a', i .. 'g', 'd')
  if m[3] ~= 'running' or m[4] ~= attempt or m[5] ~= agent then
    out[#out + 1] = 0
    emit_json('rejected', wid, i, '[' .. agent_json .. ',' .. tonumber(attempt) .. ']')
    -- Not ours any more (handed on, finished or cleaned up): forget it. A newer attempt
    -- of our own (taken back at a restart) stays in the set.
    if m[3] ~= 'running' or m[5] ~= agent then done[#done + 1] = member end
  else
    out[#out + 1] = 1
    done[#done + 1] = member
    local wst, ct = m[1], tonumber(m[2])
    local live = (wst == 'running' or wst == 'paused')
    touch(wid, wk, live)
    if how == 'ok' then
      if value ~= '' then
        redis.call('HSET', wk, i .. 's', 'succeeded', i .. 'd', NOW - ct, i .. 'o', value)
      else
        redis.call('HSET', wk, i .. 's', 'succeeded', i .. 'd', NOW - ct)
      end
      if attempt ~= '1' then redis.call('HDEL', wk, i .. 'e') end  -- an earlier attempt's error
      move_count('running', 'succeeded')
      wf_ok[wk] = wf_ok[wk] + 1
      emit('succeeded', wid, i)
      local dk = dkey(wk, m[6])
      for _, c in ipairs(split_csv(redis.call('HGET', dk, i .. 'C'))) do
        local cf = redis.call('HMGET', wk, c .. 's', c .. 'w')
        if cf[1] == 'waiting' then
          local w = tonumber(cf[2] or '1') - 1
          if w <= 0 then
            redis.call('HDEL', wk, c .. 'w')
            redis.call('HSET', wk, c .. 's', 'ready', c .. 'q', NOW - ct)
            move_count('waiting', 'ready')
            if wst == 'running' then enqueue(wid, wk, c) end
          else
            redis.call('HSET', wk, c .. 'w', w)
          end
        end
      end
    else
      local failures = redis.call('HINCRBY', wk, i .. 'f', 1)
      redis.call('HSET', wk, i .. 'e', value, i .. 'd', NOW - ct)
      local limits = redis.call('HMGET', dkey(wk, m[6]), i .. 'M', 'bk')
      if live and failures < tonumber(limits[1] or '1') then
        local delay = tonumber(limits[2] or '1000') * 2 ^ (failures - 1)
        redis.call('HSET', wk, i .. 's', 'ready', i .. 'q', NOW - ct + delay)
        redis.call('ZADD', P .. ':delayed', string.format('%.0f', NOW + delay), member)
        move_count('running', 'ready')
        emit('retrying', wid, i, {failures, delay})
      else
        redis.call('HSET', wk, i .. 's', 'failed')
        move_count('running', 'failed')
        redis.call('HINCRBY', wk, 'bad', 1)
        redis.call('HINCRBY', wk, 'left', -1)
        emit('failed', wid, i, value)
        if live then skip_descendants(wid, wk, i) end
      end
    end
  end
end
if #done > 0 then redis.call('SREM', run_key, unpack(done)) end
-- Per workflow once: the succeeded count, tasks left, and the end of the workflow.
for _, w in ipairs(wf_order) do
  local wid, wk, live = w[1], w[2], w[3]
  local ok = wf_ok[wk]
  if ok > 0 then
    redis.call('HINCRBY', wk, 'ok', ok)
    redis.call('HINCRBY', wk, 'left', -ok)
  end
  if live then finish_if_done(wid, wk) end
end
flush()
return out
