-- lib/claim_row.lua: Starting a task: the claim reply row.

-- Start (or restart) task i for agent: bump the fencing token, record who and when.
-- `m` is the workflow's {st, ct, d, in} and `rec` the record of i, as read (workflow_for
-- below); `a` and `q`, when given, the record's attempts and ready as the caller parsed
-- them (a hot path: the record is parsed once); `agent_json` the agent id JSON-encoded,
-- once per call; `not_item`: i is a plain task's index, as the caller found.
-- Appends the task's row to the flat reply `out` (put_row). An item gets its element,
-- not its map's parents' outputs. `member`: "<wid>:<i>", as the caller has it.
local item_defs = {}  -- a task's definition fields, read once per definition, index and call
local NO_EXTRAS = {}
local plain_defs = {}  -- definition key -> it has no K or Y field (start_task reads fewer)
local own_payloads = {}  -- definition key -> some run keeps payloads of its own
-- The parents' outputs of a task (parent_outputs), read once per workflow and parents in a
-- claim (nothing a claim does changes an output): a fan-out's tasks share their parent's.
-- OUTPUTS[wk][parents csv] are those outputs.
local OUTPUTS = setmetatable({}, {__index = function(t, wk)
  local of = setmetatable({}, {__index = function(o, csv)
    local outs = parent_outputs(wk, csv)
    o[csv] = outs
    return outs
  end})
  t[wk] = of
  return of
end})

-- A task's claim row, appended to the flat reply `out` (codec.decode_claim_rows): its
-- header, "<wid>\0<index>\0<name>\0<type>\0<attempt>\0<parent names JSON>\0<extras JSON
-- or "">" (none of them holds a NUL: names exclude control characters, and JSON has
-- none), then its payload JSON, the workflow input JSON or "", how long it waited ready
-- (ms), how many parents' outputs follow and them, and for an item its element JSON.
-- One string for the small fields: the reply costs Redis per member, and a table per row
-- more (a row as a table of a dozen members was a fifth of a claim's cost).
local NO_OUTPUTS = {}
local function put_row(out, wid, i, d, a, names, extras, payload, input, waited, outs, element)
  local n = #out
  local x = ''
  if #extras > 0 then x = '{' .. table.concat(extras, ',') .. '}' end
  out[n + 1] = wid .. '\0' .. i .. '\0' .. (d[1] or '') .. '\0' .. (d[2] or '') .. '\0' .. a
    .. '\0' .. names .. '\0' .. x
  out[n + 2] = payload
  out[n + 3] = input
  out[n + 4] = waited
  local k = #outs
  out[n + 5] = k
  for j = 1, k do out[n + 5 + j] = outs[j] end
  if element then out[n + 6 + k] = element end
end

-- A task's record `rec` ready (nil: none), its attempts and ready as parsed (a nil: not
-- parsed yet), started now (`o`: OFFSET of its workflow) by agent: its attempt, how long
-- it waited ready (ms; the agent's queue-wait history: the row's last member) and its
-- running record (begin compact: after ready). Worked out once per record text and time:
-- tasks ready with one record and claimed together share them.
local started_as = {}  -- a record -> {since, attempt, waited, running record}
local function start_record(rec, a, q, o, agent)
  local since = o[1]
  local started = rec and started_as[rec]
  if started and started[1] == since then return started[2], started[3], started[4] end
  if a == nil then
    a, q = '0', ''
    if rec then a, q = string.match(rec, '^[^|]*|([^|]*)|([^|]*)|') end
  end
  a = NEXT_ATTEMPT[a]
  local begin, waited = o[2], 0
  if q ~= '' then
    waited = since - NUMOF[q]
    begin = NUM[waited]
    if waited < 0 then waited = 0 end
  end
  local running = 'R|' .. a .. '|' .. q .. '|' .. begin .. '||' .. agent
  if rec then started_as[rec] = {since, a, waited, running} end
  return a, waited, running
end

