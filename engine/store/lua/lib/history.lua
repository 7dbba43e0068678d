-- lib/history.lua: History of a template's runs: counted by the minute and the hour as they end.

-- Upper bounds (ms) of the duration buckets (engine/runtime/rollups.py, BOUNDS_MS, the other
-- half); a duration past the last one goes in the bucket after it.
local HIST_MS = {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000,
  300000, 900000, 3600000}
local HIST_MINUTE_S, HIST_HOUR_S = 86400, 691200

-- A run of template `tp` ended `final` after `ms`: counted in the minute's and the hour's
-- history hashes and the totals (fields t|<tp>|ok or bad, ms, b<k>). Only runs of a
-- template pay this.
local function template_run_ended(tp, final, ms)
  local b = #HIST_MS
  for k = 1, #HIST_MS do
    if ms <= HIST_MS[k] then b = k - 1 break end
  end
  local s = math.floor(NOW / 1000)
  local how = 'bad'
  if final == 'succeeded' then how = 'ok' end
  local f = 't|' .. tp .. '|'
  for _, kt in ipairs({{k_hist_minute(math.floor(s / 60)), HIST_MINUTE_S},
                       {k_hist_hour(math.floor(s / 3600)), HIST_HOUR_S}}) do
    redis.call('HINCRBY', kt[1], f .. how, 1)
    redis.call('HINCRBY', kt[1], f .. 'ms', ms)
    redis.call('HINCRBY', kt[1], f .. 'b' .. b, 1)
    redis.call('EXPIRE', kt[1], kt[2])
  end
  redis.call('HINCRBY', K_HTOT, f .. how, 1)
  redis.call('HINCRBY', K_HTOT, f .. 'ms', ms)
  redis.call('HINCRBY', K_HTOT, f .. 'b' .. b, 1)
end
