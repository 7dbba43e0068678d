-- template.lua: store a new version of a template, unless its text is the latest's.
-- KEYS[1]  T:tpl:<name> (shard 0); KEYS[2] T:tpls.
-- ARGV[3] name; ARGV[4] the file's text; ARGV[5] where it came from; ARGV[6] the text's
-- SHA-1 (Python validated the text: it loads as one workflow).
-- Returns {version, 1 if it is new, 0 if the text was the latest version's already}.
local tk = KEYS[1]
local v = tonumber(redis.call('HGET', tk, 'v') or '0')
if v > 0 and redis.call('HGET', tk, v .. 'h') == ARGV[6] then return {v, 0} end
v = v + 1
redis.call('HSET', tk, 'v', v, tostring(v), ARGV[4], v .. 'f', ARGV[5], v .. 'h', ARGV[6],
  v .. 't', NOW)
redis.call('ZADD', KEYS[2], NOW, ARGV[3])
flush()
return {v, 1}
