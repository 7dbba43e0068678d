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
--   uf                                       upstream_failed (absent until the first)
--   in (in1 in2 ...)                         the input JSON or how it is kept (input_layout)
--   <i>                                      task i's record (see tparse): state,
--                                            attempts started (the fencing token),
--                                            ready/begin/done times as ms after ct,
--                                            agent; absent: waiting, never started
--   <i>f <i>l <i>o <i>e                      failures, leases lost, output JSON, error
--   <i>w                                     its parents' ends so far, for a waiting task:
--                                            s + RB * k + RB2 * f (succeeded, skipped,
--                                            failed or upstream_failed; absent: none).
--                                            The default rule keeps none for one parent
--                                            and never counts f (a failure decides it)
-- Definition hash fields (P:d:<digest>, shared by every workflow with the same tasks;
-- never changed once written. Every script reaches it through the workflow's `d` field
-- (dkey below), so a workflow that must change its tasks at run time, e.g. a fan-out
-- adding one task per item, can point `d` at a private copy it owns and change that):
--   r bk bm                                  workflows using it, retry backoff base ms,
--                                            longest retry delay ms
--   hf fy                                    tasks that handle failures (one_failed,
--                                            all_failed), finally tasks: index csvs
--   <i>N <i>T <i>P <i>R <i>M <i>C <i>U <i>V  task i: name, type, payload JSON, priority,
--                                            max attempts, children csv, parents csv,
--                                            parents' names as a JSON array
--   <i>W                                     how many parents, when more than one,
--                                            "<n>m" for a map, "<n>r" for a task with a
--                                            trigger rule (absent: 1, all_success)
--   <i>G                                     that rule (engine/rules.py; "finally" is
--                                            all_done outside the workflow's result)
--   <i>Y                                     timeout of an attempt, ms (absent: none)
--   <i>H                                     delay, ms: ready that long after its rule is
--                                            met (absent: none)
--   <i>J                                     a map with seed 002's gather: its list key
--                                            (seed002_gather); its workflow field <i>j:
--                                            what its items are given (seed002_given)
--   <i>K                                     parents whose errors come with its claim
--                                            (csv): a gather's maps that tolerate failed
--                                            items ("<p>m"), a failure branch's parents
-- Absent fields take their defaults: T "", R 0, M 1, C/U/V none, W 1, f/l/w 0,
-- bk 1000, bm 600000. A task waits until every parent has succeeded, unless its rule
-- says otherwise (rule_decide below).

local P = ARGV[1]
local EVMAX = ARGV[2]
local T = redis.call('TIME')
local NOW = tonumber(T[1]) * 1000 + math.floor(tonumber(T[2]) / 1000)

-- Key names of this shard (engine/store/keys.py, ShardKeys, is the other half).
local K_SEQ = P .. ':seq'
local K_DELAYED = P .. ':delayed'
local K_SCHEDULED = P .. ':scheduled'
local K_TIMEOUTS = P .. ':timeouts'
local K_DEADLINES = P .. ':deadlines'
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
local K_EXPAND = P .. ':expand'
local K_SNAMES = P .. ':snames'
local K_CC = P .. ':cc'
local K_EXPIRE = P .. ':expire'
local K_SWEEP = P .. ':sweep'
local K_HK = P .. ':hk'
local K_LCLK = P .. ':lclk'
local K_TRUNS = P .. ':truns'
local K_SDUE = P .. ':sdue'
local K_SCHEDCHAN = P .. ':sched'
local function wkey(wid) return P .. ':w:' .. wid end
local function k_definition(digest) return P .. ':d:' .. digest end
local function k_queue(typ) return P .. ':q:' .. typ end
local function k_wake(typ) return P .. ':wake:' .. typ end
local function k_state(st) return P .. ':ws:' .. st end
local function k_name(name) return P .. ':wn:' .. name end
local function k_running(agent) return P .. ':run:' .. agent end
local function k_push_token(token) return P .. ':pt:' .. token end
-- A map c's keys beside its workflow hash wk: its items' fields (m), the elements not yet
-- started (l, a list), the items in flight (f, a set), the items that failed (x, a set).
local function k_items(wk, c) return wk .. ':m:' .. c end
local function k_pending(wk, c) return wk .. ':l:' .. c end
local function k_flying(wk, c) return wk .. ':f:' .. c end
local function k_failed(wk, c) return wk .. ':x:' .. c end
-- A workflow input too long to keep in pieces in its hash (see input_layout), a string.
local function k_input(wk) return wk .. ':in' end
-- A schedule's fired ticks (a zset, the dedup of one run per tick; its hash is
-- k_schedule: spec v nt nx lt cur paused pof ls le runs skipped missed buffered).
local function k_sticks(name) return P .. ':stk:' .. name end
local function k_gate_queue(g) return P .. ':cq:' .. g end
local function k_idem(key) return P .. ':ik:' .. key end
local function k_by_template(tp) return P .. ':wt:' .. tp end
local function k_schedule(sn) return P .. ':s:' .. sn end

-- Item k of map c runs as the virtual task "c.k": its fields live in the map's own hash,
-- named by k (record), k .. 'o' / 'e' / 'f' / 'l' / 'p' (output, error, failures, leases
-- lost, element). item_of("c.k") is c, k; nil for a plain task.
local function item_of(i)
  local d = string.find(i, '.', 1, true)
  if d == nil then return nil end
  return string.sub(i, 1, d - 1), string.sub(i, d + 1)
end

-- Step s of item k of a map c whose items run several steps (a sub-workflow per item)
-- runs as "c.k.s": its record is field "k.s" of the map's hash (its output "k.so", ...),
-- its definition fields are named "s<c>.<s>" + N, T, P... The item's own record (field
-- k) says how the item as a whole stands: running from its start to its last step's end.
-- step_key("k.s") is k and s; nil for an item of a one-step map ("k").
local function step_key(k)
  local d = string.find(k, '.', 1, true)
  if d == nil then return nil end
  return string.sub(k, 1, d - 1), string.sub(k, d + 1)
end

-- The definition index of step s of map c.
local function step_def(c, s) return 's' .. c .. '.' .. s end

-- Task i counts in the P:stats task counters (t:<state>): a plain task and an item do; a
-- step does not (its item is counted, as one task, from its start to its end).
local function counted(i)
  local c, k = item_of(i)
  return c == nil or string.find(k, '.', 1, true) == nil
end

-- The hash and field that hold task i's record (its other fields are that field's name
-- plus a suffix), and the index of its definition.
local function rec_at(wk, i)
  local c, k = item_of(i)
  if c == nil then return wk, i, i end
  local _, s = step_key(k)
  if s == nil then return k_items(wk, c), k, c end
  return k_items(wk, c), k, step_def(c, s)
end

-- The first of `cmds` this script's ACL user may not run, as an error message; nil when
-- it may run them all. scripts.py calls it with every command the script may use, before
-- the script's first write: a script stopped by a permission error is not rolled back.
-- Redis 6.2 has no acl_check_cmd (there the roles of `redisflow acl` must be granted whole).
-- Never list SET here (use SETEX): Redis 7.0.15 segfaults in acl_check_cmd('SET') called
-- without its arguments; tests/test_acl.py checks no script uses it.
local function denied(cmds)
  if not redis.acl_check_cmd then return nil end
  for k = 1, #cmds do
    if not redis.acl_check_cmd(cmds[k]) then
      return 'NOPERM this user may not run ' .. cmds[k] .. '; nothing was written'
    end
  end
  return nil
end

local counters = {}
local events = {}
local wake = {}
local expansions = {}  -- "wid:c" of maps whose items the caller should expand now

local function count(field, delta)
  counters[field] = (counters[field] or 0) + delta
end

local function move_count(old, new)
  count('t:' .. old, -1)
  count('t:' .. new, 1)
  -- n:<state>: tasks that ever ended so, never decreased (rates for /metrics)
  if new == 'succeeded' or new == 'failed' then count('n:' .. new, 1) end
end

-- move_count for task i: nothing for a step (see counted).
local function move_task(i, old, new)
  if counted(i) then move_count(old, new) end
end

-- Whether definition key dk uses `feature` (a field letter after the "+" that ends its
-- digest: codec.FEATURE_FIELDS): a step reads such fields only then.
local function has_feature(dk, feature)
  local plus = string.find(dk, '+', 1, true)
  return plus ~= nil and string.find(dk, feature, plus + 1, true) ~= nil
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

