-- lib/events.lua: Events of tasks, items and steps.

-- An event is [kind, wid, task index or -1, extra or null], encoded as JSON. An operator's
-- step on a workflow has extra {count, who}: what it changed and who asked; a signal's
-- (signal.lua) {name, outcome, task name or '', by (as the sender says), identity (as
-- authenticated)}: codec/events.py decodes each kind's by position.
local function emit(kind, wid, idx, extra)
  local x = 'null'
  if extra ~= nil then x = cjson.encode(extra) end
  events[#events + 1] = '["' .. kind .. '",' .. wid .. ',' .. idx .. ',' .. x .. ']'
end

-- An item's event: ["item.<kind>", wid, -1, [c, k, extra JSON...]]; a step's (k is
-- "k.s"): ["step.<kind>", wid, -1, [c, k, s, extra JSON...]]. Items claimed or
-- succeeded one after another in one call, of one map and with the same extra, share
-- one event whose k is the list of their indexes (codec.decode_batch hands them out one
-- by one again): a big map's history then costs a few bytes per item.
local group = nil  -- the last event, while it is such a shared one
local grouped = false  -- some event is one (flush renders them)
local function emit_item(kind, wid, c, k, extra_json)
  local x = ''
  if extra_json ~= nil then x = ',' .. extra_json end
  if kind == 'claimed' or kind == 'succeeded' then
    local g = group  -- compared part by part: no key string per item
    if g ~= nil and g.at == #events and g.item == kind and g.wid == wid and g.c == c
        and g.x == x then
      g.ks[#g.ks + 1] = k
      return
    end
    if string.find(k, '.', 1, true) == nil then
      grouped = true
      group = {item = kind, wid = wid, c = c, x = x, ks = {k}, at = #events + 1,
        pre = '["item.' .. kind .. '",' .. wid .. ',-1,[' .. c .. ',[', post = ']' .. x .. ']]'}
      events[#events + 1] = group
      return
    end
  end
  local d = string.find(k, '.', 1, true)
  if d ~= nil then
    events[#events + 1] = '["step.' .. kind .. '",' .. wid .. ',-1,[' .. c .. ','
      .. string.sub(k, 1, d - 1) .. ',' .. string.sub(k, d + 1) .. x .. ']]'
    return
  end
  events[#events + 1] = '["item.' .. kind .. '",' .. wid .. ',-1,[' .. c .. ',' .. k .. x .. ']]'
end

-- An event of task i, an item's as emit_item does: `extra` a Lua value or nil.
local function emit_task(kind, wid, i, extra)
  local d = string.find(i, '.', 1, true)
  if d == nil then return emit(kind, wid, tonumber(i), extra) end
  local x = nil
  if extra ~= nil then x = cjson.encode(extra) end
  emit_item(kind, wid, string.sub(i, 1, d - 1), string.sub(i, d + 1), x)
end

-- emit() with `extra` already JSON-encoded (hot paths encode an agent id once per call).
local function emit_json(kind, wid, idx, extra_json)
  events[#events + 1] = '["' .. kind .. '",' .. wid .. ',' .. idx .. ',' .. extra_json .. ']'
end

-- A task claimed or succeeded (`kind`; `member` "<wid>:<i>", as its queue and its agent's
-- set name it), with `extra_json` (an agent id as JSON; nil for none): tasks of one kind
-- and extra one after another in one call share one event, ["tasks.<kind>", 0, -1,
-- ["<wid>:<i>,<wid>:<i>...", extra]], which codec.decode_batch hands out one by one again
-- (a claim's or a completion's events then cost a few bytes and no string per task).
local function emit_tasks(kind, member, extra_json)
  local x = extra_json or 'null'
  local g = group
  if g ~= nil and g.at == #events and g.kind == kind and g.x == x then
    g.ks[#g.ks + 1] = member
    return
  end
  grouped = true
  group = {kind = kind, x = x, ks = {member}, at = #events + 1,
    pre = '["tasks.' .. kind .. '",0,-1,["', post = '",' .. x .. ']]'}
  events[#events + 1] = group
end

local function split_csv(s)
  local out = {}
  if s == nil or s == false or s == '' then return out end
  for part in string.gmatch(s, '[^,]+') do out[#out + 1] = part end
  return out
end
