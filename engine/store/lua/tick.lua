-- tick.lua: fire the ticks of one or more schedules of this shard (their runs are pushed
-- into the same shard). Per schedule, in one atomic step: the compare-and-set on its due
-- time, the dedup of each tick, the overlap check against its latest run, the push, and
-- its move to the next due time. One call may carry many schedules (a scheduler's batch):
-- each is decided on its own; the runs are pushed together.
-- KEYS[1]  P:sdue (a key of the shard)
-- ARGV[3]  how: "due" (a scheduler at the due time), "now" (trigger), "backfill";
-- ARGV[4]  n, then n values: push.lua's ARGV from who pushes (its ARGV[4]) to the last
--          definition (push_argv in calls.py, without the workflows);
-- then how many schedules, and per schedule:
--   its name; the due ms its plan started from ("due": refused unless P:sdue still holds
--   it ("taken"), or if Redis's clock has not reached it ("early")); the spec version `v`
--   the runs were built from (refused if it changed: "taken"); "due": the next tick ms
--   and its due ms ("" "": no tick is left), the ticks counted missed and a JSON list of
--   some; its overlap policy; how many runs, and per run: its tick ms (the dedup: one run
--   per tick), the other ticks it carries as a csv ("" for none: catchup coalesce), and
--   its workflow as push_workflows takes it (definition number, name, input, options).
-- Runs under overlap skip, buffer_one and buffer_all carry the gate "s/<name>" in their
-- options: a buffered run is pushed `queued` and starts when the run holding the gate
-- ends (workflow_ended, in the script that ends it).
-- A trigger ("now") is never a dup: two triggers in one millisecond are two runs.
-- Returns per schedule {"ok", {{tick, "fired" | "buffered" | "skipped" | "dup", run id
-- or ""}...}} or {"taken"} / {"early"} / {"gone"} (nothing written for it).
local how = ARGV[3]
local npre = tonumber(ARGV[4])
-- push_workflows reads its table from a[4] on, as push.lua its ARGV
local pre = {'', '', ''}
for k = 1, npre do pre[k + 3] = ARGV[4 + k] end
local who = pre[4]
local pos = 5 + npre
local nsched = tonumber(ARGV[pos])
pos = pos + 1

local rows = {}  -- workflows to push, in order: {values, schedule, outcome}
local touched = {}

-- Push the runs decided so far, in one push_workflows call; each schedule learns its runs' ids.
local function push_now()
  if #rows == 0 then return end
  local a = {}
  for k = 1, #pre do a[k] = pre[k] end
  a[#a + 1] = #rows
  for _, r in ipairs(rows) do
    for k = 1, 4 do a[#a + 1] = r.values[k] end
  end
  local ids = push_workflows(a, '')
  for k, r in ipairs(rows) do
    r.outcome[3] = ids[k]
    r.s.cur = ids[k]
  end
  for _, s in ipairs(touched) do s.wpend = 0 end
  rows = {}
end

local results = {}
local done = {}  -- the schedules that go on (status ok)
for n = 1, nsched do
  local name, expected, version = ARGV[pos], ARGV[pos + 1], ARGV[pos + 2]
  local s = {name = name, sk = k_schedule(name), nt = ARGV[pos + 3], nx = ARGV[pos + 4],
    missed = tonumber(ARGV[pos + 5]), shown = ARGV[pos + 6], overlap = ARGV[pos + 7],
    outcomes = {}, fired = 0, skipped = 0, buffered = 0, here = 0, wpend = 0}
  local nruns = tonumber(ARGV[pos + 8])
  local at = pos + 9
  pos = at + 6 * nruns
  local h = redis.call('HMGET', s.sk, 'v', 'cur', 'lt')
  local status = 'ok'
  if not h[1] then
    status = 'gone'
  elseif h[1] ~= version then
    status = 'taken'
  elseif how == 'due' then
    local score = redis.call('ZSCORE', K_SDUE, name)
    if not score or tonumber(score) ~= tonumber(expected) then
      status = 'taken'
    elseif tonumber(expected) > NOW then
      status = 'early'
    end
  end
  if status ~= 'ok' then
    results[n] = {status}
  else
    s.cur, s.lt = h[2], tonumber(h[3]) or 0
    touched[#touched + 1] = s
    done[#done + 1] = s
    local gate = 's/' .. name
    local sticks = k_sticks(name)
    for r = 0, nruns - 1 do
      local p = at + 6 * r
      local tick = ARGV[p]
      local outcome = {tick, 'dup', ''}
      s.outcomes[#s.outcomes + 1] = outcome
      -- a trigger ("now") is a request of its own: it fires even when another one (or a
      -- tick) got the same millisecond; the tick stays recorded for the schedule's dedup
      if redis.call('ZADD', sticks, 'NX', tick, tick) == 1 or how == 'now' then
        for _, t in ipairs(split_csv(ARGV[p + 1])) do redis.call('ZADD', sticks, 'NX', t, t) end
        if tonumber(tick) > s.lt then s.lt = tonumber(tick) end
        local what = 'fired'
        local o = s.overlap
        if o == 'skip' or o == 'buffer_one' or o == 'buffer_all' then
          -- a run of it pushed by this call holds the gate, or waits for it
          if s.here > 0 or gate_busy(gate, 1) then
            if o == 'skip' then
              what = 'skipped'
            else
              local most = 1
              if o == 'buffer_all' then most = 1000 end
              if redis.call('ZCARD', k_gate_queue(gate)) + s.wpend >= most then
                what = 'skipped'
              else
                what = 'buffered'
              end
            end
          end
        elseif o == 'cancel_other' then
          if s.here > 0 then push_now() end  -- its previous run must exist to end it
          if s.cur ~= '' then
            local wk = wkey(s.cur)
            local m = redis.call('HMGET', wk, F_STATE, F_COUNT)
            local st = m[1]
            if st == 'running' or st == 'paused' or st == 'scheduled' or st == 'queued' then
              end_workflow(s.cur, wk, st, m[2], 'cancelled', who, nil)
              schedule_event('cancelled', s.cur, name, ',"tick":' .. tick)
            end
          end
        end
        outcome[2] = what
        if what == 'skipped' then
          s.skipped = s.skipped + 1
        else
          s.here = s.here + 1
          s.fired = s.fired + 1
          if what == 'buffered' then
            s.buffered = s.buffered + 1
            s.wpend = s.wpend + 1
          end
          rows[#rows + 1] = {values = {ARGV[p + 2], ARGV[p + 3], ARGV[p + 4], ARGV[p + 5]},
            s = s, outcome = outcome}
        end
      end
    end
    results[n] = {'ok', s.outcomes}
  end
end
push_now()

for _, s in ipairs(done) do
  local name = s.name
  for _, o in ipairs(s.outcomes) do
    if o[2] == 'skipped' then
      schedule_event('skipped', s.cur ~= '' and s.cur or 0, name, ',"tick":' .. o[1])
    elseif o[2] ~= 'dup' then
      schedule_event(o[2], o[3], name, ',"tick":' .. o[1])
    end
  end
  local fields = {'cur', s.cur}
  if s.lt > 0 then
    fields[#fields + 1] = 'lt'
    fields[#fields + 1] = s.lt
  end
  if how == 'due' then
    fields[#fields + 1] = 'nt'
    fields[#fields + 1] = s.nt
    fields[#fields + 1] = 'nx'
    fields[#fields + 1] = s.nx
    if s.nx ~= '' then
      redis.call('ZADD', K_SDUE, s.nx, name)
    else
      redis.call('ZREM', K_SDUE, name)
      schedule_event('ended', 0, name, '')
    end
    if s.missed > 0 then
      redis.call('HINCRBY', s.sk, 'missed', s.missed)
      schedule_event('missed', 0, name, ',"count":' .. s.missed .. ',"ticks":' .. s.shown)
    end
  end
  redis.call('HSET', s.sk, unpack(fields))
  if s.fired > 0 then redis.call('HINCRBY', s.sk, 'runs', s.fired) end
  if s.skipped > 0 then redis.call('HINCRBY', s.sk, 'skipped', s.skipped) end
  if s.buffered > 0 then redis.call('HINCRBY', s.sk, 'buffered', s.buffered) end
  local sticks = k_sticks(name)
  local kept = redis.call('ZCARD', sticks)
  if kept > 10000 then redis.call('ZREMRANGEBYRANK', sticks, 0, kept - 10001) end
end
flush()
return results
