-- Moves every key of one cluster slot to another master, then marks the slot MIGRATING to
-- it: one script, so no other command runs on this node meanwhile and no script of the
-- shard ever sees part of its keys gone (engine/store/shard_moves.py runs it, with the
-- target IMPORTING before and CLUSTER SETSLOT NODE after).
-- KEYS[1]: a key of the slot (it routes the call here).
-- ARGV: slot, target host, target port, target node id, keys per MIGRATE, MIGRATE timeout
-- ms, then AUTH2 user password (user "" for AUTH password) when the target needs them.
-- Reply: how many keys moved; an RFMOVE error when a MIGRATE failed (the keys moved by then
-- stay moved and the slot MIGRATING: the same move run again finishes it).
local slot, host, port, target = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local batch, timeout = tonumber(ARGV[5]), ARGV[6]
local head = {'MIGRATE', host, port, '', 0, timeout, 'REPLACE'}
if ARGV[8] then
  if ARGV[7] ~= '' then
    head[#head + 1], head[#head + 2], head[#head + 3] = 'AUTH2', ARGV[7], ARGV[8]
  else
    head[#head + 1], head[#head + 2] = 'AUTH', ARGV[8]
  end
end
head[#head + 1] = 'KEYS'
local total = redis.call('CLUSTER', 'COUNTKEYSINSLOT', slot)
local moved = 0
-- bounded: a key that expires meanwhile is neither moved nor counted twice
for _ = 1, math.ceil(total / batch) + 1 do
  local keys = redis.call('CLUSTER', 'GETKEYSINSLOT', slot, batch)
  if #keys == 0 then break end
  local args = {unpack(head)}
  for i = 1, #keys do args[#args + 1] = keys[i] end
  local r = redis.pcall(unpack(args))
  if type(r) == 'table' and r.err then
    redis.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', target)
    return redis.error_reply('RFMOVE ' .. moved .. ' of ' .. total .. ' keys moved, then ' .. r.err)
  end
  moved = moved + #keys
end
redis.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', target)
return moved
