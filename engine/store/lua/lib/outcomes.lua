-- lib/outcomes.lua: Outcomes beyond ok and err (engine/core/outcomes.py): skip, and the end of a run that a task aborted.

-- Task i (not an item) of workflow wid, running as its record's parts say, ended
-- skipped: its handler raised Skip, or its condition was false. `why` (may be "") is
-- kept in `<i>v` for status; its children hear it (skip_descendants) while the run is
-- live, as they hear a task skipped by its rule.
local function task_skipped(wid, wk, i, a, q, b, done_at, g, why, live)
  if why ~= '' then
    redis.call('HSET', wk, i, trec('skipped', a, q, b, done_at, g), i .. T_WHY, why)
  else
    redis.call('HSET', wk, i, trec('skipped', a, q, b, done_at, g))
  end
  if a ~= '1' then redis.call('HDEL', wk, i .. T_ERROR) end  -- an earlier attempt's error
  move_task(i, 'running', 'skipped')
  redis.call('HINCRBY', wk, F_SKIP, 1)
  redis.call('HINCRBY', wk, F_LEFT, -1)
  emit('skipped', wid, i)
  if live then skip_descendants(wid, wk, i) end
end

-- Runs where a task aborted ({wid, wk} each, in order): each still running or paused
-- ends failed at once, its reason "abort", as past a deadline (end_workflow): tasks not
-- started are cancelled, no failure branch or finally task runs, running ones finish.
local function end_aborted(list)
  for _, w in ipairs(list) do
    local m = redis.call('HMGET', w[2], F_STATE, F_COUNT)
    if m[1] == 'running' or m[1] == 'paused' then
      end_workflow(w[1], w[2], m[1], m[2], 'failed', nil, 'abort')
    end
  end
end
