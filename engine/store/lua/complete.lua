-- complete.lua: an agent reports the outcome of tasks it ran.
-- KEYS[1]  P:stats
-- ARGV[3] agent id; ARGV[4] how many results follow; then per result:
--   wid, idx, attempt (the fencing token the claim returned), "ok" | "err" | "fatal" |
--   "abort" | "skip", value (output JSON for ok, "" for no output; error text for err,
--   fatal and abort; why for skip). fatal fails with no retry; abort fails too and ends
--   the run failed (end_aborted); skip ends a task (not an item) skipped.
-- A result's idx is "c.k" for item k of map c.
-- Returns {per result 1 (recorded) or 0 (rejected: the task was handed on or reset, so
-- this attempt's outcome must not overwrite a newer one), {"wid:c" of maps to expand}}.
local agent = ARGV[3]
local nres = tonumber(ARGV[4])
local argv = ARGV  -- a local: a global is looked up by name on every read
item_meta = {}  -- see workflow_for: nothing in the loop below ends a workflow
pending_joins = {}  -- joins counted once per call, after the loop (release_joins)
local out = {}
local done = {}        -- members leaving the agent's running set
local over = {}        -- their timeouts' entries (P:timeouts), for tasks with one
local wf_ok = {}       -- per workflow key: succeeded tasks to add
local wf_order = {}    -- workflows touched, in order, as {wid, wk, live}
-- Items that ended, per map, applied once per call: {wid, wk, c, ok ks, bad ks, live,
-- queue}, by "<wk>|<c>" and in order of first end (ends[1], ends[2]...).
local ends = {}
local aborted = {}  -- {wid, wk} of runs a task aborted, ended after the loop
-- map hash key -> the element fields of its items that succeeded
local elements = cached(function() return {} end)
local succeeded = 0  -- tasks and items that succeeded: counted (move_count) after the loop
local function item_end(wid, wk, c, k, ok, live, queue)
  local key = wk .. '|' .. c
  local e = ends[key]
  if e == nil then
    e = {wid, wk, c, {}, {}, live, queue}
    ends[key] = e
    ends[#ends + 1] = e
  end
  if ok then table.insert(e[4], k) else table.insert(e[5], k) end
end
-- Item k of a one-step map c succeeded, reported by its attempt: recorded as the loop
-- below does, with what the items of one map share worked out once per call (a big map's
-- completions are mostly this). Returns false, having done nothing, when the item is not
-- this attempt's any more: the loop's own path then rejects it.
local item_done = (function()
  local maps = {}  -- wk -> c -> {wid, c, items' hash, live, queued, OFFSET, timed, ends}
  return function(wid, wk, c, k, attempt, value, member)
    local of = maps[wk]
    if of == nil then
      of = {}
      maps[wk] = of
    end
    local x = of[c]
    if x == nil then
      local m = workflow_meta(wk)
      if not m[3] then return false end
      x = {mk = k_items(wk, c), live = m[1] == 'running' or m[1] == 'paused',
        queue = m[1] == 'running', o = OFFSET[m[2]], timed = has_feature(m[3], D_TIMEOUT)}
      of[c] = x
    end
    local mk = x.mk
    local record = redis.call('HGET', mk, k)
    local s, a, q, b, bn, g = trunning(record)
    if s ~= 'running' or a ~= attempt or g ~= agent then return false end
    out[#out + 1] = 1
    done[#done + 1] = member
    if x.timed then over[#over + 1] = member .. ':' .. attempt end
    if wf_ok[wk] == nil then
      wf_ok[wk] = 0
      wf_order[#wf_order + 1] = {wid, wk, x.live}
    end
    local rec = tsucceeded(record, a, q, b, bn, x.o[1], g)
    if value ~= '' then
      redis.call('HSET', mk, k, rec, k .. T_OUTPUT, value)
    else
      redis.call('HSET', mk, k, rec)
    end
    if attempt ~= '1' then redis.call('HDEL', mk, k .. T_ERROR) end
    succeeded = succeeded + 1
    local drop = elements[mk]
    drop[#drop + 1] = k .. I_ELEMENT
    emit_item('succeeded', wid, c, k)
    local e = x.e
    if e == nil then
      item_end(wid, wk, c, k, true, x.live, x.queue)
      x.e = ends[wk .. '|' .. c]
    else
      local oks = e[4]
      oks[#oks + 1] = k
    end
    return true
  end
end)()
for r = 0, nres - 1 do
  local at = 5 + 5 * r
  local wid, i, attempt, how, value = argv[at], argv[at + 1], argv[at + 2], argv[at + 3], argv[at + 4]
  local wk = wkey(wid)
  local member = wid .. ':' .. i
  local c, k = item_of(i)
  if not (c and how == 'ok' and not string.find(k, '.', 1, true)
      and item_done(wid, wk, c, k, attempt, value, member)) then
    -- Only what every outcome needs: each field is a scan of a compact hash.
    local m, record = workflow_for(wk, i, c == nil)  -- m: {st, ct, d, in}
    local timed = m[5]  -- its definition has timeouts: worked out once per run and call
    if timed == nil then
      timed = m[3] and has_feature(m[3], D_TIMEOUT) or false
      m[5] = timed
    end
    if timed then  -- a timeout: its deadline goes
      over[#over + 1] = member .. ':' .. attempt
    end
    -- the record's parts (a hot path: no table)
    local s, a, q, b, bn, g = trunning(record)
    if s ~= 'running' or a ~= attempt or g ~= agent then
      out[#out + 1] = 0
      if c == nil then
        emit_json('rejected', wid, i, '[' .. cjson.encode(agent) .. ',' .. tonumber(attempt) .. ']')
      else
        emit_item('rejected', wid, c, k, cjson.encode(agent) .. ',' .. tonumber(attempt))
      end
      -- Not ours any more (handed on, finished or cleaned up): forget it. A newer attempt
      -- of our own (taken back at a restart) stays in the set.
      if s ~= 'running' or g ~= agent then done[#done + 1] = member end
    else
      out[#out + 1] = 1
      done[#done + 1] = member
      local wst = m[1]
      local live = (wst == 'running' or wst == 'paused')
      if wf_ok[wk] == nil then  -- the workflow's first success or failure in this call
        wf_ok[wk] = 0
        wf_order[#wf_order + 1] = {wid, wk, live}
      end
      local o = OFFSET[m[2]]
      local done_at = o[1]
      local ct = NOW - done_at
      local h, fld, di = wk, i, i
      if c ~= nil then h, fld, di = rec_at(wk, i) end
      -- a step of an item: the item's index and the step's
      local item, step, step_end = nil, nil, nil
      if c ~= nil then item, step = step_key(k) end
      local counts = step == nil  -- counted(i), as found above: a step's item counts instead
      if step ~= nil then
        -- a step's end may end its item: counted then as the item's end
        step_end = function(ok)
          move_count('running', ok and 'succeeded' or 'failed')
          item_end(wid, wk, c, item, ok, live, wst == 'running')
        end
      end
      if how == 'ok' then
        local rec = tsucceeded(record, a, q, b, bn, done_at, g)
        if value ~= '' then
          redis.call('HSET', h, fld, rec, fld .. T_OUTPUT, value)
        else
          redis.call('HSET', h, fld, rec)
        end
        -- an earlier attempt's error goes
        if attempt ~= '1' then redis.call('HDEL', h, fld .. T_ERROR) end
        if counts then succeeded = succeeded + 1 end
        if step ~= nil then
          emit_item('succeeded', wid, c, k)
          step_ended(wid, wk, c, item, step, true, value, wst == 'running', done_at, step_end)
        elseif c == nil then
          wf_ok[wk] = wf_ok[wk] + 1
          emit_tasks('succeeded', member)
          local kids = CHILDREN[dkey(wk, m[3])][i]
          if #kids > 0 then release_children(wid, wk, kids, ct, wst == 'running') end
        else
          -- its element: kept only while it may run again (dropped after the loop, one
          -- HDEL per map)
          local drop = elements[h]
          drop[#drop + 1] = fld .. I_ELEMENT
          emit_item('succeeded', wid, c, k)
          item_end(wid, wk, c, k, true, live, wst == 'running')
        end
      elseif how == 'skip' and c == nil then
        task_skipped(wid, wk, i, a, q, bn or '', done_at, g, value, live)
      else
        local failures = redis.call('HINCRBY', h, fld .. T_FAILURES, 1)
        local limits = redis.call('HMGET', dkey(wk, m[3]), di .. D_ATTEMPTS, D_BACKOFF,
          D_BACKOFF_MAX)
        if how == 'abort' then
          aborted[#aborted + 1] = {wid, wk}
          live = false  -- nothing is decided downstream: the run ends below
        end
        if live and how == 'err' and failures < tonumber(limits[1] or '1') then
          local delay = math.min(tonumber(limits[2] or '1000') * 2 ^ (failures - 1),
            tonumber(limits[3] or '600000'))
          redis.call('HSET', h, fld, trec('ready', a, done_at + delay, bn or '', done_at, g),
            fld .. T_ERROR, value)
          redis.call('ZADD', K_DELAYED, string.format('%.0f', NOW + delay), member)
          if counts then move_count('running', 'ready') end
          if c == nil then
            emit('retrying', wid, i, {failures, delay})
          else
            emit_item('retrying', wid, c, k, failures .. ',' .. delay)
          end
        else
          redis.call('HSET', h, fld, tended('failed', a, q, b, bn, done_at, g), fld .. T_ERROR,
            value)
          if counts then move_count('running', 'failed') end
          if step ~= nil then
            emit_item('failed', wid, c, k, cjson.encode(value))
            step_ended(wid, wk, c, item, step, false, value, wst == 'running', done_at, step_end)
          elseif c == nil then
            redis.call('HINCRBY', wk, F_BAD, 1)
            redis.call('HINCRBY', wk, F_LEFT, -1)
            emit('failed', wid, i, value)
            if live then skip_descendants(wid, wk, i) end
          else
            emit_item('failed', wid, c, k, cjson.encode(value))
            item_end(wid, wk, c, k, false, live, wst == 'running')
          end
        end
      end
    end
  end
end
for h, fields in pairs(elements) do write_all('HDEL', h, fields) end
if succeeded > 0 then move_count('running', 'succeeded', succeeded) end
release_joins()
write_all('SREM', k_running(agent), done)
-- every reported attempt of a task with a timeout is over: its deadline with it
write_all('ZREM', K_TIMEOUTS, over)
for _, e in ipairs(ends) do items_ended(e[1], e[2], e[3], e[4], e[5], e[6], e[7]) end
if #aborted > 0 then end_aborted(aborted) end
-- Per workflow once: the succeeded count, tasks left, and the end of the workflow.
for _, w in ipairs(wf_order) do
  local wid, wk, live = w[1], w[2], w[3]
  local ok = wf_ok[wk]
  local left = nil
  if ok > 0 then
    redis.call('HINCRBY', wk, F_OK, NUM[ok])
    left = redis.call('HINCRBY', wk, F_LEFT, NUM[-ok])
  end
  -- Only failures (their counts were written above): read the workflow back to decide.
  if live and (left == nil or left <= 0) then finish_if_done(wid, wk) end
end
flush()
return {out, expansions}
