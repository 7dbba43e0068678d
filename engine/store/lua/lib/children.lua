-- lib/children.lua: A succeeded task's children: their parents' outputs, their release.

-- The outputs of a task's parents (csv of indexes), in that order, in one read.
local function parent_outputs(wk, parents_csv)
  local parents = split_csv(parents_csv)
  if #parents == 0 then return {} end
  for k, p in ipairs(parents) do parents[k] = p .. 'o' end
  local outs = hmget_all(wk, parents)
  for k = 1, #outs do outs[k] = outs[k] or '' end
  return outs
end


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
local function release_children(wid, wk, kids, ct, queue)
  local fields, recs = {}, {}
  local dk = dkey(wk)
  local delays = has_feature(dk, 'H')
  local rated = has_feature(dk, D_RATE)
  local n = delays and 4 or 3  -- fields read per child: W T R, and H when it may be delayed
  for k, c in ipairs(kids) do
    fields[#fields + 1] = c .. 'W'
    fields[#fields + 1] = c .. 'T'
    fields[#fields + 1] = c .. 'R'
    if delays then fields[#fields + 1] = c .. 'H' end
    recs[k] = c
  end
  local info = hmget_all(dk, fields)
  recs = hmget_all(wk, recs)
  local ready = {}
  local decided = {}  -- {child, class} of children decided not to run
  local at = NOW - ct
  for k, c in ipairs(kids) do
    local rec = recs[k]
    local go = tstate(rec) == 'waiting'
    local w = info[n * k - n + 1]
    local last = w and string.byte(w, -1)
    local is_map = last == 109  -- "<parents>m"
    if go and last == 114 then  -- "<parents>r": a trigger rule
      local verdict = hear(wk, dk, c, w, 's')
      go = verdict == 'run'
      if go then
        redis.call('HDEL', wk, c .. 'w')
      elseif verdict then
        settle(wid, wk, c, rec, verdict, ct, nil)
        decided[#decided + 1] = {c, verdict}
      end
    elseif go then
      if is_map then w = string.sub(w, 1, -2) end
      local need = tonumber(w or '1')
      if need > 1 then
        local v = redis.call('HINCRBY', wk, c .. 'w', 1)
        go = v >= need
        if go then
          if v < RB then
            redis.call('HDEL', wk, c .. 'w')
          else  -- some parent was skipped: every parent has ended, so it is skipped
            go = false
            local s, _, sk = rule_counts(v)
            if s + sk == need then
              settle(wid, wk, c, rec, 'skipped', ct, nil)
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
      else
        ready[#ready + 1] = trec('ready', 0, at + delay, '', '', '')
      end
      move_count('waiting', 'ready')
      if delay > 0 then
        redis.call('ZADD', K_DELAYED, NOW + delay, wid .. ':' .. c)
      elseif queue then
        local typ = info[n * k - n + 2] or ''
        local score = queue_score(tonumber(info[n * k - n + 3] or '0'), wid)
        if not (rated and rate_enqueue(wk, dk, wid .. ':' .. c, c, c, typ, score)) then
          redis.call('ZADD', k_queue(typ), score, wid .. ':' .. c)
          wake[typ] = true
        end
      end
    end
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
