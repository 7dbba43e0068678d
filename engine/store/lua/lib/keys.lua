-- lib/keys.lua: Fields and keys: the shard's key names, a task's address (item, step, record field).

-- Conventions for every script:
--   KEYS[1]  a key of the shard (routes the call in a cluster)
--   ARGV[1]  the shard prefix, "ns:{ns:S}"; ARGV[2] the event stream's approximate cap
--   Script-specific arguments start at ARGV[3].
-- Every script validates before its first write; errors are returned as
-- "RFSTATE ..." (operation not allowed in this state) or "RFNOTFOUND ..." replies.
--
-- Field names are declared in engine/store/codec/fields.py only, and the Lua says every
-- field of a workflow, definition or map hash by its name there: F_* a workflow's own
-- fields, T_* a task's suffix fields (its record's field plus the suffix: `i .. T_OUTPUT`,
-- an item's or a step's in its map's hash), D_* a definition's (per task, `di .. D_NAME`;
-- or its own, D_BACKOFF...; also the feature letters of has_feature), M_* a map's runtime
-- fields in the workflow hash (`c .. M_TOTAL`), I_* an item's in its map's hash. When a
-- script is built each name is written as its value (F_LEFT as 'left'; scripts.py,
-- with_fields). The values, and what they hold:
-- Workflow hash fields (P:w:<wid>):
--   name st d n left ok bad skip ct fd       name (absent: its definition's), state,
--                                            definition digest, task count,
--                                            tasks not terminal (absent: 0), succeeded,
--                                            failed, skipped, created (epoch ms),
--                                            finished (ms after ct; an earlier
--                                            release's run: ft, epoch ms)
--   uf                                       upstream_failed (absent until the first)
--   in (in1 in2 ...)                         the input JSON or how it is kept (input_layout)
--   <i>                                      task i's record (see tparse): state,
--                                            attempts started (the fencing token),
--                                            ready/begin/done times as ms after ct,
--                                            agent; absent: waiting, never started
--   <i>f <i>l <i>o <i>e                      failures, leases lost, output JSON, error
--   <i>v <i>a <i>u                           why it was skipped, what ended a wait task,
--                                            a run: task's child run
--   <i>w                                     its parents' ends so far, for a waiting task:
--                                            s + RB * k + RB2 * f (succeeded, skipped,
--                                            failed or upstream_failed; absent: none).
--                                            The default rule keeps none for one parent
--                                            and never counts f (a failure decides it)
--   <c>h <c>n <c>x <c>y <c>k <c>z <c>c       map c: elements stored, items in all (once
--                                            expanded), started, in flight, succeeded,
--                                            failed, cancelled
--   <c>q <c>j                                its failed items' errors (tolerated), what its
--                                            items are given (the steps manager's gather)
-- A map's hash (P:w:<wid>:m:<c>): per item k its record k, then k .. T_* as a task's,
-- kp its element, kd its sinks succeeded; per step s of item k the same as "k.s".
-- Definition hash fields (P:d:<digest>, shared by every workflow with the same tasks;
-- never changed once written. Every script reaches it through the workflow's `d` field
-- (dkey below), so a workflow that must change its tasks at run time, e.g. a fan-out
-- adding one task per item, can point `d` at a private copy it owns and change that):
--   r bk bm                                  workflows using it, retry backoff base ms,
--                                            longest retry delay ms
--   hf fy                                    tasks that handle failures (one_failed,
--                                            all_failed), finally tasks: index csvs
--   name                                     its first run's name: its runs' unless they
--                                            have one of their own (set with that run)
--   <i>N <i>T <i>P <i>R <i>M <i>C <i>U <i>V  task i: name, type, payload JSON, priority,
--                                            max attempts, children csv, parents csv,
--                                            parents' names as a JSON array
--   <i>W                                     how many parents, when more than one,
--                                            "<n>m" for a map, "<n>r" for a task with a
--                                            trigger rule (absent: 1, all_success)
--   <i>G                                     that rule (engine/core/rules.py; "finally" is
--                                            all_done outside the workflow's result)
--   <i>Y                                     timeout of an attempt, ms (absent: none)
--   <i>H                                     delay, ms: ready that long after its rule is
--                                            met (absent: none)
--   <i>J                                     a map with the steps manager's gather: its list key
--                                            (manager_gather); its workflow field <i>j:
--                                            what its items are given (manager_given)
--   <i>L                                     its rate limit: "<interval us>|<burst>|<key>",
--                                            key "=<constant>" or "@" (the run's field
--                                            rk: JSON {i: key}); lib/rate_limits.lua
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
local K_AGENTS_DRAIN = P .. ':agents:drain'
local K_EVENTS = P .. ':events'
local K_EVCHAN = P .. ':ev'
local K_EXPAND = P .. ':expand'
local K_SNAMES = P .. ':snames'
local K_CC = P .. ':cc'
local K_EXPIRE = P .. ':expire'
local K_TIMERS = P .. ':timers'
local K_SPAWN = P .. ':spawn'
local K_CHILD_ENDS = P .. ':cends'
local K_ORPHANS = P .. ':orphans'
local K_SWEEP = P .. ':sweep'
local K_HK = P .. ':hk'
local K_LCLK = P .. ':lclk'
local K_TRUNS = P .. ':truns'
local K_SDUE = P .. ':sdue'
local K_SCHEDCHAN = P .. ':sched'
-- A table whose t[k] is build(k), built the first time k is read and kept for the rest of
-- the call (as NUM, OFFSET and CHILDREN are): what a call works out once per key and
-- reads again per task. build must not return nil.
local function cached(build)
  return setmetatable({}, {__index = function(t, k)
    local v = build(k)
    t[k] = v
    return v
  end})
end
-- A workflow's hash key, built once per call (a fan-out's tasks share it). The tables of
-- this file's lookups are their functions' own, not locals of the script: a script may
-- have 200 locals, and the larger ones are near that.
local wkey = (function()
  local keys = cached(function(wid) return P .. ':w:' .. wid end)
  return function(wid) return keys[wid] end
end)()
local function k_definition(digest) return P .. ':d:' .. digest end
local k_queue = (function()
  local keys = cached(function(typ) return P .. ':q:' .. typ end)
  return function(typ) return keys[typ] end
end)()
local function k_wake(typ) return P .. ':wake:' .. typ end
local function k_state(st) return P .. ':ws:' .. st end
local function k_name(name) return P .. ':wn:' .. name end
local function k_running(agent) return P .. ':run:' .. agent end
local function k_push_token(token) return P .. ':pt:' .. token end
-- A map c's keys beside its workflow hash wk: its items' fields (m), the elements not yet
-- started (l, a list), the items in flight (f, a set), the items that failed (x, a set).
-- wk -> c -> its map's hash key, built once per call
local k_items = (function()
  local keys = cached(function(wk) return cached(function(c) return wk .. ':m:' .. c end) end)
  return function(wk, c) return keys[wk][c] end
end)()
local function k_pending(wk, c) return wk .. ':l:' .. c end
local function k_flying(wk, c) return wk .. ':f:' .. c end
local function k_failed(wk, c) return wk .. ':x:' .. c end
-- A workflow input too long to keep in pieces in its hash (see input_layout), a string.
local function k_input(wk) return wk .. ':in' end
local function k_signals(wk) return wk .. ':sig' end
-- Signals `name` kept for a wait not reached yet (a list: lib/wait_tasks.lua's mailbox).
local function k_mailbox(wk, name) return wk .. ':sq:' .. name end
local function k_children(wk) return wk .. ':ch' end
-- A root run's child runs, all levels (a set of the parent tasks that started one).
local function k_descendants(wk) return wk .. ':dc' end
-- A workflow's task logs (a stream) and its tasks' progress (a hash), removed with it;
-- the shard's log budget (bytes, dropped); history buckets per minute and per hour.
local function k_logs(wk) return wk .. ':log' end
local function k_progress(wk) return wk .. ':p' end
local K_LOGS = P .. ':logs'
local function k_hist_minute(m) return P .. ':hm:' .. m end
local function k_hist_hour(h) return P .. ':hh:' .. h end
local K_HTOT = P .. ':htot'
-- A schedule's fired ticks (a zset, the dedup of one run per tick; its hash is
-- k_schedule: spec v nt nx lt cur paused pof ls le runs skipped missed buffered).
local function k_sticks(name) return P .. ':stk:' .. name end
local function k_gate_queue(g) return P .. ':cq:' .. g end
local function k_idem(key) return P .. ':ik:' .. key end
local function k_by_template(tp) return P .. ':wt:' .. tp end
local function k_schedule(sn) return P .. ':s:' .. sn end
-- A rate-limit bucket's ready tasks (zset) and its state (hash); bucket `b` is
-- "<#type>:<type>:<key>" (lib/rate_limits.lua).
local function k_rate_queue(b) return P .. ':rq:' .. b end
local function k_bucket(b) return P .. ':rb:' .. b end

-- Item k of map c runs as the virtual task "c.k": its fields live in the map's own hash,
-- named by k (record), k .. T_OUTPUT / T_ERROR / T_FAILURES / T_LOST / I_ELEMENT (output,
-- error, failures, leases lost, element). item_of("c.k") is c, k; nil for a plain task.
local item_of = (function()
  local ITEM_C, ITEM_K = {}, {}  -- i -> c (false: not an item) and k, once per call
  return function(i)
    local c = ITEM_C[i]
    if c then return c, ITEM_K[i] end
    if c == false then return nil end
    local d = string.find(i, '.', 1, true)
    if d == nil then
      ITEM_C[i] = false
      return nil
    end
    local k
    c, k = string.sub(i, 1, d - 1), string.sub(i, d + 1)
    ITEM_C[i], ITEM_K[i] = c, k
    return c, k
  end
end)()

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
