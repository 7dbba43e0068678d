"""Why Redis refused a call, in one line: the words the CLI and the HTTP API both say for
an error the server's configuration causes (a missing ACL permission, memory full)."""

from __future__ import annotations

import redis

from engine.errors import is_out_of_memory
from engine.ops.acl import denied_command, permission_message

NO_MEMORY = "Redis is out of memory (maxmemory reached, policy noeviction)"
FREE_MEMORY = "free memory (e.g. `redisflow cleanup --finished`) or raise maxmemory"
OUT_OF_MEMORY = f"{NO_MEMORY}: nothing was written; {FREE_MEMORY}"


def server_refusal(error: redis.ResponseError, user: str | None) -> str | None:
    """One line for an error the server's configuration causes (a missing ACL
    permission, memory full), or None for any other error.

    Args:
        error: the refusal.
        user: the Redis user of the connection (``None``: the default user).
    """
    text = str(error)
    # "can't run this command": a script stopped by an ACL where no guard runs (6.2)
    if isinstance(error, redis.exceptions.NoPermissionError) or "can't run this" in text:
        if "to access a" in text:  # a key or channel outside the user's patterns
            what = "channel" if "channel" in text else "key"
            return (
                f"Redis user {user or 'default'!r} may not access a {what} of this namespace "
                "(NOPERM): check --namespace, or see `redisflow acl`"
            )
        return permission_message(denied_command(error), user)
    if is_out_of_memory(error):
        return OUT_OF_MEMORY
    return None


def cause_of(error: BaseException, user: str | None) -> str:
    """Why a write stopped, in one line that says nothing of what was written (``user``:
    the connection's Redis user, as for :func:`server_refusal`)."""
    if is_out_of_memory(error):
        return f"{NO_MEMORY}; {FREE_MEMORY}"
    if isinstance(error, (redis.ConnectionError, redis.TimeoutError)):
        return f"Redis unreachable: {error}"
    if isinstance(error, redis.ResponseError):
        return server_refusal(error, user) or str(error)
    return str(error)
