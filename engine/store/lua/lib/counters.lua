-- lib/counters.lua: What one call gathers to write last (counters, events, wake-ups, expansions).

local counters = {}
local events = {}
local wake = {}
local expansions = {}  -- "wid:c" of maps whose items the caller should expand now

local function count(field, delta)
  counters[field] = (counters[field] or 0) + delta
end

-- A task moves from state old to new (the counter fields t:<state> are built once per
-- state and call).
local move_count = (function()
  local t = setmetatable({}, {__index = function(names, st)
    local f = 't:' .. st
    names[st] = f
    return f
  end})
  return function(old, new)
    counters[t[old]] = (counters[t[old]] or 0) - 1
    counters[t[new]] = (counters[t[new]] or 0) + 1
    -- n:<state>: tasks that ever ended so, never decreased (rates for /metrics)
    if new == 'succeeded' then
      counters['n:succeeded'] = (counters['n:succeeded'] or 0) + 1
    elseif new == 'failed' then
      counters['n:failed'] = (counters['n:failed'] or 0) + 1
    end
  end
end)()

-- move_count for task i: nothing for a step (see counted).
local function move_task(i, old, new)
  if counted(i) then move_count(old, new) end
end
