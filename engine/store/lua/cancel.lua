-- cancel.lua: end a running, paused, scheduled or queued workflow as cancelled. Tasks not
-- yet started are cancelled; running tasks finish and their outcome is recorded, but
-- nothing more starts.
-- KEYS[1]  P:w:<wid>;  ARGV[3] wid; ARGV[4] who asks.
local wid, wk, who = ARGV[3], KEYS[1], ARGV[4]
local m, refused = open_workflow(wid, wk, {'running', 'paused', 'scheduled', 'queued'},
  'only a running, paused, scheduled or queued workflow can be cancelled', F_COUNT)
if refused then return refused end
local cancelled = end_workflow(wid, wk, m[1], m[2], 'cancelled', who, nil)
flush()
return cancelled
