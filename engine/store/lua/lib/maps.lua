-- lib/maps.lua: Maps: items, their steps, their outputs.

-- Start the next items of map c (elements already expanded), up to its window of items
-- in flight; queued unless `queue` is false (the workflow is paused). Each call does at
-- most a window's work, and each item's end starts one more.
local function materialize(wid, wk, c, queue)
  local f = redis.call('HMGET', wk, c .. M_STARTED, c .. M_FLYING, c .. M_STORED, F_CREATED)
  local x, y, h = tonumber(f[1] or '0'), tonumber(f[2] or '0'), tonumber(f[3] or '0')
  local dk = dkey(wk)
  local d = redis.call('HMGET', dk, c .. D_WINDOW, c .. D_TYPE, c .. D_PRIORITY, c .. D_FIRST_STEPS)
  local take = math.min(tonumber(d[1] or '1000') - y, h - x)
  if take <= 0 then return 0 end
  local els = redis.call('LPOP', k_pending(wk, c), NUM[take])
  take = #els
  local at = NOW - tonumber(f[4])
  -- what each item starts as: {record field suffix, type, score} per task it queues
  local starts = {}
  local record = trec('ready', 0, at, '', '', '')
  if d[4] then
    -- several steps per item: the item is running, its first steps are ready
    for _, st in ipairs(split_csv(d[4])) do
      local sd = redis.call('HMGET', dk, step_def(c, st) .. D_TYPE, step_def(c, st) .. D_PRIORITY)
      starts[#starts + 1] = {'.' .. st, sd[1] or '', queue_score(tonumber(sd[2] or '0'), wid)}
    end
    record = trec('running', 0, at, at, '', '')
  else
    starts[1] = {'', d[2] or '', queue_score(tonumber(d[3] or '0'), wid)}
  end
  local fields, ks, members = {}, {}, {}
  if not d[4] then
    -- one step per item (most maps, and the big ones): each item is one queued task
    local q, score, prefix = {}, starts[1][3], wid .. ':' .. c .. '.'
    members[starts[1][2]] = q
    for n = 1, take do
      -- formatted once: it is in four places (%d: tostring formats a number as a float,
      -- at three times the cost)
      local k = string.format('%d', x + n - 1)
      local f = 4 * n
      fields[f - 3], fields[f - 2], fields[f - 1], fields[f] = k, record, k .. I_ELEMENT, els[n]
      ks[n] = k
      q[2 * n - 1], q[2 * n] = score, prefix .. k
    end
  else
    local ready = trec('ready', 0, at, '', '', '')
    for n = 1, take do
      local k = string.format('%d', x + n - 1)
      fields[#fields + 1] = k
      fields[#fields + 1] = record
      fields[#fields + 1] = k .. I_ELEMENT
      fields[#fields + 1] = els[n]
      ks[#ks + 1] = k
      for _, sp in ipairs(starts) do
        fields[#fields + 1] = k .. sp[1]
        fields[#fields + 1] = ready
        local q = members[sp[2]]
        if q == nil then q = {}; members[sp[2]] = q end
        q[#q + 1] = sp[3]
        q[#q + 1] = wid .. ':' .. c .. '.' .. k .. sp[1]
      end
    end
  end
  write_all('HSET', k_items(wk, c), fields)
  write_all('SADD', k_flying(wk, c), ks)
  if queue then
    for typ, q in pairs(members) do
      write_all('ZADD', k_queue(typ), q)
      wake[typ] = true
    end
  end
  redis.call('HSET', wk, c .. M_STARTED, NUM[x + take], c .. M_FLYING, NUM[y + take])
  count('t:waiting', 0 - take)
  if d[4] then count('t:running', take) else count('t:ready', take) end
  return take
end

-- The members of the JSON object `s` as {key's JSON text, key, value's JSON text}, in
-- order; nil when `s` is not an object. Nothing is decoded but the keys: values keep
-- their text (numbers, empty lists and objects as written).
local function json_members(s)
  local function str_end(i)  -- s[i] is '"': where that string ends
    local j = i + 1
    while true do
      j = string.find(s, '["\\]', j)
      if not j then return nil end
      if string.byte(s, j) == 34 then return j end
      j = j + 2
    end
  end
  local function value_end(i)
    local b = string.byte(s, i)
    if b == 34 then return str_end(i) end
    if b == 123 or b == 91 then
      local depth, j = 0, i
      while j do
        j = string.find(s, '[%[%]{}"]', j)
        if not j then return nil end
        local ch = string.byte(s, j)
        if ch == 34 then
          j = str_end(j)
        elseif ch == 123 or ch == 91 then
          depth = depth + 1
        else
          depth = depth - 1
          if depth == 0 then return j end
        end
        if j then j = j + 1 end
      end
      return nil
    end
    local j = string.find(s, '[,}%]%s]', i)
    return (j or #s + 1) - 1
  end
  local i = string.find(s, '%S')
  if not i or string.byte(s, i) ~= 123 then return nil end
  local out = {}
  i = string.find(s, '%S', i + 1)
  if i and string.byte(s, i) == 125 then return out end
  while i and string.byte(s, i) == 34 do
    local ke = str_end(i)
    if not ke then return nil end
    local raw = string.sub(s, i, ke)
    local colon = string.find(s, '%S', ke + 1)
    if not colon then return nil end
    local v = string.find(s, '%S', colon + 1)
    local ve = v and value_end(v)
    if not ve then return nil end
    out[#out + 1] = {raw, cjson.decode(raw), string.sub(s, v, ve)}
    i = string.find(s, '%S', ve + 1)
    if i and string.byte(s, i) == 125 then return out end
    i = i and string.find(s, '%S', i + 1)
  end
  return nil
end

-- The steps manager's gather (engine/spec/mapping.py, gather_of, is its reference) of the JSON texts
-- `outs`: one object, their values under `elem` listed in order under `key` (none: a
-- plain merge), every other key merged in, the first text's value winning; a text that
-- is not an object adds nothing.
local function manager_gather(outs, key, elem)
  local listed, merged, seen = {}, {}, {}
  if key then seen[key] = true end
  for n = 1, #outs do
    local members = outs[n] and json_members(outs[n])
    for _, m in ipairs(members or {}) do
      if key and m[2] == elem then
        listed[#listed + 1] = m[3]
      elseif not seen[m[2]] then
        seen[m[2]] = true
        merged[#merged + 1] = m[1] .. ':' .. m[3]
      end
    end
  end
  if key then
    table.insert(merged, 1, cjson.encode(key) .. ':[' .. table.concat(listed, ',') .. ']')
  end
  return '{' .. table.concat(merged, ',') .. '}'
end

-- What an item (or an item's first step) of map c with the steps manager's gather is given as its
-- parents: the map's parent's output less the list it maps over, under that parent's
-- name (field <c>j, written once by expand.lua), as the steps manager sends its sub-task
-- items the rest of the message. A native map's items are given none.
local function manager_given(wk, dk, c)
  local rest = redis.call('HGET', wk, c .. M_GIVEN)
  if not rest then return '[]', {} end
  local over = string.match(redis.call('HGET', dk, c .. D_MAP) or '', '^(%d+)|')
  local name = over and redis.call('HGET', dk, over .. D_NAME) or ''
  return cjson.encode({name}), {rest}
end

-- A map's output: its items' outputs in item order (null for a failed one), inline up to
-- MAP_INLINE items; past that a handle the reader pages (Engine.map_outputs). A map with
-- the steps manager's gather (its `J`: the list key) outputs that gather, inline at any size.
local MAP_INLINE = 10000
local function map_output(wid, wk, c, n)
  local dk = dkey(wk)
  local key = has_feature(dk, D_GATHER) and redis.call('HGET', dk, c .. D_GATHER)
  if key then
    local fields = {}
    for k = 0, n - 1 do fields[#fields + 1] = k .. T_OUTPUT end
    local elem = key
    if #key > 1 and string.sub(key, -1) == 's' then elem = string.sub(key, 1, -2) end
    return manager_gather(hmget_all(k_items(wk, c), fields), key, elem)
  end
  if n > MAP_INLINE then
    return cjson.encode({map = tonumber(c), items = n, workflow = tonumber(wid)})
  end
  local fields = {}
  for k = 0, n - 1 do fields[#fields + 1] = k .. T_OUTPUT end
  local outs = hmget_all(k_items(wk, c), fields)
  for k = 1, n do outs[k] = outs[k] or 'null' end
  return '[' .. table.concat(outs, ',') .. ']'
end

-- The errors of map c's failed items by index, {"17": "error", ...}, for its gather (the
-- first MAP_INLINE of them in item order; Engine.items(state="failed") pages them all).
local function map_errors(wk, c)
  local ks = redis.call('SMEMBERS', k_failed(wk, c))
  for n = 1, #ks do ks[n] = tonumber(ks[n]) end
  table.sort(ks)
  local fields = {}
  for n = 1, math.min(#ks, MAP_INLINE) do fields[n] = ks[n] .. T_ERROR end
  local errs = hmget_all(k_items(wk, c), fields)
  local parts = {}
  for n = 1, #fields do
    parts[n] = '"' .. ks[n] .. '":' .. cjson.encode(errs[n] or '')
  end
  return '{' .. table.concat(parts, ',') .. '}'
end

-- How many failed items map c tolerates out of n: its `O` ("5%" or a count; absent 0).
local function tolerated(spec, n)
  if spec == nil or spec == false then return 0 end
  local pct = string.match(spec, '^([%d%.]+)%%$')
  if pct then return math.floor(n * tonumber(pct) / 100) end
  return tonumber(spec) or 0
end

-- Every item of map c has ended: it succeeds (its children are released) unless more
-- items failed than it tolerates. `live`: the workflow is running or paused.
local function map_finished(wid, wk, c, n, bad, live)
  local h, fld = wk, c
  local t = tparse(redis.call('HGET', h, fld))
  local ct = tonumber(redis.call('HGET', wk, F_CREATED))
  t.d = NOW - ct
  local dk = dkey(wk)
  if bad <= tolerated(redis.call('HGET', dk, c .. D_TOLERATE), n) then
    t.s = 'succeeded'
    redis.call('HSET', wk, c, tpack(t), c .. T_OUTPUT, map_output(wid, wk, c, n))
    if bad > 0 then redis.call('HSET', wk, c .. M_ERRORS, map_errors(wk, c)) end
    move_count('running', 'succeeded')
    redis.call('HINCRBY', wk, F_OK, 1)
    redis.call('HINCRBY', wk, F_LEFT, -1)
    emit('succeeded', wid, c)
    local kids = split_csv(redis.call('HGET', dk, c .. D_CHILDREN))
    local st = redis.call('HGET', wk, F_STATE)
    if #kids > 0 and live then release_children(wid, wk, kids, ct, st == 'running') end
  else
    t.s = 'failed'
    local err = bad .. ' of ' .. n .. ' items failed'
    redis.call('HSET', wk, c, tpack(t), c .. T_ERROR, err)
    move_count('running', 'failed')
    redis.call('HINCRBY', wk, F_BAD, 1)
    redis.call('HINCRBY', wk, F_LEFT, -1)
    emit('failed', wid, c, err)
    if live then skip_descendants(wid, wk, c) end
  end
end

-- Item k of map c ended (ok or finally failed): one fewer in flight, the next one starts,
-- and the map ends with its last item. Returns nothing.
-- Items of map c ended: `ok` and `bad` lists of item indexes that succeeded or finally
-- failed. As many in flight fewer, as many more start, and the map ends with its last
-- item. Every item is counted in exactly one place: pending (h - x), in flight (y, the
-- set k_flying), succeeded (k), failed (z, the set k_failed) or cancelled (c).
local function items_ended(wid, wk, c, ok, bad_ks, live, queue)
  local ended = {}
  for _, k in ipairs(ok) do ended[#ended + 1] = k end
  for _, k in ipairs(bad_ks) do ended[#ended + 1] = k end
  write_all('SREM', k_flying(wk, c), ended)
  -- numbers as NUM strings: Redis formats a number argument as a float (%.17g)
  redis.call('HINCRBY', wk, c .. M_FLYING, NUM[0 - #ended])
  local done = redis.call('HINCRBY', wk, c .. M_OK, NUM[#ok])
  local bad = redis.call('HINCRBY', wk, c .. M_BAD, NUM[#bad_ks])
  if #bad_ks > 0 then write_all('SADD', k_failed(wk, c), bad_ks) end
  local f = redis.call('HMGET', wk, c, c .. M_TOTAL)
  if tstate(f[1]) ~= 'running' then return end  -- the map was cancelled meanwhile
  if live then materialize(wid, wk, c, queue) end
  local n = tonumber(f[2] or '-1')
  if done + bad == n then map_finished(wid, wk, c, n, bad, live) end
end

local function item_ended(wid, wk, c, k, ok, live, queue)
  if ok then
    items_ended(wid, wk, c, {k}, {}, live, queue)
  else
    items_ended(wid, wk, c, {}, {k}, live, queue)
  end
end

-- The ready steps (of `n`) of item k of map c leave the queues, cancelled: its item has
-- ended (failed or cancelled); a step running goes on and starts nothing.
local function cancel_ready_steps(wid, wk, c, k, n)
  local mk = k_items(wk, c)
  for t = 0, n - 1 do
    local sr = redis.call('HGET', mk, k .. '.' .. t)
    if tstate(sr) == 'ready' then
      dequeue(wid, wk, c .. '.' .. k .. '.' .. t)
      local r = tparse(sr)
      r.s = 'cancelled'
      redis.call('HSET', mk, k .. '.' .. t, tpack(r))
    end
  end
end

-- Step s of item k of map c ended: `ok` with its output JSON `value` ("" for none), or
-- finally failed with the error `value`. Its children in the item whose parents have all
-- succeeded become ready (queued if `queue`); the item succeeds with its last steps (its
-- output: its one last step's, or {step name: output} of several) or fails with any
-- step, its steps not started then out of the queues; `ended(ok)` is called then, once.
-- Nothing happens to an item that ended already (failed or cancelled while this step ran).
local function step_ended(wid, wk, c, k, s, ok, value, queue, done_at, ended)
  local mk = k_items(wk, c)
  local rec = redis.call('HGET', mk, k)
  if tstate(rec) ~= 'running' then return end
  local dk = dkey(wk)
  local _, a, q, b = tparts(rec)
  if not ok then
    local name = redis.call('HGET', dk, step_def(c, s) .. D_NAME) or s
    redis.call('HSET', mk, k, trec('failed', a, q, b, done_at, ''), k .. T_ERROR,
      'step ' .. name .. ': ' .. value)
    cancel_ready_steps(wid, wk, c, k, tonumber(redis.call('HGET', dk, c .. D_STEPS)))
    ended(false)
    return
  end
  local kids = split_csv(redis.call('HGET', dk, step_def(c, s) .. D_CHILDREN))
  if #kids == 0 then
    local last = split_csv(redis.call('HGET', dk, c .. D_LAST_STEPS))
    local out = value
    if #last > 1 then
      if redis.call('HINCRBY', mk, k .. I_STEPS_DONE, 1) < #last then return end
      local parts = {}
      if has_feature(dk, D_GATHER) and redis.call('HEXISTS', dk, c .. D_GATHER) == 1 then
        -- steps manager: the item's output is its last steps' outputs merged (the first wins)
        for n, t in ipairs(last) do parts[n] = redis.call('HGET', mk, k .. '.' .. t .. T_OUTPUT) end
        out = manager_gather(parts)
      else
        for n, t in ipairs(last) do
          local f = redis.call('HMGET', mk, k .. '.' .. t .. T_OUTPUT)
          local name = redis.call('HGET', dk, step_def(c, t) .. D_NAME) or t
          parts[n] = cjson.encode(name) .. ':' .. (f[1] or 'null')
        end
        out = '{' .. table.concat(parts, ',') .. '}'
      end
    end
    local done = trec('succeeded', a, q, b, done_at, '')
    if out ~= '' then
      redis.call('HSET', mk, k, done, k .. T_OUTPUT, out)
    else
      redis.call('HSET', mk, k, done)
    end
    redis.call('HDEL', mk, k .. I_ELEMENT, k .. T_ERROR)
    ended(true)
    return
  end
  local at = NOW - tonumber(redis.call('HGET', wk, F_CREATED))
  for _, t in ipairs(kids) do
    local sd = step_def(c, t)
    local d = redis.call('HMGET', dk, sd .. D_WAIT_FOR, sd .. D_TYPE, sd .. D_PRIORITY)
    local go = true
    if d[1] then
      go = redis.call('HINCRBY', mk, k .. '.' .. t .. T_PARENTS_OK, 1) >= tonumber(d[1])
      if go then redis.call('HDEL', mk, k .. '.' .. t .. T_PARENTS_OK) end
    end
    if go then
      local old = redis.call('HGET', mk, k .. '.' .. t)
      local r = trec('ready', 0, at, '', '', '')
      if old then  -- run again after a retry: its fencing token keeps counting
        local pr = tparse(old)
        pr.s, pr.q, pr.d, pr.g = 'ready', at, '', ''
        r = tpack(pr)
      end
      redis.call('HSET', mk, k .. '.' .. t, r)
      if queue then
        redis.call('ZADD', k_queue(d[2] or ''), queue_score(tonumber(d[3] or '0'), wid),
          wid .. ':' .. c .. '.' .. k .. '.' .. t)
        wake[d[2] or ''] = true
      end
    end
  end
end

-- Item k of map c runs again (it had failed): a one-step item is ready; a multi-step
-- item is running again, its failed steps ready, what follows them waiting for them
-- (steps that succeeded keep their outputs; a step still running goes on). Counters and
-- queues follow (queued if `queue`). The caller moves k between the map's sets.
local function rerun_item(wid, wk, c, k, ct, queue)
  local mk = k_items(wk, c)
  local at = NOW - ct
  local n = tonumber(redis.call('HGET', dkey(wk), c .. D_STEPS) or '0')
  local r = tparse(redis.call('HGET', mk, k))
  redis.call('HDEL', mk, k .. T_FAILURES, k .. T_ERROR)
  if n == 0 then
    r.s, r.q, r.d = 'ready', at, ''
    redis.call('HSET', mk, k, tpack(r))
    move_count('failed', 'ready')
    if queue then enqueue(wid, wk, c .. '.' .. k) end
    return
  end
  r.s, r.q, r.b, r.d = 'running', at, at, ''
  redis.call('HSET', mk, k, tpack(r))
  move_count('failed', 'running')
  local dk = dkey(wk)
  local done = {}
  for t = 0, n - 1 do done[t] = tstate(redis.call('HGET', mk, k .. '.' .. t)) == 'succeeded' end
  for t = 0, n - 1 do
    local f = k .. '.' .. t
    local sr = redis.call('HGET', mk, f)
    local st = tstate(sr)
    if st ~= 'succeeded' and st ~= 'running' then
      local ups = split_csv(redis.call('HGET', dk, step_def(c, t) .. D_PARENTS))
      local ready = 0
      for _, p in ipairs(ups) do if done[tonumber(p)] then ready = ready + 1 end end
      redis.call('HDEL', mk, f .. T_FAILURES, f .. T_ERROR, f .. T_PARENTS_OK)
      if ready == #ups then
        local pr = tparse(sr)
        pr.s, pr.q, pr.b, pr.d, pr.g = 'ready', at, '', '', ''
        redis.call('HSET', mk, f, tpack(pr))
        if queue then enqueue(wid, wk, c .. '.' .. f) end
      else
        if sr then
          -- waiting again; its attempts are kept in a record marked waiting
          local pr = tparse(sr)
          pr.s, pr.q, pr.b, pr.d, pr.g = 'waiting', '', '', '', ''
          redis.call('HSET', mk, f, tpack(pr))
        end
        if ready > 0 then redis.call('HSET', mk, f .. T_PARENTS_OK, ready) end
      end
    end
  end
  local last = split_csv(redis.call('HGET', dk, c .. D_LAST_STEPS))
  if #last > 1 then
    local got = 0
    for _, t in ipairs(last) do if done[tonumber(t)] then got = got + 1 end end
    redis.call('HSET', mk, k .. I_STEPS_DONE, got)
  end
end

-- The in-flight items of map c (if i is a map that has started any) whose record is in
-- state `st`, as task ids "c.k".
-- For a map whose items run several steps: its steps in state `st`, as "c.k.s".
local function items_in(wk, c, st)
  local out = {}
  local mk = k_items(wk, c)
  local n = tonumber(redis.call('HGET', dkey(wk), c .. D_STEPS) or '0')
  for _, k in ipairs(redis.call('SMEMBERS', k_flying(wk, c))) do
    if n == 0 then
      if tstate(redis.call('HGET', mk, k)) == st then out[#out + 1] = c .. '.' .. k end
    else
      for s = 0, n - 1 do
        if tstate(redis.call('HGET', mk, k .. '.' .. s)) == st then
          out[#out + 1] = c .. '.' .. k .. '.' .. s
        end
      end
    end
  end
  return out
end

-- Take every item of map c out of the counters, queues and agents' sets, and delete its
-- keys (UNLINK: a big map is freed in the background): for cleanup.
local function forget_items(wid, wk, c)
  local f = redis.call('HMGET', wk, c .. M_STORED, c .. M_STARTED, c .. M_OK, c .. M_BAD,
    c .. M_CANCELLED)
  local h, x = tonumber(f[1] or '0'), tonumber(f[2] or '0')
  count('t:waiting', x - h)
  count('t:succeeded', 0 - tonumber(f[3] or '0'))
  count('t:failed', 0 - tonumber(f[4] or '0'))
  count('t:cancelled', 0 - tonumber(f[5] or '0'))
  local mk = k_items(wk, c)
  local flying = redis.call('SMEMBERS', k_flying(wk, c))
  for _, k in ipairs(flying) do count('t:' .. tstate(redis.call('HGET', mk, k)), -1) end
  -- the tasks that may be queued or held by an agent: items in flight, or their steps
  -- (and the steps of failed items, which may still run)
  local tasks = {}
  local n = tonumber(redis.call('HGET', dkey(wk), c .. D_STEPS) or '0')
  if n == 0 then
    for _, k in ipairs(flying) do tasks[#tasks + 1] = k end
  else
    for _, set in ipairs({flying, redis.call('SMEMBERS', k_failed(wk, c))}) do
      for _, k in ipairs(set) do
        for s = 0, n - 1 do tasks[#tasks + 1] = k .. '.' .. s end
      end
    end
  end
  for _, k in ipairs(tasks) do
    local t = tparse(redis.call('HGET', mk, k))
    local i = c .. '.' .. k
    if t.s == 'running' and t.g ~= '' then
      redis.call('SREM', k_running(t.g), wid .. ':' .. i)
    elseif t.s == 'ready' then
      dequeue(wid, wk, i)
    end
  end
  redis.call('ZREM', K_EXPAND, wid .. ':' .. c)
  redis.call('UNLINK', mk, k_pending(wk, c), k_flying(wk, c), k_failed(wk, c))
end
