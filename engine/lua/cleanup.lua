-- cleanup.lua: delete a finished workflow: its hash, its index entries, its counters.
-- KEYS[1]  P:w:<wid>;  ARGV[3] wid.
local wid, wk = ARGV[3], KEYS[1]
local st = redis.call('HGET', wk, 'st')
if not st then return redis.error_reply('RFNOTFOUND workflow ' .. wid .. ' does not exist') end
if st ~= 'succeeded' and st ~= 'failed' and st ~= 'cancelled' then
  return redis.error_reply('RFSTATE workflow ' .. wid .. ' is ' .. st .. '; only a finished workflow can be cleaned up')
end
remove_workflow(wid, wk, st)
flush()
return 1
