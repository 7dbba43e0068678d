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
