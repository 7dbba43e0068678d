-- lib/guard.lua: The permission guard every script runs before its own body (scripts.py builds it).

-- The first of `cmds` this script's ACL user may not run, as an error message; nil when
-- it may run them all. scripts.py calls it with every command the script may use, before
-- the script's first write: a script stopped by a permission error is not rolled back.
-- Redis 6.2 has no acl_check_cmd (there the roles of `redisflow acl` must be granted whole).
-- Never list SET here (use SETEX): Redis 7.0.15 segfaults in acl_check_cmd('SET') called
-- without its arguments; tests/test_acl.py checks no script uses it.
local function denied(cmds)
  if not redis.acl_check_cmd then return nil end
  for k = 1, #cmds do
    if not redis.acl_check_cmd(cmds[k]) then
      return 'NOPERM this user may not run ' .. cmds[k] .. '; nothing was written'
    end
  end
  return nil
end
