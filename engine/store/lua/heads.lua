-- heads.lua: what a scheduler needs to plan the due schedules of this shard, in one call
-- (a read: nothing is written).
-- KEYS[1]  P:sdue
-- ARGV[3..] pairs: a schedule's name, and the spec version the caller has parsed ("" for
--           none).
-- Returns per schedule {v, nt, nx, spec}: its version, next tick and due time as stored
-- now, and its spec JSON only when the caller's version is not `v` (else false); v is
-- false for a schedule that is gone.
local out = {}
for k = 3, #ARGV, 2 do
  local sk = k_schedule(ARGV[k])
  local h = redis.call('HMGET', sk, 'v', 'nt', 'nx')
  local spec = false
  if h[1] and h[1] ~= ARGV[k + 1] then spec = redis.call('HGET', sk, 'spec') end
  out[#out + 1] = {h[1], h[2], h[3], spec}
end
return out
