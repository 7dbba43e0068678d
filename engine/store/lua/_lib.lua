-- _lib.lua: helpers shared by every script. engine/store/scripts.py prepends this file to
-- each script, so each one stays a single atomic EVALSHA. Its Python half is
-- engine/store/codec.py (field names, the task record, reply rows, event tuples) and
-- engine/store/keys.py (key names): change both sides together; tests/test_codec.py
-- checks they agree.
--
-- Conventions for every script:
--   KEYS[1]  a key of the shard (routes the call in a cluster)
--   ARGV[1]  the shard prefix, "ns:{ns:S}"; ARGV[2] the event stream's approximate cap
--   Script-specific arguments start at ARGV[3].
-- Every script validates before its first write; errors are returned as
-- "RFSTATE ..." (operation not allowed in this state) or "RFNOTFOUND ..." replies.
--
-- Workflow hash fields (P:w:<wid>):
--   name st d n left ok bad skip ct ft       name, state, definition digest, task count,
--                                            tasks not terminal, succeeded, failed,
--                                            skipped, created ms, finished ms
--   <i>                                      task i's record (see tparse): state,
--                                            attempts started (the fencing token),
--                                            ready/begin/done times as ms after ct,
--                                            agent; absent: waiting, never started
--   <i>f <i>l <i>o <i>e                      failures, leases lost, output JSON, error
--   <i>w                                     parents succeeded so far, for a waiting task
--                                            with several (absent: none)
-- Definition hash fields (P:d:<digest>, shared by every workflow with the same tasks;
-- never changed once written. Every script reaches it through the workflow's `d` field
-- (dkey below), so a workflow that must change its tasks at run time, e.g. a fan-out
-- adding one task per item, can point `d` at a private copy it owns and change that):
--   r bk bm                                  workflows using it, retry backoff base ms,
--                                            longest retry delay ms
--   <i>N <i>T <i>P <i>R <i>M <i>C <i>U <i>V  task i: name, type, payload JSON, priority,
--                                            max attempts, children csv, parents csv,
--                                            parents' names as a JSON array
--   <i>W                                     how many parents, when more than one
-- Absent fields take their defaults: T "", R 0, M 1, C/U/V none, W 1, f/l/w 0,
-- bk 1000, bm 600000. A task waits until every parent has succeeded.

local P = ARGV[1]
local EVMAX = ARGV[2]
local T = redis.call('TIME')
local NOW = tonumber(T[1]) * 1000 + math.floor(tonumber(T[2]) / 1000)

-- Key names of this shard (engine/store/keys.py, ShardKeys, is the other half).
local K_SEQ = P .. ':seq'
local K_DELAYED = P .. ':delayed'
local K_ALL = P .. ':all'
local K_NAMES = P .. ':names'
local K_STATS = P .. ':stats'
local K_TYPES = P .. ':types'
local K_AGENTS = P .. ':agents'
local K_AGENTS_SEEN = P .. ':agents:seen'
local K_AGENTS_LIVE = P .. ':agents:live'
local K_AGENTS_STATE = P .. ':agents:state'
local K_EVENTS = P .. ':events'
local K_EVCHAN = P .. ':ev'
local function wkey(wid) return P .. ':w:' .. wid end
local function k_definition(digest) return P .. ':d:' .. digest end
local function k_queue(typ) return P .. ':q:' .. typ end
local function k_wake(typ) return P .. ':wake:' .. typ end
local function k_state(st) return P .. ':ws:' .. st end
local function k_name(name) return P .. ':wn:' .. name end
local function k_running(agent) return P .. ':run:' .. agent end

local counters = {}
local events = {}
local wake = {}

local function count(field, delta)
  counters[field] = (counters[field] or 0) + delta
end

local function move_count(old, new)
  count('t:' .. old, -1)
  count('t:' .. new, 1)
end

-- The definition key of workflow hash wk, read once per script call; pass `digest` when
-- it was read already. Only for a workflow that exists.
local dkeys = {}
local function dkey(wk, digest)
  local k = dkeys[wk]
  if k == nil then
    k = k_definition(digest or redis.call('HGET', wk, 'd'))
    dkeys[wk] = k
  end
  return k
end

