-- lib/input.lua: A workflow's input.

-- A workflow's input JSON as stored in its hash's field `in` (codec/input.py, input_layout and
-- stored_input, is the other half): "" no input; the JSON itself when it fits one compact
-- hash value (INPUT_VALUE bytes); else "#<n>" (no JSON starts with "#") and the first of
-- n pieces the JSON is cut into, never inside a character, the others in fields in2..in<n>,
-- each value at most INPUT_PIECE bytes. A longer value would turn the whole workflow hash
-- from a listpack into a hashtable (several times bigger). "#" alone: more than
-- INPUT_PIECES_MAX pieces, or a hash the pieces would take past LISTPACK_ENTRIES fields:
-- the JSON is in a key of its own (k_input); past 4 pieces that costs less Redis time to
-- read and no more memory. "#<n>" alone: an earlier release's run, its n pieces in fields
-- in1..in<n>.
local INPUT_VALUE = 64  -- Redis's default hash-max-listpack-value
local INPUT_PIECE = 63  -- the longest value a listpack keeps behind a one-byte header
local INPUT_PIECES_MAX = 4
local INPUT_FIELDS = {'in1', 'in2', 'in3', 'in4'}  -- F_INPUT .. n, spelled out once
local LISTPACK_ENTRIES = 128  -- Redis's default hash-max-listpack-entries

-- How push.lua stores input JSON `input` of a workflow of `ntasks` tasks: the value of
-- `in`, then either nil or the pieces after the first as field/value pairs, then nil or
-- the JSON for the input's own key.
local function input_layout(input, ntasks)
  local size = #input
  if size <= INPUT_VALUE then return input, nil, nil end
  if size > INPUT_PIECE * INPUT_PIECES_MAX - 2 then return '#', nil, input end
  local fields, n, from, first = {}, 0, 1, nil
  while from <= size do
    local to = from + INPUT_PIECE - 1
    if from == 1 then to = to - 2 end  -- the first after "#<n>"
    -- end a piece before a UTF-8 continuation byte (10xxxxxx), 3 bytes back at most
    local back = 0
    while to < size and back < 3 do
      local b = string.byte(input, to + 1)
      if b < 128 or b >= 192 then break end
      to, back = to - 1, back + 1
    end
    n = n + 1
    if n == 1 then
      first = string.sub(input, from, to)
    else
      fields[2 * n - 3] = INPUT_FIELDS[n] or (F_INPUT .. n)
      fields[2 * n - 2] = string.sub(input, from, to)
    end
    from = to + 1
  end
  -- the workflow's own fields once it has run: 11 of its own, a record and an output per task
  if n > INPUT_PIECES_MAX or 11 + 2 * ntasks + n > LISTPACK_ENTRIES then
    return '#', nil, input
  end
  return '#' .. n .. first, fields, nil
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
      local n = string.byte(head, 2) - 48
      if #head == 2 then  -- an earlier release's: every piece in a field of its own
        v = table.concat(redis.call('HMGET', wk, unpack(INPUT_FIELDS, 1, n)))
      else
        v = string.sub(head, 3) .. table.concat(redis.call('HMGET', wk, unpack(INPUT_FIELDS, 2, n)))
      end
    end
    inputs[wk] = v
  end
  return v
end
