-- lib/definition.lua: Reading a workflow's definition.

-- Whether definition key dk uses `feature` (a field letter after the "+" that ends its
-- digest: codec.FEATURE_FIELDS): a step reads such fields only then.
-- Found once per definition, feature and call (the table its own: see wkey).
local has_feature = (function()
  local found = cached(function(dk)
    local plus = string.find(dk, '+', 1, true)
    return cached(function(feature)
      return plus ~= nil and string.find(dk, feature, plus + 1, true) ~= nil
    end)
  end)
  return function(dk, feature) return found[dk][feature] end
end)()

-- The definition key of workflow hash wk, read once per script call; pass `digest` when
-- it was read already. Only for a workflow that exists.
local dkeys = {}
local function dkey(wk, digest)
  local k = dkeys[wk]
  if k == nil then
    k = k_definition(digest or redis.call('HGET', wk, F_DIGEST))
    dkeys[wk] = k
  end
  return k
end
