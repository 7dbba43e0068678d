-- lib/record.lua: The task record.

-- A task's record, "<state>|<attempts>|<ready>|<begin>|<done>|<agent>", as a table
-- (one field, so a step reads and writes one field however much it changes; the agent
-- comes last, so its id may hold any character). nil (no record): waiting, never started.
local function tparse(v)
  if not v then return {s = 'waiting', a = 0, q = '', b = '', d = '', g = ''} end
  local s, a, q, b, d, g = string.match(v, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
  return {s = s, a = tonumber(a) or 0, q = q, b = b, d = d, g = g}
end

-- A record from its parts (trec) and a table from tparse (tpack); tparts splits one into
-- its six parts as strings without a table (the hot paths).
local function trec(s, a, q, b, d, g)
  return s .. '|' .. a .. '|' .. q .. '|' .. b .. '|' .. d .. '|' .. g
end

local function tpack(t)
  return trec(t.s, t.a, t.q, t.b, t.d, t.g)
end

local function tparts(v)
  if not v then return 'waiting', '0', '', '', '', '' end
  return string.match(v, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
end

-- NOW as ms after a workflow's creation `ct` (its field, as read), a number and the string
-- a record holds: worked out once per workflow and call (formatting a number costs more
-- in Lua than the rest of a record).
local offsets = {}
local function offset_of(ct)
  local o = offsets[ct]
  if o == nil then
    local n = NOW - tonumber(ct)
    o = {n, tostring(n)}
    offsets[ct] = o
  end
  return o[1], o[2]
end

-- The attempt after `a` (a record's attempts, as a string) as a string.
local NEXT_ATTEMPT = {['0'] = '1', ['1'] = '2', ['2'] = '3', ['3'] = '4', ['4'] = '5', ['5'] = '6',
  ['6'] = '7', ['7'] = '8', ['8'] = '9', ['9'] = '10', [''] = '1'}
local function next_attempt(a)
  return NEXT_ATTEMPT[a] or tostring((tonumber(a) or 0) + 1)
end

-- Only the state of a record, as read.
local function tstate(v)
  if not v then return 'waiting' end
  return string.match(v, '^[^|]*')
end

-- Write task i's record (an item's to its map's hash).
local function set_record(wk, i, v)
  local h, fld = rec_at(wk, i)
  redis.call('HSET', h, fld, v)
end
