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
-- OFFSET[ct] is {that number, its string}.
local OFFSET = setmetatable({}, {__index = function(t, ct)
  local n = NOW - tonumber(ct)
  local o = {n, tostring(n)}
  t[ct] = o
  return o
end})

-- NEXT_ATTEMPT[a]: the attempt after `a` (a record's attempts, as a string) as a string.
local NEXT_ATTEMPT = setmetatable({['0'] = '1', [''] = '1'}, {__index = function(t, a)
  local v = tostring((tonumber(a) or 0) + 1)
  t[a] = v
  return v
end})

-- NUM[n]: integer n as a command's argument, formatted once per value and call (Redis
-- formats a number argument with printf's %.17g, which costs more than the command).
local NUM = setmetatable({}, {__index = function(t, n)
  local v = n % 1 == 0 and string.format('%d', n) or string.format('%.17g', n)
  t[n] = v
  return v
end})

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
