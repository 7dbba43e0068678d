-- lib/counters.lua: What one call gathers to write last (counters, events, wake-ups, expansions).

local counters = {}
local events = {}
local wake = {}
local expansions = {}  -- "wid:c" of maps whose items the caller should expand now

local function count(field, delta)
  counters[field] = (counters[field] or 0) + delta
end

local function move_count(old, new)
  count('t:' .. old, -1)
  count('t:' .. new, 1)
  -- n:<state>: tasks that ever ended so, never decreased (rates for /metrics)
  if new == 'succeeded' or new == 'failed' then count('n:' .. new, 1) end
end

-- move_count for task i: nothing for a step (see counted).
local function move_task(i, old, new)
  if counted(i) then move_count(old, new) end
end
