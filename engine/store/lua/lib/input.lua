-- lib/input.lua: A workflow's input.

-- A workflow's input JSON as stored in its hash's field `in` (codec/input.py, input_layout and
-- stored_input, is the other half): "" no input; the JSON itself when it fits one compact
-- hash value (INPUT_PIECE bytes); else "#<n>" (no JSON starts with "#"): the JSON cut into
-- n pieces of at most INPUT_PIECE bytes, never inside a character, in fields in1..in<n>.
-- A longer value would turn the whole workflow hash from a listpack into a hashtable
-- (several times bigger). "#" alone: more than INPUT_PIECES_MAX pieces, or a hash the
-- pieces would take past LISTPACK_ENTRIES fields: the JSON is in a key of its own
-- (k_input); past 4 pieces that costs less Redis time to read and no more memory.
local INPUT_PIECE = 64  -- Redis's default hash-max-listpack-value
local INPUT_PIECES_MAX = 4
local INPUT_FIELDS = {'in1', 'in2', 'in3', 'in4'}  -- F_INPUT .. n, spelled out once
local LISTPACK_ENTRIES = 128  -- Redis's default hash-max-listpack-entries

-- How push.lua stores input JSON `input` of a workflow of `ntasks` tasks: the value of
-- `in`, then either nil or the pieces as field/value pairs, then nil or the JSON for the
-- input's own key.
local function input_layout(input, ntasks)
  local size = #input
  if size <= INPUT_PIECE then return input, nil, nil end
  if size > INPUT_PIECE * INPUT_PIECES_MAX then return '#', nil, input end
  local fields, n, from = {}, 0, 1
  while from <= size do
    local to = from + INPUT_PIECE - 1
    -- end a piece before a UTF-8 continuation byte (10xxxxxx), 3 bytes back at most
    local back = 0
    while to < size and back < 3 do
      local b = string.byte(input, to + 1)
      if b < 128 or b >= 192 then break end
      to, back = to - 1, back + 1
    end
    n = n + 1
    fields[2 * n - 1] = INPUT_FIELDS[n] or (F_INPUT .. n)
    fields[2 * n] = string.sub(input, from, to)
    from = to + 1
  end
  -- the workflow's own fields once it has run: 11 of its own, a record and an output per task
  if n > INPUT_PIECES_MAX or 11 + 2 * ntasks + n > LISTPACK_ENTRIES then
    return '#', nil, input
  end
  return '#' .. n, fields, nil
end

-- The input JSON ("" for none) of workflow hash wk, whose field `in` is `head` (as read,
-- false when absent); pieces are joined and a key of its own read once per script call.
local inputs = {}
local function read_input(wk, head)
  if not head then return '' end
  if string.byte(head, 1) ~= 35 then return head end  -- not "#": the JSON itself
  local v = inputs[wk]
  if v == nil then
    if head == '#' then
      v = redis.call('GET', k_input(wk)) or ''
    else
      local n = tonumber(string.sub(head, 2))
      v = table.concat(redis.call('HMGET', wk, unpack(INPUT_FIELDS, 1, n)))
    end
    inputs[wk] = v
  end
  return v
end
