-- lib/children.lua: A succeeded task's children: their parents' outputs, their release.

-- The outputs of a task's parents (csv of indexes), in that order, in one read; the fields
-- to read are worked out once per csv and call.
local output_fields = {}
local function parent_outputs(wk, parents_csv)
  if parents_csv == nil or parents_csv == false or parents_csv == '' then return {} end
  local fields = output_fields[parents_csv]
  if fields == nil then
    fields = split_csv(parents_csv)
    for k, p in ipairs(fields) do fields[k] = p .. T_OUTPUT end
    output_fields[parents_csv] = fields
  end
  local outs = hmget_all(wk, fields)
  for k = 1, #outs do outs[k] = outs[k] or '' end
  return outs
end

-- The children of task i of definition dk (its C field) as a list: read once per
-- definition, task and call (a definition never changes under a step).
-- CHILDREN[dk][i] is that list.
local CHILDREN = setmetatable({}, {__index = function(t, dk)
  local of = setmetatable({}, {__index = function(o, i)
    local kids = split_csv(redis.call('HGET', dk, i .. D_CHILDREN))
    o[i] = kids
    return kids
  end})
  t[dk] = of
  return of
end})

-- Map c of workflow wid is ready: its items are to be expanded from its parent's output.
-- The caller (agent) is told at once; housekeeping finds it in K_EXPAND if that caller dies.
local function start_expansion(wid, c)
  redis.call('ZADD', K_EXPAND, NOW, wid .. ':' .. c)
  expansions[#expansions + 1] = wid .. ':' .. c
end

-- Children (`kids`) of a task that just succeeded that are still waiting and have no other
-- parent to wait for become ready, queued unless the workflow is paused; a map among them
-- starts its expansion instead (its W ends in "m": no field more to read per child). A
-- child with several parents (its definition's W) counts its parents' ends in `<c>w`, so
-- each success costs one increment however wide the fan-in. A child with a trigger rule
-- (W ends in "r") reads its rule too (hear), and may be decided not to run: that goes
-- on down the graph (skip_descendants). Reads and writes go in slices, whatever the
-- fan-out.
-- A completion counts a join's parents' ends once per call (release_joins, after its
-- loop over outcomes): join key -> {wid, wk, kids, ct, queue, ends}, in order too; nil:
-- counted at once.
local pending_joins = nil
local NO_DECIDED = {}  -- shared and never written
local function release_children(wid, wk, kids, ct, queue, counted)
  local dk = dkey(wk)
  -- their W T R (H), kept on the list (CHILDREN keeps one list per task and call) with
  -- whether the definition has delays and rate limits
  local info = kids.defs
  if info == nil or info.dk ~= dk then
    local delays = has_feature(dk, D_DELAY)
    local fields = {}
    for _, c in ipairs(kids) do
      fields[#fields + 1] = c .. D_WAIT_FOR
      fields[#fields + 1] = c .. D_TYPE
      fields[#fields + 1] = c .. D_PRIORITY
      if delays then fields[#fields + 1] = c .. D_DELAY end
    end
    local v = hmget_all(dk, fields)
    -- A single child that counts its parents' ends (a fan-in's join: W a count, no rule)
    local w = #kids == 1 and v[1]
    local last = w and string.byte(w, -1)
    info = {dk = dk, v = v, delays = delays, rated = has_feature(dk, D_RATE),
      join = last and last ~= 114 and last ~= 109 and w ~= '1'}
    kids.defs = info
  end
  local delays, rated = info.delays, info.rated
  local n = delays and 4 or 3  -- fields read per child: W T R, and H when it may be delayed
  local join = info.join
  info = info.v
  -- A join is counted first and its record read only once every parent has ended: the
  -- other parents' ends cost one increment each. (A child a failed parent decided already
  -- keeps a count nobody reads; a retry sets it again.)
  local counted_v = counted
  if join then
    local w = info[1]
    if counted_v == nil and pending_joins then
      local of = pending_joins[wk]  -- this workflow's joins, by child
      if of == nil then
        of = {}
        pending_joins[wk] = of
      end
      local j = of[kids[1]]
      if j == nil then
        j = {wid, wk, kids, ct, queue, 0}
        of[kids[1]] = j
        pending_joins[#pending_joins + 1] = j
      end
      j[6] = j[6] + 1
      return
    end
    if counted_v == nil then counted_v = redis.call('HINCRBY', wk, kids[1] .. T_PARENTS_OK, '1') end
    if counted_v < tonumber(w) then return end
  end
  local recs = hmget_all(wk, kids)
  local ready = {}
  local decided = NO_DECIDED  -- {child, class} decided not to run (own list from the first)
  local queued = nil  -- per queue key, its new members with their scores (one ZADD each)
  local score_of, score = nil, nil  -- the last priority's queue score
  local at = NOW - ct
  local fresh = nil  -- the record of a child ready at `at` that never ran, built once
  local nready = 0  -- children made ready: counted once (move_count) after the loop
  for k, c in ipairs(kids) do
    local rec = recs[k]
    local go = not rec or tstate(rec) == 'waiting'
    local w = info[n * k - n + 1]
    local last = w and string.byte(w, -1)
    local is_map = last == 109  -- "<parents>m"
    if go and last == 114 then  -- "<parents>r": a trigger rule
      local verdict = hear(wk, dk, c, w, 's')
      go = verdict == 'run'
      if go then
        redis.call('HDEL', wk, c .. T_PARENTS_OK)
      elseif verdict then
        settle(wid, wk, c, rec, verdict, ct, nil)
        if decided == NO_DECIDED then decided = {} end
        decided[#decided + 1] = {c, verdict}
      end
    elseif go and w then
      if is_map then w = string.sub(w, 1, -2) end
      local need = tonumber(w)
      if need > 1 then
        local v = counted_v or redis.call('HINCRBY', wk, c .. T_PARENTS_OK, '1')
        go = v >= need
        if go then
          if v < RB then
            redis.call('HDEL', wk, c .. T_PARENTS_OK)
          else  -- some parent was skipped: every parent has ended, so it is skipped
            go = false
            local s, _, sk = rule_counts(v)
            if s + sk == need then
              settle(wid, wk, c, rec, 'skipped', ct, nil)
              if decided == NO_DECIDED then decided = {} end
              decided[#decided + 1] = {c, 'skipped'}
            end
          end
        end
      end
    end
    if go and is_map then
      -- a map: its items are expanded from the parent's output (expand.lua) first
      local t = tparse(rec)
      t.s, t.q, t.b, t.d = 'running', at, at, ''
      ready[#ready + 1] = c
      ready[#ready + 1] = tpack(t)
      move_count('waiting', 'running')
      start_expansion(wid, c)
    elseif go then
      -- a delay (gush's wait): ready that long from now, held in K_DELAYED till then
      local delay = delays and tonumber(info[4 * k] or '0') or 0
      ready[#ready + 1] = c
      if rec then  -- waiting again after a retry
        local t = tparse(rec)
        t.s, t.q = 'ready', at + delay
        ready[#ready + 1] = tpack(t)
      elseif delay > 0 then
        ready[#ready + 1] = trec('ready', 0, at + delay, '', '', '')
      else
        if fresh == nil then fresh = 'Q|0|' .. string.format('%d', at) .. '|||' end
        ready[#ready + 1] = fresh
      end
      nready = nready + 1
      if delay > 0 then
        redis.call('ZADD', K_DELAYED, NOW + delay, wid .. ':' .. c)
      elseif queue then
        local typ = info[n * k - n + 2] or ''
        local pri = info[n * k - n + 3] or '0'
        if pri ~= score_of then  -- the same for the children of one priority
          score_of, score = pri, queue_score(tonumber(pri), wid)
        end
        local member = wid .. ':' .. c
        if not (rated and rate_enqueue(wk, dk, member, c, c, typ, score)) then
          local qk = k_queue(typ)
          if queued == nil then queued = {} end
          local q = queued[qk]
          if q == nil then
            q = {}
            queued[qk] = q
          end
          q[#q + 1] = score
          q[#q + 1] = member
          wake[typ] = true
        end
      end
    end
  end
  if nready > 0 then move_count('waiting', 'ready', nready) end
  if queued ~= nil then
    for qk, q in pairs(queued) do write_all('ZADD', qk, q) end
  end
  write_all('HSET', wk, ready)
  if #decided > 0 then
    local skipped, upstream, ends = 0, 0, {}
    for _, e in ipairs(decided) do
      if e[2] == 'skipped' then
        skipped = skipped + 1
        ends[#ends + 1] = {e[1], 'k'}
      else
        upstream = upstream + 1
        ends[#ends + 1] = {e[1], 'f'}
      end
    end
    if skipped > 0 then redis.call('HINCRBY', wk, F_SKIP, skipped) end
    if upstream > 0 then redis.call('HINCRBY', wk, F_UPSTREAM, upstream) end
    redis.call('HINCRBY', wk, F_LEFT, 0 - skipped - upstream)
    skip_descendants(wid, wk, nil, ends)
  end
end

-- The joins a completion's outcomes reached, counted: one increment per join and call,
-- then released as release_children does once every parent has ended.
local function release_joins()
  local joins = pending_joins
  pending_joins = nil
  for _, j in ipairs(joins) do
    local v = redis.call('HINCRBY', j[2], j[3][1] .. T_PARENTS_OK, NUM[j[6]])
    release_children(j[1], j[2], j[3], j[4], j[5], v)
  end
end