local function start_task(wid, wk, i, agent, agent_json, m, rec, not_item, a, q, out, member)
  local input = read_input(wk, m[4])  -- the JSON itself: `in` may say where it is
  local o = OFFSET[m[2]]
  local dk = dkey(wk, m[3])
  local h, fld, di = wk, i, i
  if not not_item then h, fld, di = rec_at(wk, i) end
  local d
  local plain = plain_defs[dk]
  if plain == nil then
    plain = not has_feature(dk, D_GATHERS) and not has_feature(dk, D_TIMEOUT)
      and not has_feature(dk, D_WHEN)
    plain_defs[dk] = plain
    own_payloads[dk] = redis.call('HGET', dk, D_OWN_PAYLOADS) ~= false
  end
  -- a definition never changes under a claim: its fields are read once per task index
  local defs = item_defs[dk]
  if defs == nil then
    defs = {}
    item_defs[dk] = defs
  end
  d = defs[di]
  if d == nil then
    local fields = {di .. D_NAME, di .. D_TYPE, di .. D_PAYLOAD, di .. D_PARENTS,
      di .. D_PARENT_NAMES}
    if h ~= wk or not plain then  -- d[6], d[7]: gathers, timeout; d[8]: a plain task's when
      fields[6], fields[7] = di .. D_GATHERS, di .. D_TIMEOUT
      if h == wk then fields[8] = di .. D_WHEN end
    end
    d = redis.call('HMGET', dk, unpack(fields))
    defs[di] = d
  end
  local waited, running
  a, waited, running = start_record(rec, a, q, o, agent)
  redis.call('HSET', h, fld, running)
  -- extras of the row, as JSON members: the attempt's timeout (the engine's deadline),
  -- a gather's errors of tolerated items
  local extras = NO_EXTRAS  -- shared and never written: only d[6] / d[7] add to it
  if d[6] or d[7] or d[8] then extras = {} end
  if d[7] then
    redis.call('ZADD', K_TIMEOUTS, NOW + tonumber(d[7]), wid .. ':' .. i .. ':' .. a)
    extras[1] = '"timeout":' .. d[7]
  end
  if h ~= wk then
    local c, k = item_of(i)
    emit_item('claimed', wid, c, fld, agent_json)
    local item, s = step_key(fld)
    if s == nil then
      local names, given = '[]', NO_OUTPUTS
      if has_feature(dk, D_GATHER) then names, given = manager_given(wk, dk, c) end
      put_row(out, wid, i, d, a, names, extras, d[3] or 'null', input, waited, given,
        redis.call('HGET', h, fld .. I_ELEMENT) or 'null')
      return
    end
    -- a step: the element of its item, and the outputs of its parents in the item
    local outs, names = NO_OUTPUTS, d[5] or '[]'
    local ups = split_csv(d[4])
    if #ups > 0 then
      for n, p in ipairs(ups) do ups[n] = item .. '.' .. p .. T_OUTPUT end
      outs = redis.call('HMGET', h, unpack(ups))
      for n = 1, #outs do outs[n] = outs[n] or '' end
    elseif has_feature(dk, D_GATHER) then
      names, outs = manager_given(wk, dk, c)
    end
    put_row(out, wid, i, d, a, names, extras, d[3] or 'null', input, waited, outs,
      redis.call('HGET', h, item .. I_ELEMENT) or 'null')
    return
  end
  emit_tasks('claimed', member, agent_json)
  local payload = d[3]
  if payload and own_payloads[dk] then  -- the run's own, if it has one
    payload = redis.call('HGET', wk, i .. D_PAYLOAD) or payload
  end
  if d[6] then
    -- the errors of parents it exists for, per parent name: a gather's maps that
    -- tolerated failed items ("<p>m": their errors by index), a failure branch's parents
    -- (their error, null for one that did not fail)
    local errs = {}
    for _, p in ipairs(split_csv(d[6])) do
      local map = string.byte(p, -1) == 109
      if map then p = string.sub(p, 1, -2) end
      local name = redis.call('HGET', dk, p .. D_NAME) or p
      local e
      if map then
        e = redis.call('HGET', wk, p .. M_ERRORS) or '{}'
      else
        e = redis.call('HGET', wk, p .. T_ERROR)
        e = e and cjson.encode(e) or 'null'
      end
      errs[#errs + 1] = cjson.encode(name) .. ':' .. e
    end
    extras[#extras + 1] = '"errors":{' .. table.concat(errs, ',') .. '}'
  end
  if d[8] then when_extras(wk, d[8], d[4], extras) end
  put_row(out, wid, i, d, a, d[5] or '[]', extras, payload or 'null', input, waited,
    d[4] and OUTPUTS[wk][d[4]] or NO_OUTPUTS)
end

-- What a step reads of a workflow to start or walk one of its tasks i: {st, ct, d, in},
-- and the record of i (an item's from its map's hash), two values: no table per task.
-- `plain`: the caller knows i is a plain task's index (no "."; a hot path: one
-- string.find less).
-- A claim or a completion reads a workflow's fields once for all its tasks (item_meta:
-- they share the first one's table): nothing they do changes them before their last step
-- (other steps read them per task, as they may end the workflow on the way).
local item_meta = nil
-- workflow_for's {st, ct, d, in} alone (kept in item_meta as workflow_for keeps it).
local function workflow_meta(wk)
  local m = item_meta and item_meta[wk]
  if m == nil then
    m = redis.call('HMGET', wk, F_STATE, F_CREATED, F_DIGEST, F_INPUT)
    if item_meta then item_meta[wk] = m end
  end
  return m
end
local function workflow_for(wk, i, plain)
  local c, k = nil, nil
  if not plain then c, k = item_of(i) end
  if c ~= nil then return workflow_meta(wk), redis.call('HGET', k_items(wk, c), k) end
  local m = item_meta and item_meta[wk]
  if m == nil then  -- the record in the same read
    local got = redis.call('HMGET', wk, F_STATE, F_CREATED, i, F_DIGEST, F_INPUT)
    m = {got[1], got[2], got[4], got[5]}
    if item_meta then item_meta[wk] = m end
    return m, got[3]
  end
  return m, redis.call('HGET', wk, i)
end

-- A ready record -> {its state, attempts, ready}: parsed once per text and call (a
-- fan-out's siblings, a map's items started together and runs pushed together are ready
-- with the same record).
local ready_parts = cached(function(rec)
  return {string.match(rec, '^([^|]*)|([^|]*)|([^|]*)|')}
end)

-- What the items of one map in a claim share (start_item), per "<wid>:<c>"; false: its
-- items go through start_task (a map whose items have steps, a timeout, or the steps manager's
-- gather).
local item_claims = {}
local function item_claim(prefix)
  local wid, c = string.match(prefix, '^(%d+):(%d+)$')
  local wk = wkey(wid)
  local m = workflow_meta(wk)
  if not m[3] then return false end
  local dk = dkey(wk, m[3])
  if has_feature(dk, D_GATHER) then return false end
  local d = redis.call('HMGET', dk, c .. D_NAME, c .. D_TYPE, c .. D_PAYLOAD, c .. D_TIMEOUT,
    c .. D_STEPS)
  if d[4] or d[5] then return false end
  return {wid = wid, c = c, mk = k_items(wk, c), live = m[1] == 'running', o = OFFSET[m[2]],
    input = read_input(wk, m[4]), payload = d[3] or 'null', head = wid .. '\0' .. c .. '.',
    mid = '\0' .. (d[1] or '') .. '\0' .. (d[2] or '') .. '\0'}
end

-- Items of one-step maps a claim takes, started after its other tasks (start_items) with
-- what the items of one map share worked out once per claim: a claim of a big map's items
-- is mostly this. start_item takes item "<c>.<k>" of `member` ("<wid>:<c>.<k>") for that:
-- true (taken; not started if its run is not running), or nil when start_task is the one
-- to start it (a step, or a map item_claim leaves to it).
local item_batches = {}  -- item_claim's tables with items taken, in order
local function start_item(member)
  local dot = string.find(member, '.', 1, true)
  local prefix = string.sub(member, 1, dot - 1)
  local x = item_claims[prefix]
  if x == false then return nil end
  local k = string.sub(member, dot + 1)
  if string.find(k, '.', 1, true) then return nil end
  if x == nil then
    x = item_claim(prefix)
    item_claims[prefix] = x
    if not x then return nil end
  end
  if not x.live then return true end  -- its run is not running: nothing starts
  local ks = x.ks
  if ks == nil then
    ks = {}
    x.ks, x.members = ks, {}
    item_batches[#item_batches + 1] = x
  end
  ks[#ks + 1] = k
  x.members[#x.members + 1] = member
  return true
end

-- Start the items start_item took, as start_task does (those not ready are not
-- started): per map one HMGET of their records and elements and one HSET of the running
-- records; their rows appended to `out`, their members to `started`. Returns how many
-- started.
local function start_items(agent, agent_json, out, started)
  local n = 0
  for _, x in ipairs(item_batches) do
    local ks, members = x.ks, x.members
    local fields = {}
    for j = 1, #ks do
      local k = ks[j]
      fields[2 * j - 1] = k
      fields[2 * j] = k .. I_ELEMENT
    end
    local got = hmget_all(x.mk, fields)
    local writes = {}
    local head, mid, payload, input, o = x.head, x.mid, x.payload, x.input, x.o
    for j = 1, #ks do
      local rec = got[2 * j - 1]
      if rec then
        local p = ready_parts[rec]
        if WORD[p[1]] == 'ready' then
          local k = ks[j]
          local a, waited, running = start_record(rec, p[2], p[3], o, agent)
          writes[#writes + 1] = k
          writes[#writes + 1] = running
          emit_item('claimed', x.wid, x.c, k, agent_json)
          local r = #out
          out[r + 1] = head .. k .. mid .. a .. '\0[]\0'
          out[r + 2] = payload
          out[r + 3] = input
          out[r + 4] = waited
          out[r + 5] = 0
          out[r + 6] = got[2 * j] or 'null'
          started[#started + 1] = members[j]
          n = n + 1
        end
      end
    end
    write_all('HSET', x.mk, writes)
  end
  return n
end

-- workflow_for's read as one table: {st, ct, record of i, d, in}.
local function read_for_task(wk, i, plain)
  local m, rec = workflow_for(wk, i, plain)
  return {m[1], m[2], rec, m[3], m[4]}
end
