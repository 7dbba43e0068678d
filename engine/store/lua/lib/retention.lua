-- lib/retention.lua: Retention: finished workflows past it removed, a bounded batch a call.

-- Remove at most `limit` finished workflows whose retention is over: those with one of
-- their own (P:expire, due by now), then, with the deployment's `retention` (ms, 0: keep
-- forever), the others of each finished state in the order they finished, from where the
-- last sweep stopped (those kept longer stay behind it, and are not read again). Returns
-- how many were removed: `limit` says more may be due (the caller calls again).
local function sweep_retention(retention, limit)
  local cleaned = 0
  -- one retried since is running again: it is put back when it ends again
  for _, wid in ipairs(redis.call('ZRANGEBYSCORE', K_EXPIRE, '-inf', NOW, 'LIMIT', 0, limit)) do
    local st = redis.call('HGET', wkey(wid), F_STATE)
    if st == 'succeeded' or st == 'failed' or st == 'cancelled' then
      remove_workflow(wid, wkey(wid), st)
      cleaned = cleaned + 1
    else
      redis.call('ZREM', K_EXPIRE, wid)
    end
  end
  if retention <= 0 then return cleaned end
  for _, st in ipairs({'succeeded', 'failed', 'cancelled'}) do
    if cleaned >= limit then break end
    local from = redis.call('HGET', K_SWEEP, st) or '-inf'
    local skip, mark = 0, nil
    for _ = 1, 10 do
      local page = limit - cleaned
      local old = redis.call('ZRANGEBYSCORE', k_state(st), from, NOW - retention,
        'WITHSCORES', 'LIMIT', skip, page)
      for n = 1, #old, 2 do
        local wid = old[n]
        if redis.call('ZSCORE', K_EXPIRE, wid) then
          skip = skip + 1
        else
          remove_workflow(wid, wkey(wid), st)
          cleaned = cleaned + 1
        end
        mark = old[n + 1]
      end
      if #old < 2 * page or cleaned >= limit then break end
    end
    if mark and skip > 0 then redis.call('HSET', K_SWEEP, st, mark) end
  end
  return cleaned
end
