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
-- Children (`kids`) of a task that just succeeded that are still waiting and have no other
-- parent to wait for become ready, queued unless the workflow is paused. A child with
-- several parents (its definition's W) counts its parents' successes in `<c>w`, so each
-- success costs one increment however wide the fan-in. Reads and writes go in slices,
-- whatever the fan-out.
local function release_children(wid, wk, kids, ct, queue)
  local fields, recs = {}, {}
  for k, c in ipairs(kids) do
    fields[#fields + 1] = c .. 'W'
    fields[#fields + 1] = c .. 'T'
    fields[#fields + 1] = c .. 'R'
    recs[k] = c
  end
  local info = hmget_all(dkey(wk), fields)
  recs = hmget_all(wk, recs)
  local ready = {}
  local at = NOW - ct
  for k, c in ipairs(kids) do
    local rec = recs[k]
    local go = tstate(rec) == 'waiting'
    local need = tonumber(info[3 * k - 2] or '1')
    if go and need > 1 then
      go = redis.call('HINCRBY', wk, c .. 'w', 1) >= need
      if go then redis.call('HDEL', wk, c .. 'w') end
    end
    if go then
      ready[#ready + 1] = c
      if rec then  -- waiting again after a retry
        local t = tparse(rec)
        t.s, t.q = 'ready', at
        ready[#ready + 1] = tpack(t)
      else
        ready[#ready + 1] = trec('ready', 0, at, '', '', '')
      end
      move_count('waiting', 'ready')
      if queue then
        local typ = info[3 * k - 1] or ''
        redis.call('ZADD', k_queue(typ), queue_score(tonumber(info[3 * k] or '0'), wid), wid .. ':' .. c)
        wake[typ] = true
      end
    end
  end
  write_all('HSET', wk, ready)
end

for r = 0, nres - 1 do
  local at = 5 + 5 * r
  local wid, i, attempt, how, value = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4]
  local wk = wkey(wid)
  local member = wid .. ':' .. i
  -- Only what every outcome needs: each field is a scan of a compact hash.
  local m = redis.call('HMGET', wk, 'st', 'ct', i, 'd')
  -- the record's parts (a hot path: no table)
  local s, a, q, b, _, g = tparts(m[3])
  if s ~= 'running' or a ~= attempt or g ~= agent then
    out[#out + 1] = 0
    emit_json('rejected', wid, i, '[' .. agent_json .. ',' .. tonumber(attempt) .. ']')
    -- Not ours any more (handed on, finished or cleaned up): forget it. A newer attempt
    -- of our own (taken back at a restart) stays in the set.
    if s ~= 'running' or g ~= agent then done[#done + 1] = member end
  else
    out[#out + 1] = 1
    done[#done + 1] = member
    local wst, ct = m[1], tonumber(m[2])
    local live = (wst == 'running' or wst == 'paused')
    touch(wid, wk, live)
    local done_at = NOW - ct
    if how == 'ok' then
      local rec = trec('succeeded', a, q, b, done_at, g)
      if value ~= '' then
        redis.call('HSET', wk, i, rec, i .. 'o', value)
      else
        redis.call('HSET', wk, i, rec)
      end
      if attempt ~= '1' then redis.call('HDEL', wk, i .. 'e') end  -- an earlier attempt's error
      move_count('running', 'succeeded')
      wf_ok[wk] = wf_ok[wk] + 1
      emit('succeeded', wid, i)
      local kids = split_csv(redis.call('HGET', dkey(wk, m[4]), i .. 'C'))
      if #kids > 0 then release_children(wid, wk, kids, ct, wst == 'running') end
    else
      local failures = redis.call('HINCRBY', wk, i .. 'f', 1)
      local limits = redis.call('HMGET', dkey(wk, m[4]), i .. 'M', 'bk', 'bm')
      if live and failures < tonumber(limits[1] or '1') then
        local delay = math.min(tonumber(limits[2] or '1000') * 2 ^ (failures - 1),
          tonumber(limits[3] or '600000'))
        redis.call('HSET', wk, i, trec('ready', a, done_at + delay, b, done_at, g),
          i .. 'e', value)
        redis.call('ZADD', K_DELAYED, string.format('%.0f', NOW + delay), member)
        move_count('running', 'ready')
        emit('retrying', wid, i, {failures, delay})
      else
        redis.call('HSET', wk, i, trec('failed', a, q, b, done_at, g), i .. 'e', value)
        move_count('running', 'failed')
        redis.call('HINCRBY', wk, 'bad', 1)
        redis.call('HINCRBY', wk, 'left', -1)
        emit('failed', wid, i, value)
        if live then skip_descendants(wid, wk, i) end
      end
    end
  end
end
write_all('SREM', k_running(agent), done)
-- Per workflow once: the succeeded count, tasks left, and the end of the workflow.
for _, w in ipairs(wf_order) do
  local wid, wk, live = w[1], w[2], w[3]
  local ok = wf_ok[wk]
  local left = nil
  if ok > 0 then
    redis.call('HINCRBY', wk, 'ok', ok)
    left = redis.call('HINCRBY', wk, 'left', -ok)
  end
  -- Only failures (their counts were written above): read the workflow back to decide.
  if live and (left == nil or left <= 0) then finish_if_done(wid, wk) end
end
flush()
return out
