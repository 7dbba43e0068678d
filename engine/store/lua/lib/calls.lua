-- lib/calls.lua: Agents' running sets, schedule events, and flush (every call's last step).

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
  apply_moves()
  for field, delta in pairs(counters) do
    if delta ~= 0 then redis.call('HINCRBY', K_STATS, field, NUM[delta]) end
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
