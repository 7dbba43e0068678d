-- lib/counters.lua: What one call gathers to write last (counters, events, wake-ups, expansions).

local counters = {}
local events = {}
local wake = {}
local expansions = {}  -- "wid:c" of maps whose items the caller should expand now

local function count(field, delta)
  counters[field] = (counters[field] or 0) + delta
end

-- A task (`n` tasks) moves from state old to new. Moves are counted per pair of states (a
-- hot path: one table update per task, or per call for a claim's and a completion's) and
-- turned into the counter fields t:<state> once per call (apply_moves, from flush).
local moves = {}  -- old -> new -> tasks moved
local function move_count(old, new, n)
  local m = moves[old]
  if m == nil then
    m = {}
    moves[old] = m
  end
  m[new] = (m[new] or 0) + (n or 1)
end

local function apply_moves()
  for old, m in pairs(moves) do
    for new, n in pairs(m) do
      count('t:' .. old, -n)
      count('t:' .. new, n)
      -- n:<state>: tasks that ever ended so, never decreased (rates for /metrics)
      if new == 'succeeded' or new == 'failed' then count('n:' .. new, n) end
    end
  end
  moves = {}
end

-- move_count for task i: nothing for a step (see counted).
local function move_task(i, old, new)
  if counted(i) then move_count(old, new) end
end
