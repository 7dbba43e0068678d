-- tick.lua: fire one schedule's ticks: the compare-and-set on its due time, the dedup of
-- each tick, the overlap check against its latest run and the push, in one script on
-- the schedule's shard (its runs are pushed into the same shard).
-- KEYS[1]  P:s:<name>
-- ARGV[3]  the name; ARGV[4] how: "due" (a scheduler, at the due time), "now" (schedule
--          trigger), "backfill";
-- ARGV[5]  "due": the due ms the caller planned from (refused unless P:sdue still holds
--          it: "taken"; or if it is still ahead of Redis's clock: "early");
-- ARGV[6]  the spec version `v` the runs were built from (refused if changed: "taken");
-- ARGV[7]  "due": the next tick ms and ARGV[8] its due ms ("" "": no tick is left);
-- ARGV[9]  "due": ticks counted missed (catch-up), ARGV[10] some of them, a JSON list;
-- ARGV[11] the overlap policy; ARGV[12] who (recorded in the pushed events);
-- ARGV[13] n, then n values: push.lua's ARGV from who pushes (ARGV[4]) to the last
--          definition (push_workflows' table, without the workflows);
-- then how many runs, and per run: its tick ms (the dedup: one run per tick), the other
--          ticks it carries as a csv ("" for none: catchup coalesce), and its workflow as
--          push_workflows takes it (definition number, name, input JSON, options JSON).
-- Runs whose overlap policy uses the gate "s/<name>" (skip, buffer_one, buffer_all) carry
-- it in their options: a buffered run is pushed `queued` and starts when the run
-- holding the gate ends.
-- Returns {"ok", {tick, "fired" | "buffered" | "skipped" | "dup", run id or ""}...} or
-- {"taken"} / {"early"} / {"gone"} (nothing written).
local sk, name, how = KEYS[1], ARGV[3], ARGV[4]
local h = redis.call('HMGET', sk, 'v', 'cur', 'lt')
if not h[1] then return {'gone'} end
if h[1] ~= ARGV[6] then return {'taken'} end
if how == 'due' then
  local score = redis.call('ZSCORE', K_SDUE, name)
  if not score or tonumber(score) ~= tonumber(ARGV[5]) then return {'taken'} end
  if tonumber(ARGV[5]) > NOW then return {'early'} end
end

local overlap, who = ARGV[11], ARGV[12]
local npre = tonumber(ARGV[13])
-- push_workflows reads its table from a[4] on, as push.lua its ARGV (after the prefix,
-- the cap and the token)
local pre = {'', '', ''}
for k = 1, npre do pre[k + 3] = ARGV[13 + k] end
local pos = 14 + npre
local nruns = tonumber(ARGV[pos])
pos = pos + 1

local gate = 's/' .. name
local sticks = k_sticks(name)
local cur, lt = h[2], tonumber(h[3]) or 0
local out = {}
local fired, skipped, buffered = 0, 0, 0
local tick_json = ',"tick":'

-- The state of the schedule's latest run ('' when there is none or it was cleaned up).
local function cur_state()
  if cur == '' then return '' end
  return redis.call('HGET', wkey(cur), 'st') or ''
end

-- How many of the schedule's runs wait for the gate (buffered, not started).
local function waiting()
  return redis.call('ZCARD', k_gate_queue(gate))
end

local function push_one(row)
  local a = {}
  for k = 1, #pre do a[k] = pre[k] end
  a[#a + 1] = 1
  for k = 1, 4 do a[#a + 1] = row[k] end
  return push_workflows(a, '')[1]
end

for _ = 1, nruns do
  local tick, carried = ARGV[pos], ARGV[pos + 1]
  local row = {ARGV[pos + 2], ARGV[pos + 3], ARGV[pos + 4], ARGV[pos + 5]}
  pos = pos + 6
  if redis.call('ZADD', sticks, 'NX', tick, tick) == 0 then
    out[#out + 1] = {tick, 'dup', ''}
  else
    for _, t in ipairs(split_csv(carried)) do redis.call('ZADD', sticks, 'NX', t, t) end
    if tonumber(tick) > lt then lt = tonumber(tick) end
    local what = 'fired'
    if overlap == 'skip' then
      if gate_busy(gate, 1) then what = 'skipped' end
    elseif overlap == 'buffer_one' then
      if gate_busy(gate, 1) then
        if waiting() >= 1 then what = 'skipped' else what = 'buffered' end
      end
    elseif overlap == 'buffer_all' then
      if gate_busy(gate, 1) then
        if waiting() >= 1000 then what = 'skipped' else what = 'buffered' end
      end
    elseif overlap == 'cancel_other' then
      local st = cur_state()
      if st == 'running' or st == 'paused' or st == 'scheduled' or st == 'queued' then
        local n = redis.call('HGET', wkey(cur), 'n')
        end_workflow(cur, wkey(cur), st, n, 'cancelled', who, nil)
        schedule_event('cancelled', cur, name, tick_json .. tick)
      end
    end
    if what == 'skipped' then
      skipped = skipped + 1
      local blocking = cur
      if blocking == '' then blocking = 0 end
      schedule_event('skipped', blocking, name, tick_json .. tick)
      out[#out + 1] = {tick, 'skipped', ''}
    else
      cur = push_one(row)
      fired = fired + 1
      if what == 'buffered' then buffered = buffered + 1 end
      schedule_event(what, cur, name, tick_json .. tick)
      out[#out + 1] = {tick, what, cur}
    end
  end
end

local fields = {'cur', cur}
if lt > 0 then
  fields[#fields + 1] = 'lt'
  fields[#fields + 1] = lt
end
if how == 'due' then
  local nt, nx = ARGV[7], ARGV[8]
  fields[#fields + 1] = 'nt'
  fields[#fields + 1] = nt
  fields[#fields + 1] = 'nx'
  fields[#fields + 1] = nx
  if nx ~= '' then
    redis.call('ZADD', K_SDUE, nx, name)
  else
    redis.call('ZREM', K_SDUE, name)
    schedule_event('ended', 0, name, '')
  end
  local missed = tonumber(ARGV[9])
  if missed > 0 then
    redis.call('HINCRBY', sk, 'missed', missed)
    schedule_event('missed', 0, name, ',"count":' .. missed .. ',"ticks":' .. ARGV[10])
  end
end
redis.call('HSET', sk, unpack(fields))
if fired > 0 then redis.call('HINCRBY', sk, 'runs', fired) end
if skipped > 0 then redis.call('HINCRBY', sk, 'skipped', skipped) end
if buffered > 0 then redis.call('HINCRBY', sk, 'buffered', buffered) end
local kept = redis.call('ZCARD', sticks)
if kept > 10000 then redis.call('ZREMRANGEBYRANK', sticks, 0, kept - 10001) end
flush()
return {'ok', out}
