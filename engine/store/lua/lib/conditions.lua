-- lib/conditions.lua: A task's condition (`when`): what its claim row brings for it.

-- The claim row's extras of a task with a condition (engine/spec/conditions.py decides it):
-- the expression (`when`, its definition's F field as read) and its parents' states, in
-- the order of their outputs (`parents_csv`, its definition's U field).
local function when_extras(wk, when, parents_csv, extras)
  extras[#extras + 1] = '"when":' .. cjson.encode(when)
  local ups = split_csv(parents_csv)
  if #ups == 0 then return end
  local recs = hmget_all(wk, ups)
  local states = {}
  for k = 1, #ups do states[k] = cjson.encode(tstate(recs[k]) or 'waiting') end
  extras[#extras + 1] = '"states":[' .. table.concat(states, ',') .. ']'
end
