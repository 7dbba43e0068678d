"""Least-privilege Redis ACL users for redisflow, and readable permission errors.

A role is what one kind of process needs in one namespace: its keys (``~NS:*``), its
pub/sub channels (``&NS:*``, plus keyspace notifications for the console) and the
commands it runs, both directly and inside the Lua scripts (Redis 7 checks ACLs on the
commands a script runs too). The script commands are read from the scripts themselves
(:func:`engine.store.scripts.script_commands`), so the roles follow the scripts as they change.
"""

from __future__ import annotations

import re

import redis

from .store.keys import DEFAULT_NAMESPACE
from .store.layout import is_cluster
from .store.scripts import script_commands

ROLES = ("agent", "operator", "reader")

# Every role: connection upkeep (PING for health checks, SELECT for a /db other than 0),
# INFO for the server checks of engine.health, pub/sub.
BASE = ("PING", "SELECT", "INFO", "SUBSCRIBE", "UNSUBSCRIBE", "TIME")
# On a Redis Cluster (Redis 7) every role also needs what a cluster client asks a node
# for (its slot map, the commands' key positions) and sharded pub/sub: the scripts send
# SPUBLISH there instead of PUBLISH, and wake-ups and events are read with SSUBSCRIBE.
# Redis 6.2 does not know the sharded commands, so a single Redis's line leaves them out.
CLUSTER = ("CLUSTER|SLOTS", "COMMAND", "SSUBSCRIBE", "SUNSUBSCRIBE")
# Running the scripts: EVALSHA, SCRIPT LOAD/EXISTS after a restart or in pipelines,
# EVAL for the one-off server version probe (engine.store.scripts.supports_shebang).
RUN_SCRIPTS = ("EVALSHA", "EVAL", "SCRIPT|LOAD", "SCRIPT|EXISTS")
# What the client API reads (status, list, stats, events, agents, wait).
# A workflow's input too long for its hash is a string key of its own (GET).
# A map's reads take its counters and in-flight set together (MULTI/EXEC) and elements
# not started yet from its pending list (LRANGE).
READS = (
    "GET", "HGET", "HMGET", "HGETALL", "HLEN", "HSCAN", "HEXISTS", "SMEMBERS", "ZCARD", "ZCOUNT",
    "ZRANGE", "ZREVRANGE", "ZRANGEBYSCORE", "XREVRANGE", "XREAD", "LRANGE", "MULTI", "EXEC",
)  # fmt: skip
# What the agent loop reads outside its scripts (next retry due, idle check).
# (expanding a map reads its parent's output and definition: HGET, HMGET, ZRANGEBYSCORE)
AGENT_READS = ("HGET", "HMGET", "ZCARD", "ZRANGE", "ZRANGEBYSCORE")
# Storing the deployment's layout the first time (engine/store/layout.py): HSETNX, and
# EXISTS to refuse a shard count other than the one its workflows were pushed with.
LAYOUT = ("HSETNX", "EXISTS")
AGENT_SCRIPTS = ("register", "claim", "complete", "heartbeat", "reap", "stop", "expand")
# (a retry expands a map it reset again; a scheduler pushes runs with tick: an agent with
# --scheduler needs the operator's commands too)
OPERATOR_SCRIPTS = (
    "push", "pause", "release", "cancel", "retry", "cleanup", "expand", "template",
    "schedule", "tick", "heads",
)  # fmt: skip

_NOPERM_COMMAND = re.compile(r"may not run (\S+?);|to run the '([^']+)' command")


def role_commands(role: str, cluster: bool = False) -> list[str]:
    """The commands ``role`` needs, sorted (``SCRIPT|LOAD`` names a subcommand); with
    ``cluster``, on a Redis Cluster."""
    if role == "reader":
        wanted = {*BASE, *READS}
    elif role == "agent":
        wanted = {*BASE, *RUN_SCRIPTS, *AGENT_READS, *LAYOUT}
        wanted.update(*(script_commands(s) for s in AGENT_SCRIPTS))
    elif role == "operator":
        wanted = {*BASE, *RUN_SCRIPTS, *READS, *LAYOUT}
        wanted.update(*(script_commands(s) for s in OPERATOR_SCRIPTS))
    else:
        raise ValueError(f"unknown role {role!r}: one of {', '.join(ROLES)}")
    if cluster:
        wanted.update(CLUSTER)
        if "PUBLISH" in wanted:
            wanted.add("SPUBLISH")
    return sorted(wanted)


def setuser_line(
    role: str, namespace: str = DEFAULT_NAMESPACE, user: str | None = None, cluster: bool = False
) -> str:
    """The ``ACL SETUSER`` command that gives the user of ``role`` exactly its permissions
    (``cluster``: on a Redis Cluster, where it is run on every node: ACLs are per node).

    It replaces the user's keys, channels and commands but keeps its password, so it can
    be run again after an upgrade; a new user needs one (``ACL SETUSER NAME >secret``).
    """
    if not namespace or any(c in namespace for c in " *?[]\\"):
        raise ValueError(f"namespace {namespace!r} must be non-empty, without spaces or *?[]\\")
    name = user or f"{namespace}-{role}"
    if not name.strip() or any(c.isspace() for c in name):
        raise ValueError(f"user name {name!r} must be non-empty, without spaces")
    parts = ["ACL", "SETUSER", name, "on", "resetkeys", f"~{namespace}:*"]
    parts += ["resetchannels", f"&{namespace}:*"]
    if role != "agent":  # the console's keyspace notifications (any database)
        parts.append(f"&__keyspace@*__:{namespace}:*")
    parts += ["-@all", *(f"+{c.lower()}" for c in role_commands(role, cluster))]
    return " ".join(parts)


_MISSING = """
local out = {}
if not redis.acl_check_cmd then return out end
for k = 1, #ARGV do
  local cmd, sub = string.match(ARGV[k], '^([^|]+)|?(.*)$')
  local ok
  if sub == '' then ok = redis.acl_check_cmd(cmd) else ok = redis.acl_check_cmd(cmd, sub) end
  if not ok then out[#out + 1] = ARGV[k] end
end
return out
"""


def missing_commands(client: redis.Redis, role: str) -> list[str]:
    """The commands of ``role`` the client's user may not run, asked in one EVAL (which
    every script-running role has; on a cluster, of one node). Redis 6.2 cannot tell: []
    there."""
    wanted = role_commands(role, cluster=is_cluster(client))
    return [str(c) for c in client.eval(_MISSING, 0, *wanted)]


def denied_command(error: Exception) -> str | None:
    """The command a NOPERM error names (upper case), or None when it names none."""
    m = _NOPERM_COMMAND.search(str(error))
    if m is None:
        return None
    return (m.group(1) or m.group(2)).upper()


def permission_message(command: str | None, user: str | None) -> str:
    """One line for an operator: which user may not run what, and where to look."""
    who = f"Redis user {user or 'default'!r}"
    if command is None:
        return f"{who} lacks a permission redisflow needs (NOPERM): see `redisflow acl`"
    return f"{who} may not run {command} (NOPERM): grant it or see `redisflow acl`"
