-- expire.lua: change or clear a workflow's own retention (field `tl`, ms). A finished
-- workflow is kept that long from now (its P:expire entry re-armed); a running, paused,
-- scheduled or queued one keeps it for when it ends (workflow_ended arms it then). ttl
-- -1 keeps it until it is cleaned up by hand: finished, it waits in P:expire at +inf,
-- which housekeeping never reaches and the deployment's sweep steps over.
-- KEYS[1]  P:w:<wid>;  ARGV[3] wid; ARGV[4] who asks; ARGV[5] ttl ms (-1: never).
-- Returns when it goes (ms) for a finished workflow, -1 kept until cleaned up by hand, 0
-- not finished yet (counted from its end).
local wid, wk, who, ttl = ARGV[3], KEYS[1], ARGV[4], tonumber(ARGV[5])
if not ttl or (ttl ~= -1 and ttl <= 0) then
  return redis.error_reply('RFSTATE a retention is a number of ms above 0, or -1')
end
local m, refused = open_workflow(wid, wk,
  {'running', 'paused', 'scheduled', 'queued', 'succeeded', 'failed', 'cancelled'}, '')
if refused then return refused end
redis.call('HSET', wk, F_TTL, ttl)
local at_end = redis.call('HGET', wk, F_AT_END)  -- false: a run of an earlier release
if at_end and not string.find(at_end, 't', 1, true) then
  redis.call('HSET', wk, F_AT_END, at_end .. 't')
end
local due = 0
if m[1] == 'succeeded' or m[1] == 'failed' or m[1] == 'cancelled' then
  due = arm_retention(wid, ttl)
elseif ttl == -1 then
  due = -1
end
emit('retention', wid, -1, {ttl, who})
flush()
return due
