-- expand.lua: store a slice of a map's items (elements of its parent's output) and start
-- the first ones; or fail the map when its parent's output cannot be mapped.
-- KEYS[1]  P:w:<wid>
-- ARGV[3] wid; ARGV[4] the map's task index c; ARGV[5] from: how many elements were stored
-- before this slice (a slice sent twice, or out of order, changes nothing); ARGV[6] how
-- many items in all, or -1 to fail the map with ARGV[7] as its error; then the elements
-- as JSON. Returns how many elements are stored now, or -1 when the map is not waiting
-- for items (gone, cancelled, expanded already).
local wid, wk, c = ARGV[3], KEYS[1], ARGV[4]
local from, total = tonumber(ARGV[5]), tonumber(ARGV[6])
local m = redis.call('HMGET', wk, F_STATE, F_CREATED, c, c .. M_STORED, c .. M_TOTAL)
local live = m[1] == 'running' or m[1] == 'paused'
if not live or tstate(m[3]) ~= 'running' or m[5] then
  redis.call('ZREM', K_EXPAND, wid .. ':' .. c)
  return -1
end
local h = tonumber(m[4] or '0')
if from ~= h then return h end
local ct = tonumber(m[2])
local t = tparse(m[3])
if total < 0 then
  t.s, t.d = 'failed', NOW - ct
  redis.call('HSET', wk, c, tpack(t), c .. T_ERROR, ARGV[7])
  move_count('running', 'failed')
  redis.call('HINCRBY', wk, F_BAD, 1)
  redis.call('HINCRBY', wk, F_LEFT, -1)
  emit('failed', wid, tonumber(c), ARGV[7])
  skip_descendants(wid, wk, c)
  redis.call('ZREM', K_EXPAND, wid .. ':' .. c)
  finish_if_done(wid, wk)
  flush()
  return -1
end
if from == 0 then
  local dk = dkey(wk)
  if has_feature(dk, D_GATHER) then
    -- the steps manager's gather: what its items are given of the parent's output (manager_given)
    local over, key = string.match(redis.call('HGET', dk, c .. D_MAP) or '', '^(%d+)|(.*)$')
    local parts = {}
    local output = redis.call('HGET', wk, (over or '') .. T_OUTPUT) or ''
    for _, mb in ipairs(json_members(output) or {}) do
      if mb[2] ~= key then parts[#parts + 1] = mb[1] .. ':' .. mb[3] end
    end
    redis.call('HSET', wk, c .. M_GIVEN, '{' .. table.concat(parts, ',') .. '}')
  end
end
local n = #ARGV - 6
if n > 0 then
  local els = {}
  for a = 7, #ARGV do els[#els + 1] = ARGV[a] end
  write_all('RPUSH', k_pending(wk, c), els)
  h = h + n
  redis.call('HSET', wk, c .. M_STORED, h)
  count('t:pushed', n)
  count('t:waiting', n)
end
if h >= total then
  redis.call('HSET', wk, c .. M_TOTAL, total)
  redis.call('ZREM', K_EXPAND, wid .. ':' .. c)
  emit('expanded', wid, -1, {tonumber(c), total})
  if total == 0 then
    local on_empty = redis.call('HGET', dkey(wk), c .. D_ON_EMPTY)
    if on_empty == 'skip' then
      t.s, t.d = 'skipped', NOW - ct
      redis.call('HSET', wk, c, tpack(t))
      move_count('running', 'skipped')
      redis.call('HINCRBY', wk, F_SKIP, 1)
      redis.call('HINCRBY', wk, F_LEFT, -1)
      skip_descendants(wid, wk, c)
    elseif on_empty == 'fail' then
      t.s, t.d = 'failed', NOW - ct
      redis.call('HSET', wk, c, tpack(t), c .. T_ERROR, 'no items to map (on_empty: fail)')
      move_count('running', 'failed')
      redis.call('HINCRBY', wk, F_BAD, 1)
      redis.call('HINCRBY', wk, F_LEFT, -1)
      emit('failed', wid, tonumber(c), 'no items to map')
      skip_descendants(wid, wk, c)
    else
      map_finished(wid, wk, c, 0, 0, true)
    end
    finish_if_done(wid, wk)
  end
end
materialize(wid, wk, c, m[1] == 'running')
flush()
return h
