-- push.lua: create workflows of one shard, and queue their root tasks.
-- KEYS[1]  P:seq
-- ARGV[3]  the call's push token ("" for none): a call sent again with the same token
--          (its first reply was lost) returns the first call's ids and writes nothing;
-- ARGV[4]  who pushes; ARGV[5] shard count N; ARGV[6] this shard's index S;
-- ARGV[7]  ms from now to start them (0: now; more: they are `scheduled` till then, their
--          ready tasks held out of the queues, the time in their field `at`);
-- ARGV[8]  how many definitions follow.
-- Then per definition (engine/definition.py, compile_workflow):
--   digest, ntasks, nroots, then per root (idx, type, priority; idx "<i>@<ms>" for a
--   root with a delay: held in P:delayed that long), ntypes, types...,
--   nstatic, static field/value pairs (stored once in P:d:<digest>),
--   ninit, initial runtime field/value pairs (every task's s and w or q).
-- Then how many workflows follow, and per workflow: its definition's number (1-based), name,
-- input JSON ("" for none; stored once per workflow as input_layout in lib/input.lua says: field
-- `in`, maybe pieces beside it or a key of its own), and its options JSON ("" for none):
--   tp, tv   the template and version it runs (fields tp tv; indexed in P:wt:<tp>)
--   key      its idempotency key: if P:ik:<key> names a workflow, that id is returned as
--            "=<id>" and nothing is written for this one (field ik; the key goes with it)
--   g        its gates [[gate, limit], ...] (concurrency keys): over a limit it waits
--            `queued` (field g; see workflow_ended in lib/ends.lua)
--   sn, tk   the schedule that started it and the tick (fields sn tk)
-- Returns the workflow ids, in order.
-- Python validated every definition: nothing here can fail half-way, so the first write
-- is safe.
local ids = push_workflows(ARGV, ARGV[3])
flush()
return ids