-- An event is [kind, wid, task index or -1, extra or null], encoded as JSON. An operator's
-- step on a workflow has extra {count, who}: what it changed and who asked.
local function emit(kind, wid, idx, extra)
  local x = 'null'
  if extra ~= nil then x = cjson.encode(extra) end
  events[#events + 1] = '["' .. kind .. '",' .. wid .. ',' .. idx .. ',' .. x .. ']'
end

-- Leases count only time Redis was seen running. While any agent lives, heartbeats and
-- housekeeping reach each shard every few seconds (K_LCLK: `t` the NOW of the last one,
-- `a` the gap that caller allows, a third of its lease); a longer gap means Redis
-- itself stood still (frozen, swapping, a long fork, a restart) or nobody called. Every
-- live lease is then moved on by the part of the gap beyond the allowance (the smaller
-- of the caller's and the last caller's), so an agent is declared dead only for
-- heartbeats it missed while Redis ran: at most a third of a lease of a freeze counts,
-- and with a heartbeat every third of a lease, a frozen Redis never turns healthy
-- agents' running tasks over to others. A lease is never moved past its own length
-- after the first call that follows the gap, so a truly dead agent is still reaped at
-- most one lease later. register, heartbeat and reap call it before they read or write
-- a lease (`lease_ms`: the caller's lease; nil for a caller without one). Returns the
-- gap counted out (ms).
local STALL_MS = 5000  -- the allowance when no caller said one
local function lease_clock(lease_ms)
  local c = redis.call('HMGET', K_LCLK, 't', 'a')
  local last, allow = tonumber(c[1]), tonumber(c[2]) or STALL_MS
  local own = allow
  if lease_ms and lease_ms > 0 then
    own = math.floor(lease_ms / 3)
    if own < allow then allow = own end
  end
  redis.call('HSET', K_LCLK, 't', NOW, 'a', own)
  if not last then return 0 end
  local gap = NOW - last - allow
  if gap <= 0 then return 0 end
  local live = redis.call('ZRANGE', K_AGENTS_LIVE, 0, -1, 'WITHSCORES')
  for k = 1, #live, 2 do
    redis.call('ZADD', K_AGENTS_LIVE, tonumber(live[k + 1]) + gap, live[k])
  end
  if #live > 0 then emit('agent.leases_extended', 0, -1, {gap + allow, #live / 2}) end
  return gap
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
    local key = kind .. '|' .. wid .. '|' .. c .. '|' .. x
    if group ~= nil and group.at == #events and group.key == key then
      group.ks[#group.ks + 1] = k
      return
    end
    if string.find(k, '.', 1, true) == nil then
      grouped = true
      group = {key = key, ks = {k}, at = #events + 1,
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

-- A workflow's input JSON as stored in its hash's field `in` (codec.py, input_layout and
-- stored_input, is the other half): "" no input; the JSON itself when it fits one compact
-- hash value (INPUT_PIECE bytes); else "#<n>" (no JSON starts with "#"): the JSON cut into
-- n pieces of at most INPUT_PIECE bytes, never inside a character, in fields in1..in<n>.
-- A longer value would turn the whole workflow hash from a listpack into a hashtable
-- (several times bigger). "#" alone: more than INPUT_PIECES_MAX pieces, or a hash the
-- pieces would take past LISTPACK_ENTRIES fields: the JSON is in a key of its own
-- (k_input); past 4 pieces that costs less Redis time to read and no more memory.
local INPUT_PIECE = 64  -- Redis's default hash-max-listpack-value
local INPUT_PIECES_MAX = 4
local INPUT_FIELDS = {'in1', 'in2', 'in3', 'in4'}
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
    fields[2 * n - 1] = INPUT_FIELDS[n] or ('in' .. n)
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
  local _, _, di = rec_at(wk, i)
  local f = redis.call('HMGET', dkey(wk), di .. 'T', di .. 'R')
  local typ = f[1] or ''
  redis.call('ZADD', k_queue(typ), queue_score(tonumber(f[2] or '0'), wid), wid .. ':' .. i)
  wake[typ] = true
end

-- Take task i out of whichever ready structure holds it (queue or backoff).
local function dequeue(wid, wk, i)
  local member = wid .. ':' .. i
  local _, _, di = rec_at(wk, i)
  local typ = redis.call('HGET', dkey(wk), di .. 'T') or ''
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

-- Trigger rules: engine/rules.py is the reference (tests/test_rules.py runs both).
-- A task's parents' ends are counted in its `<c>w` as s + RB * k + RB2 * f, one HINCRBY
-- per edge: RB is above the most parents a task may have, and RB2 * RB stays below 2^53
-- (exact in Lua's numbers).
local RB = 131072
local RB2 = RB * RB
local function rule_counts(v)
  local f = math.floor(v / RB2)
  v = v - f * RB2
  local k = math.floor(v / RB)
  return v - k * RB, f, k
end

-- What a task with `rule` and n parents does when s succeeded, f failed (or
-- upstream_failed) and k were skipped: 'run', 'upstream_failed', 'skipped', or nil while
-- parents still to end could change that (engine/rules.py, decide).
local function rule_decide(rule, n, s, f, k)
  local d = s + f + k
  if rule == 'all_done' or rule == 'finally' then
    if d == n then return 'run' end
  elseif rule == 'all_failed' then
    if f == n then return 'run' end
    if s + k > 0 then return 'skipped' end
  elseif rule == 'one_success' then
    if s > 0 then return 'run' end
    if d == n then
      if f > 0 then return 'upstream_failed' end
      return 'skipped'
    end
  elseif rule == 'one_failed' then
    if f > 0 then return 'run' end
    if d == n then return 'skipped' end
  elseif rule == 'none_failed' then
    if f > 0 then return 'upstream_failed' end
    if d == n then return 'run' end
  elseif rule == 'none_failed_min_one_success' then
    if f > 0 then return 'upstream_failed' end
    if d == n then
      if s > 0 then return 'run' end
      return 'skipped'
    end
  else  -- all_success
    if f > 0 then return 'upstream_failed' end
    if s == n then return 'run' end
    if d == n then return 'skipped' end
  end
  return nil
end

-- Waiting task c (its definition's W as read: `w`) hears that one parent ended as `cls`:
-- 's' succeeded, 'f' failed or upstream_failed, 'k' skipped. Counts it and returns what
-- c does now (rule_decide), reading its rule only when W says it has one.
local function hear(wk, dk, c, w, cls)
  local last = w and string.byte(w, -1)
  if last == 114 then  -- "<parents>r": a rule other than all_success
    local inc = 1
    if cls == 'k' then inc = RB elseif cls == 'f' then inc = RB2 end
    local s, f, k = rule_counts(redis.call('HINCRBY', wk, c .. 'w', inc))
    return rule_decide(redis.call('HGET', dk, c .. 'G'), tonumber(string.sub(w, 1, -2)), s, f, k)
  end
  if cls == 'f' then return 'upstream_failed' end
  if last == 109 then w = string.sub(w, 1, -2) end  -- a map: "<parents>m"
  local need = tonumber(w or '1')
  if need == 1 then
    if cls == 's' then return 'run' end
    return 'skipped'
  end
  local inc = 1
  if cls == 'k' then inc = RB end
  local s, _, k = rule_counts(redis.call('HINCRBY', wk, c .. 'w', inc))
  if s == need then return 'run' end
  if s + k == need then return 'skipped' end
  return nil
end

-- Task c of workflow wid (record `rec`) will not run: `st` is 'upstream_failed' or
-- 'skipped', decided when parent p ended (nil: a parent that succeeded). Events for the
-- first MAX_DECIDED_EVENTS of a call (a failure can decide a huge subtree at once; its
-- state is the truth); the caller counts it in the workflow's skip/uf and left.
local MAX_DECIDED_EVENTS = 1000
local decided_events = 0
local function settle(wid, wk, c, rec, st, ct, p)
  local t = tparse(rec)
  t.s, t.d = st, NOW - ct
  redis.call('HSET', wk, c, tpack(t))
  redis.call('HDEL', wk, c .. 'w')
  move_count('waiting', st)
  if decided_events < MAX_DECIDED_EVENTS then
    decided_events = decided_events + 1
    emit(st, wid, tonumber(c), p and tonumber(p))
  end
end

local function outcome_class(st)
  if st == 'succeeded' then return 's' end
  if st == 'skipped' then return 'k' end
  return 'f'
end

-- Task i of workflow wid ended without succeeding (its record says failed, skipped or
-- upstream_failed): each waiting child hears it, and a child decided by it is settled
-- and tells its own children, down the graph (an iterative walk, O(1) per edge). It
-- stops at children whose rule is met by that end: those run (queued unless the
-- workflow is paused). `ends`, when given, is a list of {task, class} to walk instead.
-- The name is older than the rules: a skip is now one outcome among others.
local function skip_descendants(wid, wk, i, ends)
  local dk = dkey(wk)
  local m = redis.call('HMGET', wk, 'st', 'ct', i or 'ct')
  local queue, ct = m[1] == 'running', tonumber(m[2])
  local stack = ends or {{i, outcome_class(tstate(m[3]))}}
  local skipped, upstream = 0, 0
  while #stack > 0 do
    local top = table.remove(stack)
    local p, cls = top[1], top[2]
    for _, c in ipairs(split_csv(redis.call('HGET', dk, p .. 'C'))) do
      local rec = redis.call('HGET', wk, c)
      if tstate(rec) == 'waiting' then
        local verdict = hear(wk, dk, c, redis.call('HGET', dk, c .. 'W'), cls)
        if verdict == 'run' then
          -- a rule met by this end (never a map: maps take the default rule)
          local t = tparse(rec)
          local delay = tonumber(redis.call('HGET', dk, c .. 'H') or '0')
          t.s, t.q = 'ready', NOW - ct + delay
          redis.call('HSET', wk, c, tpack(t))
          redis.call('HDEL', wk, c .. 'w')
          move_count('waiting', 'ready')
          if delay > 0 then
            redis.call('ZADD', K_DELAYED, NOW + delay, wid .. ':' .. c)
          elseif queue then
            enqueue(wid, wk, c)
          end
        elseif verdict then
          settle(wid, wk, c, rec, verdict, ct, p)
          if verdict == 'skipped' then
            skipped = skipped + 1
            stack[#stack + 1] = {c, 'k'}
          else
            upstream = upstream + 1
            stack[#stack + 1] = {c, 'f'}
          end
        end
      end
    end
  end
  if skipped > 0 then redis.call('HINCRBY', wk, 'skip', skipped) end
  if upstream > 0 then redis.call('HINCRBY', wk, 'uf', upstream) end
  if skipped + upstream > 0 then redis.call('HINCRBY', wk, 'left', 0 - skipped - upstream) end
  return skipped + upstream
end

-- The result of a finished workflow with failures: 'failed' if some failure is not
-- handled, i.e. no task downstream of it whose rule exists for failures (one_failed,
-- all_failed: the definition's `hf`) succeeded; a finally task's failure (`fy`) does
-- not count. O(tasks + edges), only for a workflow with failures that has such tasks.
local function failed_result(wk)
  local dk = dkey(wk)
  local h = redis.call('HMGET', dk, 'hf', 'fy')
  if not h[1] and not h[2] then return 'failed' end
  local n = tonumber(redis.call('HGET', wk, 'n'))
  local fields = {}
  for i = 0, n - 1 do fields[#fields + 1] = tostring(i) end
  local recs = hmget_all(wk, fields)
  local final = {}
  for _, i in ipairs(split_csv(h[2])) do final[i] = true end
  local open, left = {}, 0
  for i = 0, n - 1 do
    if tstate(recs[i + 1]) == 'failed' and not final[tostring(i)] then
      open[tostring(i)] = true
      left = left + 1
    end
  end
  if left == 0 then return 'succeeded' end
  local stack, seen = {}, {}
  for _, x in ipairs(split_csv(h[1])) do
    if tstate(recs[tonumber(x) + 1]) == 'succeeded' then stack[#stack + 1] = x end
  end
  while #stack > 0 and left > 0 do
    for _, p in ipairs(split_csv(redis.call('HGET', dk, table.remove(stack) .. 'U'))) do
      if not seen[p] then
        seen[p] = true
        if open[p] then
          open[p] = nil
          left = left - 1
        end
        stack[#stack + 1] = p
      end
    end
  end
  if left == 0 then return 'succeeded' end
  return 'failed'
end

-- Flow control at a workflow's start and end: gates (concurrency keys), a schedule's
-- runs, a workflow's own retention. A workflow's gates are its field `g`, JSON
-- [[gate, limit], ...]: it runs only while it holds a slot of each; P:cc counts the
-- running holders per gate, P:cq:<gate> queues the workflows waiting (scored by id:
-- oldest first). Slots are taken all at once or not at all, so a waiting workflow holds
-- none, and every end path (finish_if_done, end_workflow) gives them back.

local function gate_busy(g, limit)
  return tonumber(redis.call('HGET', K_CC, g) or '0') >= tonumber(limit)
end

-- The first of `gates` with no room, or nil.
local function full_gate(gates)
  for _, g in ipairs(gates) do
    if gate_busy(g[1], g[2]) then return g[1] end
  end
  return nil
end

-- Take a slot of each gate and return true, or queue wid at the first full one.
local function admit(wid, gates)
  local full = full_gate(gates)
  if full then
    redis.call('ZADD', k_gate_queue(full), tonumber(wid), wid)
    return false
  end
  for _, g in ipairs(gates) do redis.call('HINCRBY', K_CC, g[1], 1) end
  return true
end

-- Start a workflow held back: `scheduled` (its time came, or it was released) or
-- `queued` (its gates made room and it holds their slots). Its ready tasks go to their
-- queues (or wait out their delay) and its deadline starts. A scheduled workflow with
-- gates takes their slots first, or waits `queued`. Returns how many tasks it queued.
local function start_held(wid, wk, who)
  local m = redis.call('HMGET', wk, 'st', 'n', 'ct', 'g')
  redis.call('ZREM', K_SCHEDULED, wid)
  if m[1] ~= 'scheduled' and m[1] ~= 'queued' then return 0 end
  if m[1] == 'scheduled' then
    redis.call('HDEL', wk, 'at')
    if m[4] and not admit(wid, cjson.decode(m[4])) then
      set_wstate(wid, wk, 'scheduled', 'queued', tonumber(m[3]))
      emit('queued', wid, -1)
      return 0
    end
  end
  set_wstate(wid, wk, m[1], 'running', tonumber(m[3]))
  local dl = redis.call('HGET', wk, 'dl')
  if dl then
    redis.call('ZADD', K_DEADLINES, NOW + tonumber(dl), wid)
    redis.call('HSET', wk, 'due', NOW + tonumber(dl))
  end
  local started = 0
  for i = 0, tonumber(m[2]) - 1 do
    local rec = redis.call('HGET', wk, i)
    if tstate(rec) == 'ready' then
      local delay = tonumber(redis.call('HGET', dkey(wk), i .. 'H') or '0')
      if delay > 0 then
        redis.call('ZADD', K_DELAYED, NOW + delay, wid .. ':' .. i)
        local t = tparse(rec)
        t.q = NOW - tonumber(m[3]) + delay
        redis.call('HSET', wk, i, tpack(t))
      else
        enqueue(wid, wk, tostring(i))
        started = started + 1
      end
    end
  end
  if who then emit('started', wid, -1, {started, who}) else emit('started', wid, -1) end
  return started
end


-- Gate g has a free slot: start the oldest workflow waiting for it, if all its gates
-- have room; one that waits for another full gate moves to that gate's queue.
local function open_gate(g)
  local q = k_gate_queue(g)
  for _ = 1, 100 do
    local head = redis.call('ZRANGE', q, 0, 0)[1]
    if not head then return end
    redis.call('ZREM', q, head)
    local wk = wkey(head)
    local gates = redis.call('HGET', wk, 'g')
    if gates and redis.call('HGET', wk, 'st') == 'queued' then
      gates = cjson.decode(gates)
      local full = full_gate(gates)
      if full == g then  -- no room after all: it stays first
        redis.call('ZADD', q, tonumber(head), head)
        return
      elseif full then
        redis.call('ZADD', k_gate_queue(full), tonumber(head), head)
      else
        for _, x in ipairs(gates) do redis.call('HINCRBY', K_CC, x[1], 1) end
        start_held(head, wk, nil)
        return
      end
    end
  end
end

-- A run of schedule sn ended `final`: the schedule records it, and pauses itself on a
-- failure when it says pause_on_failure (field pof).
local function schedule_run_ended(sn, wid, final)
  local sk = k_schedule(sn)
  local s = redis.call('HMGET', sk, 'pof', 'paused', 'spec')
  if not s[3] then return end  -- the schedule was removed: its runs go on alone
  redis.call('HSET', sk, 'ls', final, 'le', NOW, 'lw', wid)
  if final == 'failed' and s[1] == '1' and s[2] ~= '1' then
    redis.call('HSET', sk, 'paused', '1')
    redis.call('ZREM', K_SDUE, sn)
    emit('schedule.paused', wid, -1, {sn, 'failed'})
    redis.call('PUBLISH', K_SCHEDCHAN, sn)
  end
end

-- A finished workflow's own retention: it goes `ttl` ms from now, or (-1) only when
-- cleaned up by hand: at +inf in P:expire, which housekeeping never reaches and the
-- deployment's sweep steps over. Returns when it goes (ms), or -1.
local function arm_retention(wid, ttl)
  if ttl < 0 then
    redis.call('ZADD', K_EXPIRE, '+inf', wid)
    return -1
  end
  redis.call('ZADD', K_EXPIRE, NOW + ttl, wid)
  return NOW + ttl
end

-- Every end of a workflow (it was `prev`, it is `final`) comes here: its gates' slots go
-- to the next waiting workflows (a queued one only leaves its queue), its schedule hears
-- of it, and its own retention starts.
local function workflow_ended(wid, wk, prev, final)
  local m = redis.call('HMGET', wk, 'g', 'sn', 'tl')
  if m[1] then
    local gates = cjson.decode(m[1])
    if prev == 'queued' then
      for _, g in ipairs(gates) do redis.call('ZREM', k_gate_queue(g[1]), wid) end
    elseif prev ~= 'scheduled' then
      for _, g in ipairs(gates) do
        if redis.call('HINCRBY', K_CC, g[1], -1) <= 0 then redis.call('HDEL', K_CC, g[1]) end
      end
      for _, g in ipairs(gates) do open_gate(g[1]) end
    end
  end
  if m[2] then schedule_run_ended(m[2], wid, final) end
  if m[3] then arm_retention(wid, tonumber(m[3])) end
end

-- Close a workflow whose last unfinished task just ended.
local function finish_if_done(wid, wk)
  local m = redis.call('HMGET', wk, 'st', 'left', 'bad')
  if (m[1] == 'running' or m[1] == 'paused') and tonumber(m[2]) <= 0 then
    -- skipped and upstream_failed tasks never fail a workflow: failures alone do,
    -- unless handled (failed_result)
    local final = 'succeeded'
    if tonumber(m[3] or '0') > 0 then final = failed_result(wk) end
    set_wstate(wid, wk, m[1], final, NOW)
    redis.call('HSET', wk, 'ft', NOW)
    emit(final, wid, -1)
    workflow_ended(wid, wk, m[1], final)
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


-- Map c of workflow wid is ready: its items are to be expanded from its parent's output.
-- The caller (agent) is told at once; housekeeping finds it in K_EXPAND if that caller dies.
local function start_expansion(wid, c)
  redis.call('ZADD', K_EXPAND, NOW, wid .. ':' .. c)
  expansions[#expansions + 1] = wid .. ':' .. c
end

-- Children (`kids`) of a task that just succeeded that are still waiting and have no other
-- parent to wait for become ready, queued unless the workflow is paused; a map among them
-- starts its expansion instead (its W ends in "m": no field more to read per child). A
-- child with several parents (its definition's W) counts its parents' ends in `<c>w`, so
-- each success costs one increment however wide the fan-in. A child with a trigger rule
-- (W ends in "r") reads its rule too (hear), and may be decided not to run: that goes
-- on down the graph (skip_descendants). Reads and writes go in slices, whatever the
-- fan-out.
local function release_children(wid, wk, kids, ct, queue)
  local fields, recs = {}, {}
  local dk = dkey(wk)
  local delays = has_feature(dk, 'H')
  local n = delays and 4 or 3  -- fields read per child: W T R, and H when it may be delayed
  for k, c in ipairs(kids) do
    fields[#fields + 1] = c .. 'W'
    fields[#fields + 1] = c .. 'T'
    fields[#fields + 1] = c .. 'R'
    if delays then fields[#fields + 1] = c .. 'H' end
    recs[k] = c
  end
  local info = hmget_all(dk, fields)
  recs = hmget_all(wk, recs)
  local ready = {}
  local decided = {}  -- {child, class} of children decided not to run
  local at = NOW - ct
  for k, c in ipairs(kids) do
    local rec = recs[k]
    local go = tstate(rec) == 'waiting'
    local w = info[n * k - n + 1]
    local last = w and string.byte(w, -1)
    local is_map = last == 109  -- "<parents>m"
    if go and last == 114 then  -- "<parents>r": a trigger rule
      local verdict = hear(wk, dk, c, w, 's')
      go = verdict == 'run'
      if go then
        redis.call('HDEL', wk, c .. 'w')
      elseif verdict then
        settle(wid, wk, c, rec, verdict, ct, nil)
        decided[#decided + 1] = {c, verdict}
      end
    elseif go then
      if is_map then w = string.sub(w, 1, -2) end
      local need = tonumber(w or '1')
      if need > 1 then
        local v = redis.call('HINCRBY', wk, c .. 'w', 1)
        go = v >= need
        if go then
          if v < RB then
            redis.call('HDEL', wk, c .. 'w')
          else  -- some parent was skipped: every parent has ended, so it is skipped
            go = false
            local s, _, sk = rule_counts(v)
            if s + sk == need then
              settle(wid, wk, c, rec, 'skipped', ct, nil)
              decided[#decided + 1] = {c, 'skipped'}
            end
          end
        end
      end
    end
    if go and is_map then
      -- a map: its items are expanded from the parent's output (expand.lua) first
      local t = tparse(rec)
      t.s, t.q, t.b, t.d = 'running', at, at, ''
      ready[#ready + 1] = c
      ready[#ready + 1] = tpack(t)
      move_count('waiting', 'running')
      start_expansion(wid, c)
    elseif go then
      -- a delay (gush's wait): ready that long from now, held in K_DELAYED till then
      local delay = delays and tonumber(info[4 * k] or '0') or 0
      ready[#ready + 1] = c
      if rec then  -- waiting again after a retry
        local t = tparse(rec)
        t.s, t.q = 'ready', at + delay
        ready[#ready + 1] = tpack(t)
      else
        ready[#ready + 1] = trec('ready', 0, at + delay, '', '', '')
      end
      move_count('waiting', 'ready')
      if delay > 0 then
        redis.call('ZADD', K_DELAYED, NOW + delay, wid .. ':' .. c)
      elseif queue then
        local typ = info[n * k - n + 2] or ''
        redis.call('ZADD', k_queue(typ), queue_score(tonumber(info[n * k - n + 3] or '0'), wid),
          wid .. ':' .. c)
        wake[typ] = true
      end
    end
  end
  write_all('HSET', wk, ready)
  if #decided > 0 then
    local skipped, upstream, ends = 0, 0, {}
    for _, e in ipairs(decided) do
      if e[2] == 'skipped' then
        skipped = skipped + 1
        ends[#ends + 1] = {e[1], 'k'}
      else
        upstream = upstream + 1
        ends[#ends + 1] = {e[1], 'f'}
      end
    end
    if skipped > 0 then redis.call('HINCRBY', wk, 'skip', skipped) end
    if upstream > 0 then redis.call('HINCRBY', wk, 'uf', upstream) end
    redis.call('HINCRBY', wk, 'left', 0 - skipped - upstream)
    skip_descendants(wid, wk, nil, ends)
  end
end


-- Start the next items of map c (elements already expanded), up to its window of items
-- in flight; queued unless `queue` is false (the workflow is paused). Each call does at
-- most a window's work, and each item's end starts one more.
local function materialize(wid, wk, c, queue)
  local f = redis.call('HMGET', wk, c .. 'x', c .. 'y', c .. 'h', 'ct')
  local x, y, h = tonumber(f[1] or '0'), tonumber(f[2] or '0'), tonumber(f[3] or '0')
  local dk = dkey(wk)
  local d = redis.call('HMGET', dk, c .. 'X', c .. 'T', c .. 'R', c .. 'Q')
  local take = math.min(tonumber(d[1] or '1000') - y, h - x)
  if take <= 0 then return 0 end
  local els = redis.call('LPOP', k_pending(wk, c), take)
  take = #els
  local at = NOW - tonumber(f[4])
  -- what each item starts as: {record field suffix, type, score} per task it queues
  local starts = {}
  local record = trec('ready', 0, at, '', '', '')
  if d[4] then
    -- several steps per item: the item is running, its first steps are ready
    for _, st in ipairs(split_csv(d[4])) do
      local sd = redis.call('HMGET', dk, step_def(c, st) .. 'T', step_def(c, st) .. 'R')
      starts[#starts + 1] = {'.' .. st, sd[1] or '', queue_score(tonumber(sd[2] or '0'), wid)}
    end
    record = trec('running', 0, at, at, '', '')
  else
    starts[1] = {'', d[2] or '', queue_score(tonumber(d[3] or '0'), wid)}
  end
  local fields, ks, members = {}, {}, {}
  local ready = trec('ready', 0, at, '', '', '')
  for n = 1, take do
    local k = x + n - 1
    fields[#fields + 1] = k
    fields[#fields + 1] = record
    fields[#fields + 1] = k .. 'p'
    fields[#fields + 1] = els[n]
    ks[#ks + 1] = k
    for _, sp in ipairs(starts) do
      if sp[1] ~= '' then
        fields[#fields + 1] = k .. sp[1]
        fields[#fields + 1] = ready
      end
      local q = members[sp[2]]
      if q == nil then q = {}; members[sp[2]] = q end
      q[#q + 1] = sp[3]
      q[#q + 1] = wid .. ':' .. c .. '.' .. k .. sp[1]
    end
  end
  write_all('HSET', k_items(wk, c), fields)
  write_all('SADD', k_flying(wk, c), ks)
  if queue then
    for typ, q in pairs(members) do
      write_all('ZADD', k_queue(typ), q)
      wake[typ] = true
    end
  end
  redis.call('HSET', wk, c .. 'x', x + take, c .. 'y', y + take)
  count('t:waiting', 0 - take)
  if d[4] then count('t:running', take) else count('t:ready', take) end
  return take
end

-- The members of the JSON object `s` as {key's JSON text, key, value's JSON text}, in
-- order; nil when `s` is not an object. Nothing is decoded but the keys: values keep
-- their text (numbers, empty lists and objects as written).
local function json_members(s)
  local function str_end(i)  -- s[i] is '"': where that string ends
    local j = i + 1
    while true do
      j = string.find(s, '["\\]', j)
      if not j then return nil end
      if string.byte(s, j) == 34 then return j end
      j = j + 2
    end
  end
  local function value_end(i)
    local b = string.byte(s, i)
    if b == 34 then return str_end(i) end
    if b == 123 or b == 91 then
      local depth, j = 0, i
      while j do
        j = string.find(s, '[%[%]{}"]', j)
        if not j then return nil end
        local ch = string.byte(s, j)
        if ch == 34 then
          j = str_end(j)
        elseif ch == 123 or ch == 91 then
          depth = depth + 1
        else
          depth = depth - 1
          if depth == 0 then return j end
        end
        if j then j = j + 1 end
      end
      return nil
    end
    local j = string.find(s, '[,}%]%s]', i)
    return (j or #s + 1) - 1
  end
  local i = string.find(s, '%S')
  if not i or string.byte(s, i) ~= 123 then return nil end
  local out = {}
  i = string.find(s, '%S', i + 1)
  if i and string.byte(s, i) == 125 then return out end
  while i and string.byte(s, i) == 34 do
    local ke = str_end(i)
    if not ke then return nil end
    local raw = string.sub(s, i, ke)
    local colon = string.find(s, '%S', ke + 1)
    if not colon then return nil end
    local v = string.find(s, '%S', colon + 1)
    local ve = v and value_end(v)
    if not ve then return nil end
    out[#out + 1] = {raw, cjson.decode(raw), string.sub(s, v, ve)}
    i = string.find(s, '%S', ve + 1)
    if i and string.byte(s, i) == 125 then return out end
    i = i and string.find(s, '%S', i + 1)
  end
  return nil
end

-- Seed 002's gather (engine/mapping.py, gather_of, is its reference) of the JSON texts
-- `outs`: one object, their values under `elem` listed in order under `key` (none: a
-- plain merge), every other key merged in, the first text's value winning; a text that
-- is not an object adds nothing.
local function seed002_gather(outs, key, elem)
  local listed, merged, seen = {}, {}, {}
  if key then seen[key] = true end
  for n = 1, #outs do
    local members = outs[n] and json_members(outs[n])
    for _, m in ipairs(members or {}) do
      if key and m[2] == elem then
        listed[#listed + 1] = m[3]
      elseif not seen[m[2]] then
        seen[m[2]] = true
        merged[#merged + 1] = m[1] .. ':' .. m[3]
      end
    end
  end
  if key then
    table.insert(merged, 1, cjson.encode(key) .. ':[' .. table.concat(listed, ',') .. ']')
  end
  return '{' .. table.concat(merged, ',') .. '}'
end

-- What an item (or an item's first step) of map c with seed 002's gather is given as its
-- parents: the map's parent's output less the list it maps over, under that parent's
-- name (field <c>j, written once by expand.lua), as seed 002's manager sends its sub-task
-- items the rest of the message. A native map's items are given none.
local function seed002_given(wk, dk, c)
  local rest = redis.call('HGET', wk, c .. 'j')
  if not rest then return '[]', {} end
  local over = string.match(redis.call('HGET', dk, c .. 'm') or '', '^(%d+)|')
  local name = over and redis.call('HGET', dk, over .. 'N') or ''
  return cjson.encode({name}), {rest}
end

-- A map's output: its items' outputs in item order (null for a failed one), inline up to
-- MAP_INLINE items; past that a handle the reader pages (Engine.map_outputs). A map with
-- seed 002's gather (its `J`: the list key) outputs that gather, inline at any size.
local MAP_INLINE = 10000
local function map_output(wid, wk, c, n)
  local dk = dkey(wk)
  local key = has_feature(dk, 'J') and redis.call('HGET', dk, c .. 'J')
  if key then
    local fields = {}
    for k = 0, n - 1 do fields[#fields + 1] = k .. 'o' end
    local elem = key
    if #key > 1 and string.sub(key, -1) == 's' then elem = string.sub(key, 1, -2) end
    return seed002_gather(hmget_all(k_items(wk, c), fields), key, elem)
  end
  if n > MAP_INLINE then
    return cjson.encode({map = tonumber(c), items = n, workflow = tonumber(wid)})
  end
  local fields = {}
  for k = 0, n - 1 do fields[#fields + 1] = k .. 'o' end
  local outs = hmget_all(k_items(wk, c), fields)
  for k = 1, n do outs[k] = outs[k] or 'null' end
  return '[' .. table.concat(outs, ',') .. ']'
end

-- The errors of map c's failed items by index, {"17": "error", ...}, for its gather (the
-- first MAP_INLINE of them in item order; Engine.items(state="failed") pages them all).
local function map_errors(wk, c)
  local ks = redis.call('SMEMBERS', k_failed(wk, c))
  for n = 1, #ks do ks[n] = tonumber(ks[n]) end
  table.sort(ks)
  local fields = {}
  for n = 1, math.min(#ks, MAP_INLINE) do fields[n] = ks[n] .. 'e' end
  local errs = hmget_all(k_items(wk, c), fields)
  local parts = {}
  for n = 1, #fields do
    parts[n] = '"' .. ks[n] .. '":' .. cjson.encode(errs[n] or '')
  end
  return '{' .. table.concat(parts, ',') .. '}'
end

-- How many failed items map c tolerates out of n: its `O` ("5%" or a count; absent 0).
local function tolerated(spec, n)
  if spec == nil or spec == false then return 0 end
  local pct = string.match(spec, '^([%d%.]+)%%$')
  if pct then return math.floor(n * tonumber(pct) / 100) end
  return tonumber(spec) or 0
end

-- Every item of map c has ended: it succeeds (its children are released) unless more
-- items failed than it tolerates. `live`: the workflow is running or paused.
local function map_finished(wid, wk, c, n, bad, live)
  local h, fld = wk, c
  local t = tparse(redis.call('HGET', h, fld))
  local ct = tonumber(redis.call('HGET', wk, 'ct'))
  t.d = NOW - ct
  local dk = dkey(wk)
  if bad <= tolerated(redis.call('HGET', dk, c .. 'O'), n) then
    t.s = 'succeeded'
    redis.call('HSET', wk, c, tpack(t), c .. 'o', map_output(wid, wk, c, n))
    if bad > 0 then redis.call('HSET', wk, c .. 'q', map_errors(wk, c)) end
    move_count('running', 'succeeded')
    redis.call('HINCRBY', wk, 'ok', 1)
    redis.call('HINCRBY', wk, 'left', -1)
    emit('succeeded', wid, c)
    local kids = split_csv(redis.call('HGET', dk, c .. 'C'))
    local st = redis.call('HGET', wk, 'st')
    if #kids > 0 and live then release_children(wid, wk, kids, ct, st == 'running') end
  else
    t.s = 'failed'
    local err = bad .. ' of ' .. n .. ' items failed'
    redis.call('HSET', wk, c, tpack(t), c .. 'e', err)
    move_count('running', 'failed')
    redis.call('HINCRBY', wk, 'bad', 1)
    redis.call('HINCRBY', wk, 'left', -1)
    emit('failed', wid, c, err)
    if live then skip_descendants(wid, wk, c) end
  end
end

-- Item k of map c ended (ok or finally failed): one fewer in flight, the next one starts,
-- and the map ends with its last item. Returns nothing.
-- Items of map c ended: `ok` and `bad` lists of item indexes that succeeded or finally
-- failed. As many in flight fewer, as many more start, and the map ends with its last
-- item. Every item is counted in exactly one place: pending (h - x), in flight (y, the
-- set k_flying), succeeded (k), failed (z, the set k_failed) or cancelled (c).
local function items_ended(wid, wk, c, ok, bad_ks, live, queue)
  local ended = {}
  for _, k in ipairs(ok) do ended[#ended + 1] = k end
  for _, k in ipairs(bad_ks) do ended[#ended + 1] = k end
  write_all('SREM', k_flying(wk, c), ended)
  redis.call('HINCRBY', wk, c .. 'y', 0 - #ended)
  local done = redis.call('HINCRBY', wk, c .. 'k', #ok)
  local bad = redis.call('HINCRBY', wk, c .. 'z', #bad_ks)
  if #bad_ks > 0 then write_all('SADD', k_failed(wk, c), bad_ks) end
  local f = redis.call('HMGET', wk, c, c .. 'n')
  if tstate(f[1]) ~= 'running' then return end  -- the map was cancelled meanwhile
  if live then materialize(wid, wk, c, queue) end
  local n = tonumber(f[2] or '-1')
  if done + bad == n then map_finished(wid, wk, c, n, bad, live) end
end

local function item_ended(wid, wk, c, k, ok, live, queue)
  if ok then
    items_ended(wid, wk, c, {k}, {}, live, queue)
  else
    items_ended(wid, wk, c, {}, {k}, live, queue)
  end
end

-- The ready steps (of `n`) of item k of map c leave the queues, cancelled: its item has
-- ended (failed or cancelled); a step running goes on and starts nothing.
local function cancel_ready_steps(wid, wk, c, k, n)
  local mk = k_items(wk, c)
  for t = 0, n - 1 do
    local sr = redis.call('HGET', mk, k .. '.' .. t)
    if tstate(sr) == 'ready' then
      dequeue(wid, wk, c .. '.' .. k .. '.' .. t)
      local r = tparse(sr)
      r.s = 'cancelled'
      redis.call('HSET', mk, k .. '.' .. t, tpack(r))
    end
  end
end

-- Step s of item k of map c ended: `ok` with its output JSON `value` ("" for none), or
-- finally failed with the error `value`. Its children in the item whose parents have all
-- succeeded become ready (queued if `queue`); the item succeeds with its last steps (its
-- output: its one last step's, or {step name: output} of several) or fails with any
-- step, its steps not started then out of the queues; `ended(ok)` is called then, once.
-- Nothing happens to an item that ended already (failed or cancelled while this step ran).
local function step_ended(wid, wk, c, k, s, ok, value, queue, done_at, ended)
  local mk = k_items(wk, c)
  local rec = redis.call('HGET', mk, k)
  if tstate(rec) ~= 'running' then return end
  local dk = dkey(wk)
  local _, a, q, b = tparts(rec)
  if not ok then
    local name = redis.call('HGET', dk, step_def(c, s) .. 'N') or s
    redis.call('HSET', mk, k, trec('failed', a, q, b, done_at, ''), k .. 'e',
      'step ' .. name .. ': ' .. value)
    cancel_ready_steps(wid, wk, c, k, tonumber(redis.call('HGET', dk, c .. 'S')))
    ended(false)
    return
  end
  local kids = split_csv(redis.call('HGET', dk, step_def(c, s) .. 'C'))
  if #kids == 0 then
    local last = split_csv(redis.call('HGET', dk, c .. 'Z'))
    local out = value
    if #last > 1 then
      if redis.call('HINCRBY', mk, k .. 'd', 1) < #last then return end
      local parts = {}
      if has_feature(dk, 'J') and redis.call('HEXISTS', dk, c .. 'J') == 1 then
        -- seed 002: the item's output is its last steps' outputs merged (the first wins)
        for n, t in ipairs(last) do parts[n] = redis.call('HGET', mk, k .. '.' .. t .. 'o') end
        out = seed002_gather(parts)
      else
        for n, t in ipairs(last) do
          local f = redis.call('HMGET', mk, k .. '.' .. t .. 'o')
          local name = redis.call('HGET', dk, step_def(c, t) .. 'N') or t
          parts[n] = cjson.encode(name) .. ':' .. (f[1] or 'null')
        end
        out = '{' .. table.concat(parts, ',') .. '}'
      end
    end
    local done = trec('succeeded', a, q, b, done_at, '')
    if out ~= '' then
      redis.call('HSET', mk, k, done, k .. 'o', out)
    else
      redis.call('HSET', mk, k, done)
    end
    redis.call('HDEL', mk, k .. 'p', k .. 'e')
    ended(true)
    return
  end
  local at = NOW - tonumber(redis.call('HGET', wk, 'ct'))
  for _, t in ipairs(kids) do
    local sd = step_def(c, t)
    local d = redis.call('HMGET', dk, sd .. 'W', sd .. 'T', sd .. 'R')
    local go = true
    if d[1] then
      go = redis.call('HINCRBY', mk, k .. '.' .. t .. 'w', 1) >= tonumber(d[1])
      if go then redis.call('HDEL', mk, k .. '.' .. t .. 'w') end
    end
    if go then
      local old = redis.call('HGET', mk, k .. '.' .. t)
      local r = trec('ready', 0, at, '', '', '')
      if old then  -- run again after a retry: its fencing token keeps counting
        local pr = tparse(old)
        pr.s, pr.q, pr.d, pr.g = 'ready', at, '', ''
        r = tpack(pr)
      end
      redis.call('HSET', mk, k .. '.' .. t, r)
      if queue then
        redis.call('ZADD', k_queue(d[2] or ''), queue_score(tonumber(d[3] or '0'), wid),
          wid .. ':' .. c .. '.' .. k .. '.' .. t)
        wake[d[2] or ''] = true
      end
    end
  end
end

-- Item k of map c runs again (it had failed): a one-step item is ready; a multi-step
-- item is running again, its failed steps ready, what follows them waiting for them
-- (steps that succeeded keep their outputs; a step still running goes on). Counters and
-- queues follow (queued if `queue`). The caller moves k between the map's sets.
local function rerun_item(wid, wk, c, k, ct, queue)
  local mk = k_items(wk, c)
  local at = NOW - ct
  local n = tonumber(redis.call('HGET', dkey(wk), c .. 'S') or '0')
  local r = tparse(redis.call('HGET', mk, k))
  redis.call('HDEL', mk, k .. 'f', k .. 'e')
  if n == 0 then
    r.s, r.q, r.d = 'ready', at, ''
    redis.call('HSET', mk, k, tpack(r))
    move_count('failed', 'ready')
    if queue then enqueue(wid, wk, c .. '.' .. k) end
    return
  end
  r.s, r.q, r.b, r.d = 'running', at, at, ''
  redis.call('HSET', mk, k, tpack(r))
  move_count('failed', 'running')
  local dk = dkey(wk)
  local done = {}
  for t = 0, n - 1 do done[t] = tstate(redis.call('HGET', mk, k .. '.' .. t)) == 'succeeded' end
  for t = 0, n - 1 do
    local f = k .. '.' .. t
    local sr = redis.call('HGET', mk, f)
    local st = tstate(sr)
    if st ~= 'succeeded' and st ~= 'running' then
      local ups = split_csv(redis.call('HGET', dk, step_def(c, t) .. 'U'))
      local ready = 0
      for _, p in ipairs(ups) do if done[tonumber(p)] then ready = ready + 1 end end
      redis.call('HDEL', mk, f .. 'f', f .. 'e', f .. 'w')
      if ready == #ups then
        local pr = tparse(sr)
        pr.s, pr.q, pr.b, pr.d, pr.g = 'ready', at, '', '', ''
        redis.call('HSET', mk, f, tpack(pr))
        if queue then enqueue(wid, wk, c .. '.' .. f) end
      else
        if sr then
          -- waiting again; its attempts are kept in a record marked waiting
          local pr = tparse(sr)
          pr.s, pr.q, pr.b, pr.d, pr.g = 'waiting', '', '', '', ''
          redis.call('HSET', mk, f, tpack(pr))
        end
        if ready > 0 then redis.call('HSET', mk, f .. 'w', ready) end
      end
    end
  end
  local last = split_csv(redis.call('HGET', dk, c .. 'Z'))
  if #last > 1 then
    local got = 0
    for _, t in ipairs(last) do if done[tonumber(t)] then got = got + 1 end end
    redis.call('HSET', mk, k .. 'd', got)
  end
end

-- Start (or restart) task i for agent: bump the fencing token, record who and when.
-- `f` is the workflow's {st, ct, record of i, d, in} as read (read_for_task below; a hot path:
-- only what it needs of the record is parsed); `agent_json` the agent id JSON-encoded,
-- once per call.
-- Returns the reply row {wid, i, name, type, payload, attempt, parent names JSON,
-- {their outputs}, workflow input JSON or "", and for an item (i = "c.k") its element
-- JSON} (codec.decode_claim_row). An item gets its element, not its map's parents'.
local item_defs = {}  -- an item's definition fields, read once per map and call
local NO_EXTRAS = {}
local plain_defs = {}  -- definition key -> it has no K or Y field (start_task reads fewer)
local function start_task(wid, wk, i, agent, agent_json, f)
  f[5] = read_input(wk, f[5])  -- `in` as read: the input JSON itself from here on
  local ct, rec = tonumber(f[2]), f[3]
  local dk = dkey(wk, f[4])
  local h, fld, di = rec_at(wk, i)
  local d
  local plain = plain_defs[dk]
  if plain == nil then
    plain = not has_feature(dk, 'K') and not has_feature(dk, 'Y')
    plain_defs[dk] = plain
  end
  if h == wk and plain then
    d = redis.call('HMGET', dk, di .. 'N', di .. 'T', di .. 'P', di .. 'U', di .. 'V')
  elseif h == wk then
    d = redis.call('HMGET', dk, di .. 'N', di .. 'T', di .. 'P', di .. 'U', di .. 'V', di .. 'K',
      di .. 'Y')
  else
    d = item_defs[dk .. '|' .. di]
    if d == nil then
      d = redis.call('HMGET', dk, di .. 'N', di .. 'T', di .. 'P', di .. 'U', di .. 'V', di .. 'K',
        di .. 'Y')
      item_defs[dk .. '|' .. di] = d
    end
  end
  local a, q = 0, ''
  if rec then
    a, q = string.match(rec, '^[^|]*|([^|]*)|([^|]*)|')
    a = tonumber(a) or 0
  end
  a = a + 1
  redis.call('HSET', h, fld, trec('running', a, q, NOW - ct, '', agent))
  -- extras of the row, as JSON members: the attempt's timeout (the engine's deadline),
  -- a gather's errors of tolerated items
  local extras = NO_EXTRAS  -- shared and never written: only d[6] / d[7] add to it
  if d[6] or d[7] then extras = {} end
  if d[7] then
    redis.call('ZADD', K_TIMEOUTS, NOW + tonumber(d[7]), wid .. ':' .. i .. ':' .. a)
    extras[1] = '"timeout":' .. d[7]
  end
  if h ~= wk then
    local c, k = item_of(i)
    emit_item('claimed', wid, c, fld, agent_json)
    local item, s = step_key(fld)
    if s == nil then
      local names, given = '[]', {}
      if has_feature(dk, 'J') then names, given = seed002_given(wk, dk, c) end
      local row = {wid, i, d[1], d[2] or '', d[3] or 'null', a, names, given, f[5] or '',
        redis.call('HGET', h, fld .. 'p') or 'null'}
      if #extras > 0 then row[11] = '{' .. table.concat(extras, ',') .. '}' end
      return row
    end
    -- a step: the element of its item, and the outputs of its parents in the item
    local outs, names = {}, d[5] or '[]'
    local ups = split_csv(d[4])
    if #ups > 0 then
      for n, p in ipairs(ups) do ups[n] = item .. '.' .. p .. 'o' end
      outs = redis.call('HMGET', h, unpack(ups))
      for n = 1, #outs do outs[n] = outs[n] or '' end
    elseif has_feature(dk, 'J') then
      names, outs = seed002_given(wk, dk, c)
    end
    local row = {wid, i, d[1], d[2] or '', d[3] or 'null', a, names, outs, f[5] or '',
      redis.call('HGET', h, item .. 'p') or 'null'}
    if #extras > 0 then row[11] = '{' .. table.concat(extras, ',') .. '}' end
    return row
  end
  emit_json('claimed', wid, i, agent_json)
  local row = {wid, tonumber(i), d[1], d[2] or '', d[3] or 'null', a, d[5] or '[]',
    parent_outputs(wk, d[4]), f[5] or ''}
  if d[6] then
    -- the errors of parents it exists for, per parent name: a gather's maps that
    -- tolerated failed items ("<p>m": their errors by index), a failure branch's parents
    -- (their error, null for one that did not fail)
    local errs = {}
    for _, p in ipairs(split_csv(d[6])) do
      local map = string.byte(p, -1) == 109
      if map then p = string.sub(p, 1, -2) end
      local name = redis.call('HGET', dk, p .. 'N') or p
      local e
      if map then
        e = redis.call('HGET', wk, p .. 'q') or '{}'
      else
        e = redis.call('HGET', wk, p .. 'e')
        e = e and cjson.encode(e) or 'null'
      end
      errs[#errs + 1] = cjson.encode(name) .. ':' .. e
    end
    extras[#extras + 1] = '"errors":{' .. table.concat(errs, ',') .. '}'
  end
  if #extras > 0 then
    row[10] = ''
    row[11] = '{' .. table.concat(extras, ',') .. '}'
  end
  return row
end

-- What a step reads of a workflow to start or walk one of its tasks i: {st, ct, record of
-- i, d, in} (an item's record from its map's hash).
-- A claim reads a workflow's fields once for all its items: nothing it does changes them
-- (other steps read them per item, as they may end the workflow on the way).
local item_meta = nil
local function read_for_task(wk, i)
  local c, k = item_of(i)
  if c == nil then return redis.call('HMGET', wk, 'st', 'ct', i, 'd', 'in') end
  local m = item_meta and item_meta[wk]
  if m == nil then
    m = redis.call('HMGET', wk, 'st', 'ct', 'd', 'in')
    if item_meta then item_meta[wk] = m end
  end
  return {m[1], m[2], redis.call('HGET', k_items(wk, c), k), m[3], m[4]}
end

-- Write task i's record (an item's to its map's hash).
local function set_record(wk, i, v)
  local h, fld = rec_at(wk, i)
  redis.call('HSET', h, fld, v)
end

-- A running task (record `t`) whose agent is gone (lost, stopped or restarted) while its
-- workflow was cancelled: it will not run again.
local function drop_cancelled(wk, i, ct, t)
  t.s, t.d = 'cancelled', NOW - ct
  set_record(wk, i, tpack(t))
  if item_of(i) == nil then redis.call('HINCRBY', wk, 'left', -1) end
  move_task(i, 'running', 'cancelled')
end

-- Start workflow wid, scheduled to start later (or now: released early): its ready
-- tasks (its roots) go to their queues. Returns how many.
-- Attempts past their task's timeout (at most `limit`): {wid, i, attempt, agent,
-- timeout ms} each, for the caller to fail as their agent would (complete.lua as that
-- agent: the same retries, skips and counters; the agent's own late result is then
-- rejected by the fencing token). Entries of attempts that ended are dropped here.
local function timed_out(limit)
  local out = {}
  local due = redis.call('ZRANGEBYSCORE', K_TIMEOUTS, '-inf', NOW, 'LIMIT', 0, limit)
  for _, member in ipairs(due) do
    local wid, rest = split_member(member)
    local i, a = string.match(rest, '^(.*):([^:]*)$')
    local wk = wkey(wid)
    local f = read_for_task(wk, i)
    local s, ra, _, _, _, g = tparts(f[3])
    if f[1] and s == 'running' and ra == a then
      local _, _, di = rec_at(wk, i)
      out[#out + 1] = {wid, i, a, g, redis.call('HGET', dkey(wk, f[4]), di .. 'Y') or '0'}
    else
      redis.call('ZREM', K_TIMEOUTS, member)
    end
  end
  return out
end

-- Start the scheduled workflows whose time has come (at most `limit`).
local function start_due(limit)
  local due = redis.call('ZRANGEBYSCORE', K_SCHEDULED, '-inf', NOW, 'LIMIT', 0, limit)
  for _, wid in ipairs(due) do start_held(wid, wkey(wid), nil) end
  return #due
end

-- Move tasks whose retry backoff is over into their queues (held if paused).
local function promote_due(limit)
  local due = redis.call('ZRANGEBYSCORE', K_DELAYED, '-inf', NOW, 'LIMIT', 0, limit)
  for _, member in ipairs(due) do
    redis.call('ZREM', K_DELAYED, member)
    local wid, i = split_member(member)
    local wk = wkey(wid)
    local h, fld = rec_at(wk, i)
    if redis.call('HGET', wk, 'st') == 'running' and tstate(redis.call('HGET', h, fld)) == 'ready' then
      enqueue(wid, wk, i)
    end
  end
  return #due
end


-- The in-flight items of map c (if i is a map that has started any) whose record is in
-- state `st`, as task ids "c.k".
-- For a map whose items run several steps: its steps in state `st`, as "c.k.s".
local function items_in(wk, c, st)
  local out = {}
  local mk = k_items(wk, c)
  local n = tonumber(redis.call('HGET', dkey(wk), c .. 'S') or '0')
  for _, k in ipairs(redis.call('SMEMBERS', k_flying(wk, c))) do
    if n == 0 then
      if tstate(redis.call('HGET', mk, k)) == st then out[#out + 1] = c .. '.' .. k end
    else
      for s = 0, n - 1 do
        if tstate(redis.call('HGET', mk, k .. '.' .. s)) == st then
          out[#out + 1] = c .. '.' .. k .. '.' .. s
        end
      end
    end
  end
  return out
end

-- Take every item of map c out of the counters, queues and agents' sets, and delete its
-- keys (UNLINK: a big map is freed in the background): for cleanup.
local function forget_items(wid, wk, c)
  local f = redis.call('HMGET', wk, c .. 'h', c .. 'x', c .. 'k', c .. 'z', c .. 'c')
  local h, x = tonumber(f[1] or '0'), tonumber(f[2] or '0')
  count('t:waiting', x - h)
  count('t:succeeded', 0 - tonumber(f[3] or '0'))
  count('t:failed', 0 - tonumber(f[4] or '0'))
  count('t:cancelled', 0 - tonumber(f[5] or '0'))
  local mk = k_items(wk, c)
  local flying = redis.call('SMEMBERS', k_flying(wk, c))
  for _, k in ipairs(flying) do count('t:' .. tstate(redis.call('HGET', mk, k)), -1) end
  -- the tasks that may be queued or held by an agent: items in flight, or their steps
  -- (and the steps of failed items, which may still run)
  local tasks = {}
  local n = tonumber(redis.call('HGET', dkey(wk), c .. 'S') or '0')
  if n == 0 then
    for _, k in ipairs(flying) do tasks[#tasks + 1] = k end
  else
    for _, set in ipairs({flying, redis.call('SMEMBERS', k_failed(wk, c))}) do
      for _, k in ipairs(set) do
        for s = 0, n - 1 do tasks[#tasks + 1] = k .. '.' .. s end
      end
    end
  end
  for _, k in ipairs(tasks) do
    local t = tparse(redis.call('HGET', mk, k))
    local i = c .. '.' .. k
    if t.s == 'running' and t.g ~= '' then
      redis.call('SREM', k_running(t.g), wid .. ':' .. i)
    elseif t.s == 'ready' then
      dequeue(wid, wk, i)
    end
  end
  redis.call('ZREM', K_EXPAND, wid .. ':' .. c)
  redis.call('UNLINK', mk, k_pending(wk, c), k_flying(wk, c), k_failed(wk, c))
end

-- Delete every key and index entry of a finished workflow, and its counters. `who` did
-- it (nil: retention). A cancelled workflow can still have running tasks: they leave
-- their agent's set (the agent's late outcome is then rejected, as the hash is gone).
local function remove_workflow(wid, wk, st, who)
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
    if redis.call('HEXISTS', wk, i .. 'h') == 1 then forget_items(wid, wk, i) end
  end
  local o = redis.call('HMGET', wk, 'ik', 'tp')
  if o[1] and redis.call('GET', k_idem(o[1])) == wid then redis.call('DEL', k_idem(o[1])) end
  if o[2] then redis.call('ZREM', k_by_template(o[2]), wid) end
  redis.call('ZREM', K_EXPIRE, wid)
  redis.call('DEL', wk, k_input(wk))
  if redis.call('HINCRBY', dk, 'r', -1) <= 0 then redis.call('DEL', dk) end
  redis.call('ZREM', K_ALL, wid)
  redis.call('ZREM', k_state(st), wid)
  redis.call('ZREM', k_name(m[1]), wid)
  if tonumber(redis.call('ZINCRBY', K_NAMES, -1, m[1])) <= 0 then
    redis.call('ZREM', K_NAMES, m[1])
  end
  count('w:' .. st, -1)
  if who then emit('cleaned', wid, -1, {1, who}) else emit('cleaned', wid, -1) end
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

-- End workflow wid (state `st`, `n` tasks) as `final` ("cancelled" by an operator, or
-- "failed" past its deadline: `why` says so): its tasks not started are cancelled (a
-- map's items not started with them); running tasks finish and their outcome is recorded,
-- but nothing more starts. Returns how many tasks were cancelled.
local function end_workflow(wid, wk, st, n, final, who, why)
  redis.call('ZREM', K_SCHEDULED, wid)
  redis.call('ZREM', K_DEADLINES, wid)
  local m = {st, n}
  local cancelled = 0
  for i = 0, tonumber(m[2]) - 1 do
    local t = tparse(redis.call('HGET', wk, i))
    local s = t.s
    if s == 'waiting' or s == 'ready' then
      if s == 'ready' then dequeue(wid, wk, i) end
      t.s = 'cancelled'
      redis.call('HSET', wk, i, tpack(t))
      redis.call('HDEL', wk, i .. 'w')
      move_count(s, 'cancelled')
      cancelled = cancelled + 1
    elseif s == 'running' and redis.call('HEXISTS', wk, i .. 'h') == 1 then
      -- a map: its items not started are cancelled with it; running ones finish
      local c = tostring(i)
      local mk = k_items(wk, c)
      local gone = 0
      local steps = tonumber(redis.call('HGET', dkey(wk), c .. 'S') or '0')
      if steps > 0 then
        -- items of several steps: each in flight ends cancelled now (a step running goes
        -- on, its outcome recorded, and starts nothing); their ready steps leave the queues
        for _, k in ipairs(redis.call('SMEMBERS', k_flying(wk, c))) do
          cancel_ready_steps(wid, wk, c, k, steps)
          local r = tparse(redis.call('HGET', mk, k))
          r.s = 'cancelled'
          redis.call('HSET', mk, k, tpack(r))
          redis.call('SREM', k_flying(wk, c), k)
          move_count('running', 'cancelled')
          gone = gone + 1
        end
      end
      for _, item in ipairs(items_in(wk, c, 'ready')) do
        dequeue(wid, wk, item)
        local _, k = item_of(item)
        local r = tparse(redis.call('HGET', mk, k))
        r.s = 'cancelled'
        redis.call('HSET', mk, k, tpack(r))
        redis.call('SREM', k_flying(wk, c), k)
        move_count('ready', 'cancelled')
        gone = gone + 1
      end
      local f = redis.call('HMGET', wk, c .. 'h', c .. 'x')
      local pending = tonumber(f[1] or '0') - tonumber(f[2] or '0')
      count('t:waiting', 0 - pending)
      count('t:cancelled', pending)
      redis.call('UNLINK', k_pending(wk, c))
      redis.call('HSET', wk, c .. 'x', f[1] or '0')
      redis.call('HINCRBY', wk, c .. 'c', gone + pending)
      redis.call('HINCRBY', wk, c .. 'y', 0 - gone)
      redis.call('ZREM', K_EXPAND, wid .. ':' .. c)
      t.s = 'cancelled'
      redis.call('HSET', wk, i, tpack(t))
      move_count('running', 'cancelled')
      cancelled = cancelled + 1
    end
  end
  -- 0 - x, not -x: Lua's -0 is sent as "-0", which HINCRBY refuses
  redis.call('HINCRBY', wk, 'left', 0 - cancelled)
  set_wstate(wid, wk, st, final, NOW)
  redis.call('HSET', wk, 'ft', NOW)
  workflow_ended(wid, wk, st, final)
  if why then
    redis.call('HSET', wk, 'why', why)
    emit(final, wid, -1, why)
  else
    emit(final, wid, -1, {cancelled, who})
  end
  return cancelled
end

-- Workflows past their deadline (at most `limit`) end failed, with the reason "deadline".
local function end_late(limit)
  local due = redis.call('ZRANGEBYSCORE', K_DEADLINES, '-inf', NOW, 'LIMIT', 0, limit)
  for _, wid in ipairs(due) do
    local wk = wkey(wid)
    local m = redis.call('HMGET', wk, 'st', 'n')
    if m[1] == 'running' or m[1] == 'paused' then
      end_workflow(wid, wk, m[1], m[2], 'failed', nil, 'deadline')
    else
      redis.call('ZREM', K_DEADLINES, wid)
    end
  end
  return #due
end

-- Create workflows of this shard and queue their root tasks: push.lua's body, also run by
-- the scripts that push on their own (a schedule's tick). `a` is laid out as push.lua's
-- ARGV (see there) from a[4] on; `token` ("" for none) makes the call idempotent.
-- Returns the ids in order: a workflow whose idempotency key already named one is not
-- pushed, and its place holds "=<that id>".
local function push_workflows(a, token)
  if token ~= '' then
    local done = redis.call('GET', k_push_token(token))
    if done then return cjson.decode(done) end
  end
  local who_json = cjson.encode(a[4])
  local shards = tonumber(a[5])
  local shard = tonumber(a[6])
  local later = tonumber(a[7])
  local ndefs = tonumber(a[8])
  local pos = 9
  local st0 = 'running'
  local start_at = NOW
  if later > 0 then
    st0 = 'scheduled'
    start_at = NOW + later
  end
  local defs = {}
  for d = 1, ndefs do
    local digest = a[pos]
    local dk = k_definition(digest)
    local ntasks = tonumber(a[pos + 1])
    local nroots = tonumber(a[pos + 2])
    local roots_at = pos + 3
    pos = roots_at + 3 * nroots
    local ntypes = tonumber(a[pos])
    for t = 1, ntypes do redis.call('SADD', K_TYPES, a[pos + t]) end
    pos = pos + ntypes + 1
    local nstatic = tonumber(a[pos])
    if redis.call('EXISTS', dk) == 0 then
      local static = {}
      for k = pos + 1, pos + 2 * nstatic do static[#static + 1] = a[k] end
      write_all('HSET', dk, static)
    end
    pos = pos + 2 * nstatic + 1
    local ninit = tonumber(a[pos])
    -- The new workflow hash, with slots 2 (name), 4 (state) and 6 (input) filled per
    -- workflow. `in` early and always there (empty: no input): a claim reads it for
    -- every task, and a field that is missing costs a scan of the whole hash
    local fields = {'name', '', 'st', st0, 'in', '', 'ct', NOW, 'd', digest, 'n', ntasks,
      'left', ntasks, 'ok', 0, 'bad', 0, 'skip', 0}
    if st0 == 'scheduled' then
      fields[#fields + 1] = 'at'
      fields[#fields + 1] = start_at
    end
    local deadline = nil  -- ms after its start (init field dl)
    for k = pos + 1, pos + 2 * ninit do
      fields[#fields + 1] = a[k]
      if a[k] == 'dl' and (k - pos) % 2 == 1 then deadline = tonumber(a[k + 1]) end
    end
    pos = pos + 2 * ninit + 1
    local roots = {}
    for r = 0, nroots - 1 do
      local at = roots_at + 3 * r
      local idx, delay = string.match(a[at], '^([^@]*)@?(%d*)$')
      roots[#roots + 1] = {idx, a[at + 1], tonumber(a[at + 2]), tonumber(delay)}
    end
    defs[d] = {key = dk, ntasks = ntasks, roots = roots, fields = fields, uses = 0,
      deadline = deadline}
  end

  local nwf = tonumber(a[pos])
  pos = pos + 1
  -- Ids for the whole call at once: the same numbers nwf INCRBYs would hand out.
  local last = redis.call('INCRBY', K_SEQ, shards * nwf)
  local first = last - shards * (nwf - 1) + shard
  local ids = {}
  local all, by_state, state_order = {}, {}, {}
  local by_name, name_order, name_json = {}, {}, {}
  local by_type = {}
  local deadlines = {}
  local held = {}  -- roots with a delay: into P:delayed
  for k = 0, nwf - 1 do
    local at = pos + 4 * k
    local def = defs[tonumber(a[at])]
    local name = a[at + 1]
    local input = a[at + 2]
    local o = nil
    if a[at + 3] ~= '' then o = cjson.decode(a[at + 3]) end
    local wid = tostring(first + shards * k)
    local existing = nil
    if o and o.key then existing = redis.call('GET', k_idem(o.key)) end
    if existing then
      ids[#ids + 1] = '=' .. existing
    else
      local wk = wkey(wid)
      local st = st0
      if o and o.g and st == 'running' and not admit(wid, o.g) then st = 'queued' end
      local head, pieces, own = input_layout(input, def.ntasks)
      def.uses = def.uses + 1
      def.fields[2] = name
      def.fields[4] = st
      def.fields[6] = head
      write_all('HSET', wk, def.fields)
      if pieces then redis.call('HSET', wk, unpack(pieces)) end
      if own then redis.call('APPEND', k_input(wk), own) end  -- a new key: APPEND sets it
      if o then  -- its options' fields in one write
        local extra = {}
        if o.g then extra[#extra + 1] = 'g'; extra[#extra + 1] = cjson.encode(o.g) end
        if o.key then
          extra[#extra + 1] = 'ik'; extra[#extra + 1] = o.key
          redis.call('APPEND', k_idem(o.key), wid)
        end
        if o.tp then
          extra[#extra + 1] = 'tp'; extra[#extra + 1] = o.tp
          extra[#extra + 1] = 'tv'; extra[#extra + 1] = o.tv
          redis.call('ZADD', k_by_template(o.tp), tonumber(wid), wid)
          redis.call('HINCRBY', K_TRUNS, o.tp, 1)
        end
        if o.sn then
          extra[#extra + 1] = 'sn'; extra[#extra + 1] = o.sn
          extra[#extra + 1] = 'tk'; extra[#extra + 1] = o.tk
        end
        if #extra > 0 then redis.call('HSET', wk, unpack(extra)) end
      end
      all[#all + 1] = wid
      all[#all + 1] = wid
      local ws = by_state[st]
      if ws == nil then
        ws = {}
        by_state[st] = ws
        state_order[#state_order + 1] = st
      end
      ws[#ws + 1] = NOW
      ws[#ws + 1] = wid
      local same = by_name[name]
      if same == nil then
        same = {}
        by_name[name] = same
        name_order[#name_order + 1] = name
        name_json[name] = '[' .. cjson.encode(name) .. ',' .. who_json .. ']'
      end
      same[#same + 1] = wid
      same[#same + 1] = wid
      if st == 'running' then
        for _, root in ipairs(def.roots) do
          if root[4] then
            held[#held + 1] = NOW + root[4]
            held[#held + 1] = wid .. ':' .. root[1]
          else
            local q = by_type[root[2]]
            if q == nil then
              q = {}
              by_type[root[2]] = q
            end
            q[#q + 1] = queue_score(root[3], wid)
            q[#q + 1] = wid .. ':' .. root[1]
          end
        end
        if def.deadline then  -- a held one's counts from its start
          deadlines[#deadlines + 1] = NOW + def.deadline
          deadlines[#deadlines + 1] = wid
          redis.call('HSET', wk, 'due', NOW + def.deadline)
        end
      end
      emit_json('pushed', wid, -1, name_json[name])
      if st == 'queued' then emit('queued', wid, -1) end
      ids[#ids + 1] = wid
    end
  end
  local pushed = #all / 2
  if pushed > 0 then write_all('ZADD', K_ALL, all) end
  for _, st in ipairs(state_order) do
    local ws = by_state[st]
    write_all('ZADD', k_state(st), ws)
    count('w:' .. st, #ws / 2)
  end
  if st0 == 'scheduled' and by_state.scheduled then
    local due = {}
    for k = 2, #by_state.scheduled, 2 do
      due[#due + 1] = start_at
      due[#due + 1] = by_state.scheduled[k]
    end
    write_all('ZADD', K_SCHEDULED, due)
  end
  for _, name in ipairs(name_order) do
    local same = by_name[name]
    write_all('ZADD', k_name(name), same)
    redis.call('ZINCRBY', K_NAMES, math.floor(#same / 2), name)
  end
  write_all('ZADD', K_DEADLINES, deadlines)
  write_all('ZADD', K_DELAYED, held)
  for typ, q in pairs(by_type) do
    write_all('ZADD', k_queue(typ), q)
    wake[typ] = true
  end
  for _, def in ipairs(defs) do
    if def.uses > 0 then
      redis.call('HINCRBY', def.key, 'r', def.uses)
      local nroots = #def.roots
      count('t:ready', nroots * def.uses)
      count('t:waiting', (def.ntasks - nroots) * def.uses)
      count('t:pushed', def.ntasks * def.uses)
    end
  end
  count('w:pushed', pushed)
  if token ~= '' then
    -- long enough for any client's retries, short enough to cost nothing. SETEX, not SET:
    -- Redis 7.0's acl_check_cmd('SET') (the permission guard) crashes the server.
    redis.call('SETEX', k_push_token(token), 600, cjson.encode(ids))
  end
  return ids
end

-- Walk the tasks recorded as the agent's own (its running set): visit(member, wid, i,
-- wk, f, t) for each, f = the workflow's {st, ct, record, d, in}, t = the parsed record.
local function each_held(agent, visit)
  for _, member in ipairs(redis.call('SMEMBERS', k_running(agent))) do
    local wid, i = split_member(member)
    local wk = wkey(wid)
    local f = read_for_task(wk, i)
    if f[1] then
      visit(member, wid, i, wk, f, tparse(f[3]))
    else  -- its workflow is gone (cleaned up): nothing to record
      redis.call('SREM', k_running(agent), member)
    end
  end
end

-- A schedule's event: ["schedule.<kind>", wid (its run, or 0), -1, {"schedule": name, ...}];
-- `more` is the rest of that object as JSON (',"tick":123'), or ''.
local function schedule_event(kind, wid, name, more)
  events[#events + 1] = '["schedule.' .. kind .. '",' .. (wid or 0) .. ',-1,{"schedule":'
    .. cjson.encode(name) .. more .. '}]'
end

-- Apply counters, write the coalesced event batch, and send wake-ups. Call once, last.
local function flush()
  for field, delta in pairs(counters) do
    if delta ~= 0 then redis.call('HINCRBY', K_STATS, field, delta) end
  end
  if grouped then
    for n, e in ipairs(events) do
      if type(e) == 'table' then events[n] = e.pre .. table.concat(e.ks, ',') .. e.post end
    end
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
