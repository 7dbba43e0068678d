"""Least-privilege Redis ACL users for redisflow, and readable permission errors.

A role is what one kind of process needs in one namespace: its keys (``~NS:*``; the
operator also the sealed ``~NS!*``, where trigger secrets live), its pub/sub channels
(``&NS:*``, plus keyspace notifications for the console) and the commands it runs, both
directly and inside the Lua scripts (Redis 7 checks ACLs on the commands a script runs
too). The script commands are read from the scripts themselves
(:func:`engine.store.scripts.script_commands`), so the roles follow the scripts as they
change.

Scripts are allowed one by one: ``+evalsha|<sha>`` for each script of the role, the SHA of
the exact source this redisflow sends (so the line changes with an upgrade), and no EVAL,
which would run any code. ``SELECT`` is allowed for the one database the line is made for
(``+select|<db>``); ``INFO`` is not allowed at all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import redis

from engine.store.keys import DEFAULT_NAMESPACE, SEALED
from engine.store.layout import is_cluster
from engine.store.scripts import script_commands, script_sha, script_source

if TYPE_CHECKING:
    from engine.client import Engine

ROLES = ("agent", "operator", "reader", "keeper")

# Every role: connection upkeep (PING for health checks), pub/sub, the server's clock.
# SELECT is granted for one database only (setuser_line's db); INFO for none: it is in
# @dangerous, and its first argument cannot narrow it (``INFO memory everything``).
BASE = ("PING", "SUBSCRIBE", "UNSUBSCRIBE", "TIME")
# On a Redis Cluster (Redis 7) every role also needs what a cluster client asks a node
# for (its slot map, the commands' key positions) and sharded pub/sub: the scripts send
# SPUBLISH there instead of PUBLISH, and wake-ups and events are read with SSUBSCRIBE.
# Redis 6.2 does not know the sharded commands, so a single Redis's line leaves them out.
# ASKING: a call sent with --wait-replicas follows an ASK redirection itself.
CLUSTER = ("CLUSTER|SLOTS", "COMMAND", "SSUBSCRIBE", "SUNSUBSCRIBE", "ASKING")
# Running the scripts: SCRIPT LOAD/EXISTS after a restart or in pipelines (loading runs
# nothing), WAIT after them with --wait-replicas (engine/store/durable.py). EVALSHA is
# granted per script (script_shas).
RUN_SCRIPTS = ("SCRIPT|LOAD", "SCRIPT|EXISTS", "WAIT")
# What the client API reads (status, list, stats, events, agents, wait).
# A workflow's input too long for its hash is a string key of its own (GET).
# A map's reads take its counters and in-flight set together (MULTI/EXEC) and elements
# not started yet from its pending list (LRANGE).
READS = (
    "GET", "HGET", "HMGET", "HGETALL", "HLEN", "HSCAN", "HEXISTS", "SMEMBERS", "ZCARD", "ZCOUNT",
    "ZRANGE", "ZREVRANGE", "ZRANGEBYSCORE", "XRANGE", "XREVRANGE", "XREAD", "LRANGE", "MULTI",
    "EXEC",
)  # fmt: skip
# What the agent loop reads outside its scripts (next retry due, idle check).
# (expanding a map reads its parent's output and definition: HGET, HMGET, ZRANGEBYSCORE)
AGENT_READS = ("HGET", "HMGET", "ZCARD", "ZRANGE", "ZRANGEBYSCORE")
# Storing the deployment's layout the first time (engine/store/layout.py): HSETNX, and
# EXISTS to refuse a shard count other than the one its workflows were pushed with.
LAYOUT = ("HSETNX", "EXISTS")
# The deployment's rate limits (engine/store/rate_limits.py): put and deleted by an
# operator, read at every push (HGETALL, in READS).
RATE_LIMITS = ("HSET", "HDEL")
# The scripts engine/runtime/agent.py runs: register and stop, claim, complete (a task's timeout
# too: Calls.time_out reports through complete), heartbeat, expand (a map's items), reap
# (housekeeping), waits (wait tasks' keeper, engine/runtime/wait_keeper.py), tasklog (what
# handlers wrote, progress) and rollup (run-time history). Never push, pause, release,
# cancel, retry or cleanup.
AGENT_SCRIPTS = (
    "register", "claim", "complete", "heartbeat", "reap", "stop", "expand", "waits", "tasklog",
    "rollup",
)  # fmt: skip
# (a retry expands a map it reset again; a scheduler pushes runs with tick: an agent with
# --scheduler needs the operator's scripts too)
OPERATOR_SCRIPTS = (
    "push", "pause", "release", "cancel", "retry", "cleanup", "expire", "expand", "template",
    "schedule", "tick", "heads", "signal", "child", "drain",
)  # fmt: skip
# The wait keeper's (engine/runtime/wait_keeper.py, a thread in every agent) when it starts, links,
# reports and cancels child runs (engine/runtime/child_runs.py): waits, push (a child run), child
# (count, link, end) and cancel (a child whose parent ended first, or that started for a
# task that moved on). An agent that starts child runs is one user of the agent and keeper
# roles; nothing else of the operator's, and not the sealed keys (trigger secrets).
KEEPER_SCRIPTS = ("waits", "push", "child", "cancel")
ROLE_SCRIPTS: dict[str, tuple[str, ...]] = {
    "agent": AGENT_SCRIPTS,
    "operator": OPERATOR_SCRIPTS,
    "reader": (),
    "keeper": KEEPER_SCRIPTS,
}
# Trigger secrets and schemes (the sealed keys): the operator, who puts triggers and whose
# user `redisflow serve` runs as.
SEALED_ROLES = ("operator",)

_NOPERM_COMMAND = re.compile(
    r"may not run EVALSHA of script (\w+)|may not run (\S+?);|to run the '([^']+)' command"
)

# The start-up check (missing_permissions): which of ARGV (COMMAND, COMMAND|sub, or
# EVALSHA|<sha>) this user may not run. Run with EVALSHA like every script, so every role
# that runs scripts allows its SHA. Redis 6.2 has no acl_check_cmd: {} there.
CHECK_SOURCE = """-- redisflow: the permissions in ARGV this user lacks
local out = {}
if not redis.acl_check_cmd then return out end
for k = 1, #ARGV do
  local cmd, sub = string.match(ARGV[k], '^([^|]+)|?(.*)$')
  local ok
  if sub == '' then ok = redis.acl_check_cmd(cmd)
  elseif cmd == 'EVALSHA' then ok = redis.acl_check_cmd(cmd, sub, '0')
  else ok = redis.acl_check_cmd(cmd, sub) end
  if not ok then out[#out + 1] = ARGV[k] end
end
return out
"""


def role_commands(role: str, cluster: bool = False) -> list[str]:
    """The commands ``role`` needs, sorted (``SCRIPT|LOAD`` names a subcommand); with
    ``cluster``, on a Redis Cluster. EVALSHA (per script: :func:`script_shas`) and SELECT
    (one database) are granted by first argument, beside these."""
    if role == "reader":
        wanted = {*BASE, *READS}
    elif role == "agent":
        wanted = {*BASE, *RUN_SCRIPTS, *AGENT_READS, *LAYOUT}
    elif role == "operator":
        wanted = {*BASE, *RUN_SCRIPTS, *READS, *LAYOUT, *RATE_LIMITS}
    elif role == "keeper":  # it reads runs and templates (READS), writes only by scripts
        wanted = {*BASE, *RUN_SCRIPTS, *READS}
    else:
        raise ValueError(f"unknown role {role!r}: one of {', '.join(ROLES)}")
    wanted.update(*(script_commands(s) for s in ROLE_SCRIPTS[role]))
    if cluster:
        wanted.update(CLUSTER)
        if "PUBLISH" in wanted:
            wanted.add("SPUBLISH")
    return sorted(wanted)


def script_variants(name: str, cluster: bool = False) -> list[str]:
    """The SHAs a client of this redisflow may send for script ``name``: on a single
    Redis, with the ``#!lua`` line (Redis 7) and without (6.2: the same code); on a
    cluster (Redis 7), the sharded-channel source."""
    if cluster:
        return [script_sha(script_source(name, shebang=True, sharded=True))]
    return [script_sha(script_source(name, shebang=s)) for s in (True, False)]


def script_shas(role: str, cluster: bool = False) -> list[str]:
    """Every SHA ``role`` may EVALSHA: its scripts' (:func:`script_variants`) and the
    start-up check's; none for a reader, which runs no script."""
    if role not in ROLE_SCRIPTS:
        raise ValueError(f"unknown role {role!r}: one of {', '.join(ROLES)}")
    names = ROLE_SCRIPTS[role]
    if not names:
        return []
    shas = [sha for name in names for sha in script_variants(name, cluster)]
    return [*shas, script_sha(CHECK_SOURCE)]


def check_namespace(namespace: str) -> str:
    """``namespace`` if an ACL key pattern can hold it (and its sealed keys no other's)."""
    if not namespace or any(c in namespace for c in f" *?[]\\{{}}{SEALED}"):
        raise ValueError(
            f"namespace {namespace!r} must be non-empty, without spaces or *?[]\\{{}}{SEALED}"
        )
    return namespace


def setuser_line(
    role: str | Sequence[str],
    namespace: str = DEFAULT_NAMESPACE,
    user: str | None = None,
    cluster: bool = False,
    db: int = 0,
) -> str:
    """The ``ACL SETUSER`` command that gives the user of ``role`` exactly its permissions
    (``cluster``: on a Redis Cluster, where it is run on every node: ACLs are per node;
    ``db``: the one database it may SELECT). Several roles make one user with all of
    theirs (an agent running a scheduler: agent and operator); it needs ``user``.

    It replaces the user's keys, channels and commands but keeps its password, so it can
    be run again after an upgrade (which it must be: it names each script by its SHA); a
    new user needs one (``ACL SETUSER NAME >secret``).
    """
    roles = [role] if isinstance(role, str) else list(dict.fromkeys(role))
    for r in roles:
        if r not in ROLE_SCRIPTS:
            raise ValueError(f"unknown role {r!r}: one of {', '.join(ROLES)}")
    check_namespace(namespace)
    if len(roles) != 1 and not user:
        raise ValueError("a user of several roles needs a name (--user)")
    name = user or f"{namespace}-{roles[0]}"
    if not name.strip() or any(c.isspace() for c in name):
        raise ValueError(f"user name {name!r} must be non-empty, without spaces")
    if db < 0 or (cluster and db != 0):
        raise ValueError(f"database {db} must be 0 or more (and 0 on a cluster)")
    parts = ["ACL", "SETUSER", name, "on", "resetkeys", f"~{namespace}:*"]
    if set(roles) & set(SEALED_ROLES):
        parts.append(f"~{namespace}{SEALED}*")
    parts += ["resetchannels", f"&{namespace}:*"]
    if set(roles) - {"agent", "keeper"}:  # the console's keyspace notifications (its database)
        parts.append(f"&__keyspace@{db}__:{namespace}:*")
    commands = sorted({c for r in roles for c in role_commands(r, cluster)})
    parts += ["-@all", *(f"+{c.lower()}" for c in commands)]
    parts.append(f"+select|{db}")
    shas = dict.fromkeys(sha for r in roles for sha in script_shas(r, cluster))
    parts += [f"+evalsha|{sha}" for sha in shas]
    return " ".join(parts)


def missing_permissions(engine: Engine, roles: tuple[str, ...] | list[str]) -> list[str]:
    """What the engine's user may not do of ``roles``, asked in one call (on a cluster, of
    one node): commands (``XADD``, ``SCRIPT|LOAD``), then ``EVALSHA <script>`` for each
    of this redisflow's scripts it may not run, or ``EVALSHA`` alone when it may not run
    the check itself (its ACL line is from another redisflow, or it runs no script).
    Redis 6.2 cannot tell which command: only a refused check is found there."""
    client: Any = engine.redis
    cluster = is_cluster(client)
    wanted: dict[str, str] = {}
    for role in roles:
        wanted.update((c, c) for c in role_commands(role, cluster))
        for name in ROLE_SCRIPTS[role]:
            wanted[f"EVALSHA|{engine.store.scripts.sha(name)}"] = f"EVALSHA {name}"
    if not cluster:
        db = int(client.connection_pool.connection_kwargs.get("db", 0) or 0)
        wanted[f"SELECT|{db}"] = f"SELECT {db}"
    try:
        found = client.register_script(CHECK_SOURCE)(args=list(wanted))
    except redis.exceptions.NoPermissionError:
        return ["EVALSHA"]
    return [wanted[c.decode() if isinstance(c, bytes) else str(c)] for c in found]


def denied_command(error: Exception) -> str | None:
    """The command a NOPERM error names (upper case; ``EVALSHA <script>`` for a script of
    this redisflow), or None when it names none."""
    m = _NOPERM_COMMAND.search(str(error))
    if m is None:
        return None
    if m.group(1):
        return f"EVALSHA {m.group(1)}"
    return (m.group(2) or m.group(3)).upper()


def permission_message(command: str | None, user: str | None) -> str:
    """One line for an operator: which user may not run what, and where to look."""
    who = f"Redis user {user or 'default'!r}"
    if command is None:
        return f"{who} lacks a permission redisflow needs (NOPERM): see `redisflow acl`"
    if command.startswith("EVALSHA"):
        _, _, script = command.partition(" ")
        what, it = (f"script {script}", "it") if script else ("scripts", "them")
        return (
            f"{who} may not run EVALSHA of this redisflow's {what} (NOPERM): its role does "
            f"not run {it}, or its ACL line is from another redisflow version: run "
            "`redisflow acl` again after an upgrade"
        )
    return f"{who} may not run {command} (NOPERM): grant it or see `redisflow acl`"