-- An event is [kind, wid, task index or -1, extra or null], encoded as JSON.
local function emit(kind, wid, idx, extra)
  local x = 'null'
  if extra ~= nil then x = cjson.encode(extra) end
  events[#events + 1] = '["' .. kind .. '",' .. wid .. ',' .. idx .. ',' .. x .. ']'
end

-- emit() with `extra` already JSON-encoded (hot paths encode an agent id once per call).
local function emit_json(kind, wid, idx, extra_json)
  events[#events + 1] = '["' .. kind .. '",' .. wid .. ',' .. idx .. ',' .. extra_json .. ']'
end

local function split_csv(s)
  local out = {}
  if s == nil or s == false or s == '' then return out end
  for part in string.gmatch(s, '[^,]+') do out[#out + 1] = part end
  return out
end

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

-- HSET or ZADD a long flat argument list in slices (Lua's unpack stops near 8,000 values).
local function write_all(cmd, key, list)
  local chunk = 4000
  for from = 1, #list, chunk do
    redis.call(cmd, key, unpack(list, from, math.min(from + chunk - 1, #list)))
  end
end

-- HMGET any number of fields, in slices; the values in the fields' order.
local function hmget_all(key, fields)
  if #fields <= 4000 then
    if #fields == 0 then return {} end
    return redis.call('HMGET', key, unpack(fields))
  end
  local out = {}
  for from = 1, #fields, 4000 do
    local got = redis.call('HMGET', key, unpack(fields, from, math.min(from + 3999, #fields)))
    for k = 1, #got do out[#out + 1] = got[k] end
  end
  return out
end

local function split_member(member)
  local c = string.find(member, ':', 1, true)
  return string.sub(member, 1, c - 1), string.sub(member, c + 1)
end

local function queue_score(priority, wid)
  -- Higher priority first, then older workflow first: lowest score pops first.
  return string.format('%.0f', (1000 - priority) * 1000000000000 + tonumber(wid))
end

-- Put task i of workflow wid into its type's ready queue and wake that type's agents.
local function enqueue(wid, wk, i)
  local f = redis.call('HMGET', dkey(wk), i .. 'T', i .. 'R')
  local typ = f[1] or ''
  redis.call('ZADD', k_queue(typ), queue_score(tonumber(f[2] or '0'), wid), wid .. ':' .. i)
  wake[typ] = true
end

-- Take task i out of whichever ready structure holds it (queue or backoff).
local function dequeue(wid, wk, i)
  local member = wid .. ':' .. i
  local typ = redis.call('HGET', dkey(wk), i .. 'T') or ''
  redis.call('ZREM', k_queue(typ), member)
  redis.call('ZREM', K_DELAYED, member)
end

local function set_wstate(wid, wk, old, new, score)
  redis.call('HSET', wk, 'st', new)
  redis.call('ZREM', k_state(old), wid)
  redis.call('ZADD', k_state(new), score, wid)
  count('w:' .. old, -1)
  count('w:' .. new, 1)
end

-- Mark every waiting descendant of task i skipped. Returns how many were skipped.
local function skip_descendants(wid, wk, i)
  local skipped = 0
  local dk = dkey(wk)
  local stack = split_csv(redis.call('HGET', dk, i .. 'C'))
  while #stack > 0 do
    local c = table.remove(stack)
    local t = tparse(redis.call('HGET', wk, c))
    if t.s == 'waiting' then
      t.s = 'skipped'
      redis.call('HSET', wk, c, tpack(t))
      move_count('waiting', 'skipped')
      skipped = skipped + 1
      for _, g in ipairs(split_csv(redis.call('HGET', dk, c .. 'C'))) do stack[#stack + 1] = g end
    end
  end
  if skipped > 0 then
    redis.call('HINCRBY', wk, 'skip', skipped)
    redis.call('HINCRBY', wk, 'left', -skipped)
  end
  return skipped
end

-- Close a workflow whose last unfinished task just ended.
local function finish_if_done(wid, wk)
  local m = redis.call('HMGET', wk, 'st', 'left', 'ok', 'n')
  if (m[1] == 'running' or m[1] == 'paused') and tonumber(m[2]) <= 0 then
    local final = 'failed'
    if tonumber(m[3]) == tonumber(m[4]) then final = 'succeeded' end
    set_wstate(wid, wk, m[1], final, NOW)
    redis.call('HSET', wk, 'ft', NOW)
    emit(final, wid, -1)
  end
end

-- The outputs of a task's parents (csv of indexes), in that order, in one read.
local function parent_outputs(wk, parents_csv)
  local parents = split_csv(parents_csv)
  if #parents == 0 then return {} end
  for k, p in ipairs(parents) do parents[k] = p .. 'o' end
  local outs = hmget_all(wk, parents)
  for k = 1, #outs do outs[k] = outs[k] or '' end
  return outs
end

-- Start (or restart) task i for agent: bump the fencing token, record who and when.
-- `rec` is the task's record as read (a hot path: only what it needs is parsed);
-- `agent_json` the agent id JSON-encoded, once per call.
-- Returns the reply row {wid, i, name, type, payload, attempt, parent names JSON,
-- {their outputs}}.
local function start_task(wid, wk, i, agent, ct, agent_json, rec, digest)
  local dk = dkey(wk, digest)
  local f = redis.call('HMGET', dk, i .. 'N', i .. 'T', i .. 'P', i .. 'U', i .. 'V')
  local a, q = 0, ''
  if rec then
    a, q = string.match(rec, '^[^|]*|([^|]*)|([^|]*)|')
    a = tonumber(a) or 0
  end
  a = a + 1
  redis.call('HSET', wk, i, trec('running', a, q, NOW - ct, '', agent))
  emit_json('claimed', wid, i, agent_json)
  return {wid, tonumber(i), f[1], f[2] or '', f[3] or 'null', a, f[5] or '[]',
    parent_outputs(wk, f[4])}
end

-- A running task (record `t`) whose agent is gone (lost, stopped or restarted) while its
-- workflow was cancelled: it will not run again.
local function drop_cancelled(wk, i, ct, t)
  t.s, t.d = 'cancelled', NOW - ct
  redis.call('HSET', wk, i, tpack(t))
  redis.call('HINCRBY', wk, 'left', -1)
  move_count('running', 'cancelled')
end

-- Move tasks whose retry backoff is over into their queues (held if paused).
local function promote_due(limit)
  local due = redis.call('ZRANGEBYSCORE', K_DELAYED, '-inf', NOW, 'LIMIT', 0, limit)
  for _, member in ipairs(due) do
    redis.call('ZREM', K_DELAYED, member)
    local wid, i = split_member(member)
    local wk = wkey(wid)
    local f = redis.call('HMGET', wk, 'st', i)
    if f[1] == 'running' and tstate(f[2]) == 'ready' then enqueue(wid, wk, i) end
  end
  return #due
end

-- Delete every key and index entry of a finished workflow, and its counters.
-- A cancelled workflow can still have running tasks: they leave their agent's set (the
-- agent's late outcome is then rejected, as the hash is gone).
local function remove_workflow(wid, wk, st)
  local m = redis.call('HMGET', wk, 'name', 'n', 'd')
  local n = tonumber(m[2])
  local dk = dkey(wk, m[3])
  for i = 0, n - 1 do
    local t = tparse(redis.call('HGET', wk, i))
    local s = t.s
    count('t:' .. s, -1)
    if s == 'running' and t.g ~= '' then
      redis.call('SREM', k_running(t.g), wid .. ':' .. i)
    elseif s == 'ready' then
      dequeue(wid, wk, i)
    end
  end
  redis.call('DEL', wk)
  if redis.call('HINCRBY', dk, 'r', -1) <= 0 then redis.call('DEL', dk) end
  redis.call('ZREM', K_ALL, wid)
  redis.call('ZREM', k_state(st), wid)
  redis.call('ZREM', k_name(m[1]), wid)
  if tonumber(redis.call('ZINCRBY', K_NAMES, -1, m[1])) <= 0 then
    redis.call('ZREM', K_NAMES, m[1])
  end
  count('w:' .. st, -1)
  emit('cleaned', wid, -1)
end

-- The opening of every operator step on one workflow: read its state (and `more` fields)
-- and refuse unless the state is one of `allowed`. Returns the fields read (state first),
-- or nil and the error reply to return. `needs` ends the refusal: "only a running
-- workflow can be paused".
local function open_workflow(wid, wk, allowed, needs, ...)
  local m = redis.call('HMGET', wk, 'st', ...)
  if not m[1] then
    return nil, redis.error_reply('RFNOTFOUND workflow ' .. wid .. ' does not exist')
  end
  for _, st in ipairs(allowed) do
    if m[1] == st then return m end
  end
  return nil, redis.error_reply('RFSTATE workflow ' .. wid .. ' is ' .. m[1] .. '; ' .. needs)
end

-- Walk the tasks recorded as the agent's own (its running set): visit(member, wid, i,
-- wk, f, t) for each, f = the workflow's {st, ct, record, d}, t = the parsed record.
local function each_held(agent, visit)
  for _, member in ipairs(redis.call('SMEMBERS', k_running(agent))) do
    local wid, i = split_member(member)
    local wk = wkey(wid)
    local f = redis.call('HMGET', wk, 'st', 'ct', i, 'd')
    visit(member, wid, i, wk, f, tparse(f[3]))
  end
end

-- Apply counters, write the coalesced event batch, and send wake-ups. Call once, last.
local function flush()
  for field, delta in pairs(counters) do
    if delta ~= 0 then redis.call('HINCRBY', K_STATS, field, delta) end
  end
  if #events > 0 then
    local body = '{"ts":' .. NOW .. ',"ev":[' .. table.concat(events, ',') .. ']}'
    redis.call('XADD', K_EVENTS, 'MAXLEN', '~', EVMAX, '*', 'e', body)
    redis.call('PUBLISH', K_EVCHAN, body)
  end
  for typ, _ in pairs(wake) do
    redis.call('PUBLISH', k_wake(typ), '')
  end
end
