"""Writes followed by ``WAIT``: how many replicas have them when the call returns.

``WAIT numreplicas timeout`` waits for the writes of the connection it is sent on, so it
must follow the script calls on that very connection. On one Redis that is a plain
pipeline, ``EVALSHA ...; WAIT N T``. On a cluster redis-py's pipeline routes each command
by its key and WAIT has none: the calls are grouped by the master that owns their slot
and each group goes through that node's own client, ``EVALSHA ...; WAIT N T`` in one
pipeline. A call answered ``MOVED`` (a failover or a resharding moved its slot: it did
not run) is sent again where the reply says, the slot map patched as redis-py does; ``ASK``
(a slot half-way through a move) is sent again after ``ASKING``. A dropped connection
refreshes the slot map and is raised, as the cluster client does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis
from redis.exceptions import AskError, MovedError

from .layout import is_cluster

# One command to send: the key that routes it, then the command and its arguments.
Command = tuple[str, Sequence[Any]]
REDIRECTS = 5  # MOVED/ASK rounds before a call's redirection error is returned as is


def send_waited(
    client: redis.Redis, commands: Sequence[Command], replicas: int, timeout_ms: int
) -> tuple[list[Any], set[int]]:
    """Send ``commands``, each group followed by ``WAIT replicas timeout_ms`` on its
    connection. Returns the replies in order (errors as exception objects) and the
    indexes of the commands that ran but whose WAIT counted fewer than ``replicas``."""
    if not is_cluster(client):
        return _on_connection(client, list(enumerate(commands)), replicas, timeout_ms, False)
    replies: list[Any] = [None] * len(commands)
    short: set[int] = set()
    todo: list[tuple[int, Command]] = list(enumerate(commands))
    ask: dict[int, AskError] = {}
    for round_no in range(REDIRECTS + 1):
        groups: dict[str, tuple[Any, list[tuple[int, Command]], bool]] = {}
        for n, command in todo:
            node, name, asking = None, "", False
            if n in ask:  # the slot is moving: this call goes where ASK says, after ASKING
                e = ask[n]
                node = client.nodes_manager.get_node(host=e.host, port=e.port)  # type: ignore[attr-defined]
                name, asking = f"ask:{e.host}:{e.port}", True
            if node is None:
                node = client.get_node_from_key(command[0])  # type: ignore[attr-defined]
                name, asking = str(node.name), False
            groups.setdefault(name, (node, [], asking))[1].append((n, command))
        todo, ask = [], {}
        for node, members, asking in groups.values():
            conn = client.get_redis_connection(node)  # type: ignore[attr-defined]
            try:
                got, fell = _on_connection(conn, members, replicas, timeout_ms, asking)
            except (redis.ConnectionError, redis.TimeoutError):
                refresh_slots(client, str(node.name))
                raise
            short.update(fell)
            for (n, command), reply in zip(members, got, strict=True):
                if isinstance(reply, MovedError) and round_no < REDIRECTS:
                    client.nodes_manager.move_slot(reply)  # type: ignore[attr-defined]
                    todo.append((n, command))
                elif isinstance(reply, AskError) and round_no < REDIRECTS:
                    ask[n] = reply
                    todo.append((n, command))
                else:
                    replies[n] = reply
        if not todo:
            break
    return replies, short


def _on_connection(
    client: redis.Redis,
    members: list[tuple[int, Command]],
    replicas: int,
    timeout_ms: int,
    asking: bool,
) -> tuple[list[Any], set[int]]:
    """One pipeline on one node: the commands (each after ASKING if ``asking``), then
    WAIT. The replies, and the indexes of the commands that ran but fell short."""
    pipe = client.pipeline(transaction=False)
    for _, (_, command) in members:
        if asking:
            pipe.execute_command("ASKING")  # type: ignore[no-untyped-call]
        pipe.execute_command(*command)  # type: ignore[no-untyped-call]
    pipe.execute_command("WAIT", replicas, timeout_ms)  # type: ignore[no-untyped-call]
    out = list(pipe.execute(raise_on_error=False))
    acked = out.pop()
    if isinstance(acked, Exception):  # WAIT itself refused (an ACL without it)
        raise acked
    replies = out[1::2] if asking else out
    ran = [n for (n, _), r in zip(members, replies, strict=True) if not isinstance(r, Exception)]
    return replies, set(ran) if int(acked) < replicas else set()


def refresh_slots(client: Any, failed: str | None = None) -> None:
    """After a dropped connection to a cluster node: the slot map read again (the failed
    node asked last), so that the next try goes to the replica promoted meanwhile.
    redis-py's cluster pipeline does not always do it: a pooled connection that fails to
    reconnect while sending leaves the map as it was, and a retry goes to the dead node
    for as long as it is retried."""
    try:
        if failed is not None:
            client.nodes_manager.move_node_to_end_of_cached_nodes(failed)
        client.nodes_manager.initialize(last_failed_node_name=failed)
    except (redis.RedisError, AttributeError):
        pass  # the cluster is still failing over: the next call tries again
