-- tasklog.lua: what running tasks wrote (log lines) and their progress, from an agent.
-- KEYS[1]  P:logs
-- ARGV[3] this shard's log budget in bytes (0: none); ARGV[4] how many entries; then six
-- values per entry: wid, task key, attempt, task name, lines (JSON, "" for none),
-- progress (JSON, "" for none).
-- A workflow that no longer exists gets nothing (its keys would outlive it). Lines over
-- the budget are refused and counted (`dropped`). Returns how many entries' lines were kept.
local budget = tonumber(ARGV[3])
local used = tonumber(redis.call('HGET', KEYS[1], 'bytes') or '0')
local start, kept, dropped = used, 0, 0
for j = 0, tonumber(ARGV[4]) - 1 do
  local at = 5 + 6 * j
  local wk = wkey(ARGV[at])
  local lines, prog = ARGV[at + 4], ARGV[at + 5]
  if redis.call('EXISTS', wk) == 1 then
    if lines ~= '' then
      if budget > 0 and used + #lines > budget then
        dropped = dropped + 1
      else
        redis.call('XADD', k_logs(wk), '*', 'k', ARGV[at + 1], 'a', ARGV[at + 2],
          'n', ARGV[at + 3], 'x', lines)
        redis.call('HINCRBY', wk, F_LOG_BYTES, #lines)
        used = used + #lines
        kept = kept + 1
      end
    end
    if prog ~= '' then redis.call('HSET', k_progress(wk), ARGV[at + 1], prog) end
  end
end
if kept > 0 then redis.call('HINCRBY', KEYS[1], 'bytes', used - start) end
if dropped > 0 then redis.call('HINCRBY', KEYS[1], 'dropped', dropped) end
return kept
