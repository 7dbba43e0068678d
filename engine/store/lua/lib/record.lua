-- lib/record.lua: The task record.

-- NUM[n]: integer n as a command's argument, formatted once per value and call (Redis
-- formats a number argument with printf's %.17g, which costs more than the command).
local NUM = setmetatable({}, {__index = function(t, n)
  local v = n % 1 == 0 and string.format('%d', n) or string.format('%.17g', n)
  t[n] = v
  return v
end})

-- NUMOF[s]: the number string s says, read once per string and call (a record's times:
-- a fan-out's tasks share theirs).
local NUMOF = setmetatable({}, {__index = function(t, v)
  local n = tonumber(v)
  t[v] = n
  return n
end})

-- A task's record, "<state>|<attempts>|<ready>|<begin>|<done>|<agent>" (one field, so a
-- step reads and writes one field however much it changes; the agent comes last, so its
-- id may hold any character). Stored compact: the state as one letter (LETTER), ready as
-- ms after the workflow's creation, begin as ms after ready, done as ms after begin (after
-- ready, or the creation, for a time before it that is not set), "" for a time not set.
-- A record of an earlier release (the state's word, every time after the creation) reads
-- as it was: its state is more than one letter. tparse and tparts give the state's word
-- and every time after the creation, as strings, whichever the form; trec writes compact.
-- nil (no record): waiting, never started.
local LETTER = {waiting = 'W', ready = 'Q', running = 'R', suspended = 'P', succeeded = 'S',
  failed = 'F', skipped = 'K', upstream_failed = 'U', cancelled = 'C'}
local WORD = {}
for word, letter in pairs(LETTER) do
  WORD[letter], WORD[word] = word, word
end

-- A compact record's begin and done (as stored) as times after the creation.
local function tabsolute(q, b, d)
  local base = q ~= '' and tonumber(q) or nil
  if b ~= '' then
    local bn = tonumber(b) + (base or 0)
    b, base = NUM[bn], bn
  end
  if d ~= '' then d = NUM[tonumber(d) + (base or 0)] end
  return b, d
end

local function tparts(v)
  if not v then return 'waiting', '0', '', '', '', '' end
  local s, a, q, b, d, g = string.match(v, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
  if #s == 1 then b, d = tabsolute(q, b, d) end
  return WORD[s], a, q, b, d, g
end

local function tparse(v)
  if not v then return {s = 'waiting', a = 0, q = '', b = '', d = '', g = ''} end
  local s, a, q, b, d, g = tparts(v)
  return {s = s, a = tonumber(a) or 0, q = q, b = b, d = d, g = g}
end

-- A record from its parts, times after the creation (numbers or strings, "" for none);
-- tpack packs a table from tparse.
local function trec(s, a, q, b, d, g)
  if b ~= '' or d ~= '' then
    local base = q ~= '' and tonumber(q) or nil
    if b ~= '' then
      local bn = tonumber(b)
      if base then b = NUM[bn - base] end
      base = bn
    end
    if d ~= '' and base then d = NUM[tonumber(d) - base] end
  end
  if type(q) == 'number' then q = NUM[q] end
  return LETTER[s] .. '|' .. a .. '|' .. q .. '|' .. b .. '|' .. d .. '|' .. g
end

local function tpack(t)
  return trec(t.s, t.a, t.q, t.b, t.d, t.g)
end

-- A running task's record for its end (a completion's hot path): the state's word,
-- attempts, ready and begin as a compact record stores them, begin as a number after the
-- creation (nil: not set), agent. tended writes the end from them.
-- Parsed once per record text and call: a fan-out's tasks claimed together, the items a
-- map started together, runs pushed together hold the same text (times are compact: after
-- the creation, after ready), and a parse costs more than the rest of a completion's step.
local running_parts = {}  -- record -> {its six parts}
local function trunning(v)
  if not v then return 'waiting', '0', '', '', nil, '' end
  local p = running_parts[v]
  if p then return p[1], p[2], p[3], p[4], p[5], p[6] end
  local s, a, q, b, _, g = string.match(v, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
  local bn = nil
  if b ~= '' then
    bn = NUMOF[b]
    if q ~= '' then
      if #s == 1 then
        bn = bn + NUMOF[q]
      else  -- an earlier release's record: begin after the creation
        b = NUM[bn - NUMOF[q]]
      end
    end
  end
  s = WORD[s]
  running_parts[v] = {s, a, q, b, bn, g}
  return s, a, q, b, bn, g
end

-- The record of a task ended in state s at done_at (a number after the creation), from
-- trunning's parts.
local function tended(s, a, q, b, bn, done_at, g)
  local d
  if bn then
    d = NUM[done_at - bn]
  elseif q ~= '' then
    d = NUM[done_at - NUMOF[q]]
  else
    d = NUM[done_at]
  end
  return LETTER[s] .. '|' .. a .. '|' .. q .. '|' .. b .. '|' .. d .. '|' .. g
end

-- The record a task running as `record` (trunning's parts a q b bn g) ends with,
-- succeeded at done_at: worked out once per running record and time (tasks claimed
-- together mostly end together too: see trunning).
local tsucceeded = (function()
  local made = {}  -- a running record -> {done_at, the record succeeded then}
  return function(record, a, q, b, bn, done_at, g)
    local rec = made[record]
    if rec and rec[1] == done_at then return rec[2] end
    rec = tended('succeeded', a, q, b, bn, done_at, g)
    made[record] = {done_at, rec}
    return rec
  end
end)()

-- NOW as ms after a workflow's creation `ct` (its field, as read), a number and the string
-- a record holds: worked out once per workflow and call (formatting a number costs more
-- in Lua than the rest of a record).
-- OFFSET[ct] is {that number, its string}.
local OFFSET = setmetatable({}, {__index = function(t, ct)
  local n = NOW - tonumber(ct)
  local o = {n, string.format('%d', n)}  -- tostring formats a number as a float: 3x this
  t[ct] = o
  return o
end})

-- NEXT_ATTEMPT[a]: the attempt after `a` (a record's attempts, as a string) as a string.
local NEXT_ATTEMPT = setmetatable({['0'] = '1', [''] = '1'}, {__index = function(t, a)
  local v = tostring((tonumber(a) or 0) + 1)
  t[a] = v
  return v
end})

-- Only the state of a record, as read.
local function tstate(v)
  if not v then return 'waiting' end
  return WORD[string.match(v, '^[^|]*')]
end

-- Write task i's record (an item's to its map's hash).
local function set_record(wk, i, v)
  local h, fld = rec_at(wk, i)
  redis.call('HSET', h, fld, v)
end
