-- rollup.lua: an agent's history of the last seconds, added to the minute's and the
-- hour's history hashes and to the totals (counters an agent aggregated in memory: see
-- engine/runtime/rollups.py).
-- KEYS[1]  P:hm:<first minute>
-- ARGV[3] how many minutes; then per minute: the minute (epoch s // 60), how many
-- fields, then field and increment pairs.
local at = 4
for _ = 1, tonumber(ARGV[3]) do
  local minute = tonumber(ARGV[at])
  local n = tonumber(ARGV[at + 1])
  local mk, hk = k_hist_minute(minute), k_hist_hour(math.floor(minute / 60))
  for j = 0, n - 1 do
    local f, inc = ARGV[at + 2 + 2 * j], ARGV[at + 3 + 2 * j]
    redis.call('HINCRBY', mk, f, inc)
    redis.call('HINCRBY', hk, f, inc)
    redis.call('HINCRBY', K_HTOT, f, inc)
  end
  redis.call('EXPIRE', mk, HIST_MINUTE_S)
  redis.call('EXPIRE', hk, HIST_HOUR_S)
  at = at + 2 + 2 * n
end
return 1
