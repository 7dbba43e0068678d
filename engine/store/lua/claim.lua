-- claim.lua: an agent takes up to `count` ready tasks of the types it serves.
-- KEYS     P:q:<type> for every type the agent serves (one or more)
-- ARGV[3] agent id; ARGV[4] count.
-- With several queues the best `count` tasks over all of them are taken (priority, then
-- age), so an agent never claims more than it has room for, whatever its types.
-- A member "~<bucket>" stands for the ready tasks of a rate limit's bucket: the claim takes
-- those its tokens allow (take_tokens, lib/rate_limits.lua).
-- Returns, when a bucket ran out of tokens with tasks left, the ms its next token exists
-- and the claim's own time (ms), else 0, 0; then each task's row (put_row in
-- lib/claim_row.lua), one flat list. Or the error "RFLEASE ..." when the agent holds no
-- live lease (it was declared dead: it must register again).
local agent = ARGV[3]
local want = tonumber(ARGV[4])
item_meta = {}  -- see workflow_for
if not redis.call('ZSCORE', K_AGENTS_LIVE, agent) then
  return redis.error_reply('RFLEASE agent ' .. agent .. ' holds no lease')
end
promote_due(100)
local members = {}
if #KEYS == 1 then
  -- the best `want` without their scores (ZPOPMIN formats each score, Lua parses it back)
  members = redis.call('ZRANGE', KEYS[1], 0, want - 1)
  if #members > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #members - 1) end
else
  local found = {}
  for q = 1, #KEYS do
    local popped = redis.call('ZPOPMIN', KEYS[q], want)
    for k = 1, #popped, 2 do
      found[#found + 1] = {popped[k], tonumber(popped[k + 1]), popped[k + 1], KEYS[q]}
    end
  end
  table.sort(found, function(x, y)
    if x[2] ~= y[2] then return x[2] < y[2] end
    return x[1] < y[1]
  end)
  for k, f in ipairs(found) do
    if k <= want then
      members[#members + 1] = f[1]
    else
      redis.call('ZADD', f[4], f[3], f[1])  -- not taken: back where it was, same score
    end
  end
end
local next_at = nil
for _, member in ipairs(members) do
  if string.byte(member, 1) == 126 then
    members, next_at = take_tokens(members, want)
    break
  end
end
local rows = {next_at or 0, next_at and NOW or 0}
local started = {}
local taken = 0  -- plain tasks and items started: counted once (move_count) at the end
local agent_json = cjson.encode(agent)
for _, member in ipairs(members) do
  local wid, i = string.match(member, '^(%d+):(%d+)$')  -- a plain task: one match
  local plain = wid ~= nil
  if plain or not start_item(member) then  -- an item start_item takes starts below
    if not plain then wid, i = split_member(member) end
    local wk = wkey(wid)
    local m, rec = workflow_for(wk, i, plain)
    local s, a, q = nil, '0', ''
    if rec then
      local p = ready_parts[rec]
      s, a, q = p[1], p[2], p[3]
    end
    -- Pause, cancel and cleanup take tasks out of the queues, so this only guards against
    -- a queue entry written by hand or by an older version.
    if m[1] == 'running' and WORD[s] == 'ready' then
      if plain then taken = taken + 1 else move_task(i, 'ready', 'running') end
      start_task(wid, wk, i, agent, agent_json, m, rec, plain, a, q, rows, member)
      started[#started + 1] = member
    end
  end
end
taken = taken + start_items(agent, agent_json, rows, started)
if taken > 0 then move_count('ready', 'running', taken) end
write_all('SADD', k_running(agent), started)
flush()
return rows
