-- lib/rules.lua: Trigger rules: a task hears its parents' ends.

-- Trigger rules: engine/core/rules.py is the reference (tests/test_rules.py runs both).
-- A task's parents' ends are counted in its `<c>w` as s + RB * k + RB2 * f, one HINCRBY
-- per edge: RB is above the most parents a task may have, and RB2 * RB stays below 2^53
-- (exact in Lua's numbers).
local RB = 131072
local RB2 = RB * RB
local function rule_counts(v)
  local f = math.floor(v / RB2)
  v = v - f * RB2
  local k = math.floor(v / RB)
  return v - k * RB, f, k
end

-- What a task with `rule` and n parents does when s succeeded, f failed (or
-- upstream_failed) and k were skipped: 'run', 'upstream_failed', 'skipped', or nil while
-- parents still to end could change that (engine/core/rules.py, decide).
local function rule_decide(rule, n, s, f, k)
  local d = s + f + k
  if rule == 'all_done' or rule == 'finally' then
    if d == n then return 'run' end
  elseif rule == 'all_failed' then
    if f == n then return 'run' end
    if s + k > 0 then return 'skipped' end
  elseif rule == 'one_success' then
    if s > 0 then return 'run' end
    if d == n then
      if f > 0 then return 'upstream_failed' end
      return 'skipped'
    end
  elseif rule == 'one_failed' then
    if f > 0 then return 'run' end
    if d == n then return 'skipped' end
  elseif rule == 'none_failed' then
    if f > 0 then return 'upstream_failed' end
    if d == n then return 'run' end
  elseif rule == 'none_failed_min_one_success' then
    if f > 0 then return 'upstream_failed' end
    if d == n then
      if s > 0 then return 'run' end
      return 'skipped'
    end
  else  -- all_success
    if f > 0 then return 'upstream_failed' end
    if s == n then return 'run' end
    if d == n then return 'skipped' end
  end
  return nil
end

-- Waiting task c (its definition's W as read: `w`) hears that one parent ended as `cls`:
-- 's' succeeded, 'f' failed or upstream_failed, 'k' skipped. Counts it and returns what
-- c does now (rule_decide), reading its rule only when W says it has one.
local function hear(wk, dk, c, w, cls)
  local last = w and string.byte(w, -1)
  if last == 114 then  -- "<parents>r": a rule other than all_success
    local inc = 1
    if cls == 'k' then inc = RB elseif cls == 'f' then inc = RB2 end
    local s, f, k = rule_counts(redis.call('HINCRBY', wk, c .. T_PARENTS_OK, inc))
    return rule_decide(redis.call('HGET', dk, c .. D_RULE), tonumber(string.sub(w, 1, -2)), s, f, k)
  end
  if cls == 'f' then return 'upstream_failed' end
  if last == 109 then w = string.sub(w, 1, -2) end  -- a map: "<parents>m"
  local need = tonumber(w or '1')
  if need == 1 then
    if cls == 's' then return 'run' end
    return 'skipped'
  end
  local inc = 1
  if cls == 'k' then inc = RB end
  local s, _, k = rule_counts(redis.call('HINCRBY', wk, c .. T_PARENTS_OK, inc))
  if s == need then return 'run' end
  if s + k == need then return 'skipped' end
  return nil
end

-- Task c of workflow wid (record `rec`) will not run: `st` is 'upstream_failed' or
-- 'skipped', decided when parent p ended (nil: a parent that succeeded). Events for the
-- first MAX_DECIDED_EVENTS of a call (a failure can decide a huge subtree at once; its
-- state is the truth); the caller counts it in the workflow's skip/uf and left.
local MAX_DECIDED_EVENTS = 1000
local decided_events = 0
local function settle(wid, wk, c, rec, st, ct, p)
  local t = tparse(rec)
  t.s, t.d = st, NOW - ct
  redis.call('HSET', wk, c, tpack(t))
  redis.call('HDEL', wk, c .. T_PARENTS_OK)
  move_count('waiting', st)
  if decided_events < MAX_DECIDED_EVENTS then
    decided_events = decided_events + 1
    emit(st, wid, tonumber(c), p and tonumber(p))
  end
end

local function outcome_class(st)
  if st == 'succeeded' then return 's' end
  if st == 'skipped' then return 'k' end
  return 'f'
end

-- Task i of workflow wid ended without succeeding (its record says failed, skipped or
-- upstream_failed): each waiting child hears it, and a child decided by it is settled
-- and tells its own children, down the graph (an iterative walk, O(1) per edge). It
-- stops at children whose rule is met by that end: those run (queued unless the
-- workflow is paused). `ends`, when given, is a list of {task, class} to walk instead.
-- The name is older than the rules: a skip is now one outcome among others.
local function skip_descendants(wid, wk, i, ends)
  local dk = dkey(wk)
  local m = redis.call('HMGET', wk, F_STATE, F_CREATED, i or F_CREATED)
  local queue, ct = m[1] == 'running', tonumber(m[2])
  local stack = ends or {{i, outcome_class(tstate(m[3]))}}
  local skipped, upstream = 0, 0
  while #stack > 0 do
    local top = table.remove(stack)
    local p, cls = top[1], top[2]
    for _, c in ipairs(split_csv(redis.call('HGET', dk, p .. D_CHILDREN))) do
      local rec = redis.call('HGET', wk, c)
      if tstate(rec) == 'waiting' then
        local verdict = hear(wk, dk, c, redis.call('HGET', dk, c .. D_WAIT_FOR), cls)
        if verdict == 'run' then
          -- a rule met by this end (never a map: maps take the default rule)
          local t = tparse(rec)
          local delay = tonumber(redis.call('HGET', dk, c .. D_DELAY) or '0')
          t.s, t.q = 'ready', NOW - ct + delay
          redis.call('HSET', wk, c, tpack(t))
          redis.call('HDEL', wk, c .. T_PARENTS_OK)
          move_count('waiting', 'ready')
          if delay > 0 then
            redis.call('ZADD', K_DELAYED, NOW + delay, wid .. ':' .. c)
          elseif queue then
            enqueue(wid, wk, c)
          end
        elseif verdict then
          settle(wid, wk, c, rec, verdict, ct, p)
          if verdict == 'skipped' then
            skipped = skipped + 1
            stack[#stack + 1] = {c, 'k'}
          else
            upstream = upstream + 1
            stack[#stack + 1] = {c, 'f'}
          end
        end
      end
    end
  end
  if skipped > 0 then redis.call('HINCRBY', wk, F_SKIP, skipped) end
  if upstream > 0 then redis.call('HINCRBY', wk, F_UPSTREAM, upstream) end
  if skipped + upstream > 0 then redis.call('HINCRBY', wk, F_LEFT, 0 - skipped - upstream) end
  return skipped + upstream
end
