-- lib/push.lua: Creating workflows (push.lua's body).

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
  local stored = {}  -- definition key -> its payloads as stored, by field (read once)
  local now_s = tostring(NOW)  -- numbers formatted once per call, not per workflow
  for d = 1, ndefs do
    local digest = a[pos]
    local dk = k_definition(digest)
    local ntasks_s = a[pos + 1]
    local ntasks = tonumber(ntasks_s)
    local nroots = tonumber(a[pos + 2])
    local roots_at = pos + 3
    pos = roots_at + 3 * nroots
    local ntypes = tonumber(a[pos])
    for t = 1, ntypes do redis.call('SADD', K_TYPES, a[pos + t]) end
    pos = pos + ntypes + 1
    local nstatic = tonumber(a[pos])  -- -1: they come packed, one JSON array of strings
    local new = redis.call('EXISTS', dk) == 0
    -- the name of its runs that have none of their own: its first run's (nil: not yet;
    -- false: a definition of an earlier release, whose runs all keep theirs)
    local named = nil
    if not new then named = redis.call('HGET', dk, D_RUN_NAME) end
    if new then
      local static = {}
      if nstatic < 0 then
        static = cjson.decode(a[pos + 1])
      else
        for k = pos + 1, pos + 2 * nstatic do static[#static + 1] = a[k] end
      end
      write_all('HSET', dk, static)
    end
    if nstatic < 0 then pos = pos + 2 else pos = pos + 2 * nstatic + 1 end
    -- The payloads: stored with a new definition; else those that differ from the stored
    -- ones go in each workflow's own hash (the same field names)
    local npay = tonumber(a[pos])
    local pays = {}
    if npay < 0 then
      pays = cjson.decode(a[pos + 1])
      pos = pos + 2
    else
      for k = pos + 1, pos + 2 * npay do pays[#pays + 1] = a[k] end
      pos = pos + 2 * npay + 1
    end
    local own = nil
    if new then
      write_all('HSET', dk, pays)
    elseif #pays > 0 then
      local was = stored[dk]
      if was == nil then
        local names = {}
        for k = 1, #pays, 2 do names[#names + 1] = pays[k] end
        names[#names + 1] = D_OWN_PAYLOADS
        was = {}
        local got = hmget_all(dk, names)
        for k = 1, #names do was[names[k]] = got[k] end
        stored[dk] = was
      end
      for k = 1, #pays, 2 do
        if was[pays[k]] ~= pays[k + 1] then
          own = own or {}
          own[#own + 1] = pays[k]
          own[#own + 1] = pays[k + 1]
        end
      end
      if own and not was[D_OWN_PAYLOADS] then
        redis.call('HSET', dk, D_OWN_PAYLOADS, '1')
        was[D_OWN_PAYLOADS] = true
      end
    end
    local ninit = tonumber(a[pos])
    -- The new workflow hash, with slots 2 (state), 4 (input) and 6 (F_AT_END) filled per
    -- workflow. `in` and `e` early and always there (empty: none): a claim reads `in` for
    -- every task, a run's end reads `e`, and a field that is missing costs a scan of the
    -- whole hash. The counts of failed
    -- and skipped tasks come with the first (absent: 0; most runs have none, and two
    -- fields less are 15 bytes less per workflow). Its name only when it is not its
    -- definition's (D_RUN_NAME).
    local fields = {F_STATE, st0, F_INPUT, '', F_AT_END, '', F_CREATED, now_s, F_DIGEST,
      digest, F_COUNT, ntasks_s, F_LEFT, ntasks_s, F_OK, '0'}
    if st0 == 'scheduled' then
      fields[#fields + 1] = F_START_AT
      fields[#fields + 1] = start_at
    end
    local deadline = nil  -- ms after its start (init field dl)
    local at_end = ''  -- F_AT_END of its runs, less their options' letters
    for k = pos + 1, pos + 2 * ninit do
      fields[#fields + 1] = a[k]
      if (k - pos) % 2 == 1 then
        if a[k] == F_DEADLINE then deadline = tonumber(a[k + 1]) end
        if a[k] == F_TTL then at_end = 't' end
      end
    end
    if own then
      for k = 1, #own do fields[#fields + 1] = own[k] end
    end
    pos = pos + 2 * ninit + 1
    local roots = {}
    for r = 0, nroots - 1 do
      local at = roots_at + 3 * r
      local idx, delay = string.match(a[at], '^([^@]*)@?(%d*)$')
      roots[#roots + 1] = {idx, a[at + 1], tonumber(a[at + 2]), tonumber(delay)}
    end
    defs[d] = {key = dk, ntasks = ntasks, roots = roots, fields = fields, at_end = at_end,
      uses = 0, deadline = deadline, rated = has_feature(dk, D_RATE), name = named}
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
      def.fields[2] = st
      def.fields[4] = head
      def.fields[6] = def.at_end
      if o then  -- its options' letters (F_AT_END)
        def.fields[6] = def.at_end .. (o.g and 'g' or '') .. (o.sn and 's' or '')
          .. (o.pa and 'p' or '') .. (o.tp and 'm' or '')
      end
      write_all('HSET', wk, def.fields)
      if def.name == nil then  -- a new definition: named after its first run
        def.name = name
        redis.call('HSET', def.key, D_RUN_NAME, name)
      end
      if name ~= def.name then redis.call('HSET', wk, F_NAME, name) end
      if pieces then redis.call('HSET', wk, unpack(pieces)) end
      if own then redis.call('APPEND', k_input(wk), own) end  -- a new key: APPEND sets it
      if o then  -- its options' fields in one write
        local extra = {}
        if o.g then extra[#extra + 1] = F_GATES; extra[#extra + 1] = cjson.encode(o.g) end
        if o.key then
          extra[#extra + 1] = F_IDEM_KEY; extra[#extra + 1] = o.key
          redis.call('APPEND', k_idem(o.key), wid)
        end
        if o.tp then
          extra[#extra + 1] = F_TEMPLATE; extra[#extra + 1] = o.tp
          extra[#extra + 1] = F_TEMPLATE_VERSION; extra[#extra + 1] = o.tv
          redis.call('ZADD', k_by_template(o.tp), tonumber(wid), wid)
          redis.call('HINCRBY', K_TRUNS, o.tp, 1)
        end
        if o.sn then
          extra[#extra + 1] = F_SCHEDULE; extra[#extra + 1] = o.sn
          extra[#extra + 1] = F_TICK; extra[#extra + 1] = o.tk
        end
        if o.pa then  -- a child run: its parent task, how deep it nests, its tree's root
          extra[#extra + 1] = F_PARENT; extra[#extra + 1] = o.pa
          extra[#extra + 1] = F_DEPTH; extra[#extra + 1] = o.dp
          if o.rt then extra[#extra + 1] = F_ROOT; extra[#extra + 1] = o.rt end
        end
        if o.rk then
          extra[#extra + 1] = F_RATE_KEYS; extra[#extra + 1] = cjson.encode(o.rk)
          rate_keys_of[wk] = o.rk
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
      ws[#ws + 1] = now_s
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
          elseif def.rated and rate_enqueue(wk, def.key, wid .. ':' .. root[1], root[1],
              root[1], root[2], queue_score(root[3], wid)) then
            -- queued in its rate limit's bucket
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
          redis.call('HSET', wk, F_DUE, NOW + def.deadline)
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
      redis.call('HINCRBY', def.key, D_USERS, def.uses)
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
