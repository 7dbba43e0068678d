-- cleanup.lua: delete a finished workflow: its hash, its index entries, its counters.
-- KEYS[1]  P:w:<wid>;  ARGV[3] wid.
local wid, wk = ARGV[3], KEYS[1]
local m, refused = open_workflow(wid, wk, {'succeeded', 'failed', 'cancelled'},
  'only a finished workflow can be cleaned up')
if refused then return refused end
remove_workflow(wid, wk, m[1])
flush()
return 1
