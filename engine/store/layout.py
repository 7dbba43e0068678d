"""A deployment's layout: how many shards, and each shard's hash tag.

Every client must agree on both (a workflow's shard is ``wid % shards``), so they are
stored in Redis by the first client that sets them (``HSETNX`` on one field: two first
clients cannot both win) and read by every client after it. A count given that differs
from the stored one is refused.

On a single Redis nothing is stored unless a count is given: the default of one shard is
the layout of every deployment that never chose. On a Redis Cluster the first client
stores the count (default: one shard per master) and tags whose slots spread the shards
evenly over the masters: shard ``i`` on the ``i % masters``-th master in slot order.
"""

from __future__ import annotations

from typing import Any, cast

import redis

from ..errors import DefinitionError
from .keys import Keyspace

FIELD = "shards"
MAX_SHARDS = 1024


def has_sharded_pubsub(client: Any) -> bool:
    """Whether a cluster's node knows SPUBLISH (Redis 7.0+; every node runs the same in
    practice), asked with ``COMMAND INFO`` (which a cluster client's ACL role has) rather
    than INFO (which none has)."""
    pool = client.get_default_node().redis_connection.connection_pool
    conn = pool.get_connection()
    try:  # unparsed: redis-py's COMMAND parser cannot read 6.2's [nil] for an unknown name
        conn.send_command("COMMAND", "INFO", "SPUBLISH")
        reply = conn.read_response()
    finally:
        pool.release(conn)
    return bool(reply) and reply[0] is not None


def is_cluster(client: Any) -> bool:
    """Whether ``client`` speaks to a Redis Cluster (``redis.cluster.RedisCluster``)."""
    from redis.cluster import RedisCluster

    return isinstance(client, RedisCluster)


def masters_in_slot_order(client: Any) -> list[str]:
    """The cluster's masters (``host:port``) ordered by the first slot each serves."""
    first: dict[str, int] = {}
    for slot, nodes in client.nodes_manager.slots_cache.items():
        name = nodes[0].name
        first[name] = min(slot, first.get(name, slot))
    return sorted(first, key=first.__getitem__)


def spread_tags(client: Any, namespace: str, shards: int) -> tuple[str, ...]:
    """A hash tag per shard: ``<namespace>:i`` when its slot is on master ``i % masters``
    (in slot order), else the first ``<namespace>:i.<k>`` that is."""
    masters = masters_in_slot_order(client)
    owner = {s: nodes[0].name for s, nodes in client.nodes_manager.slots_cache.items()}
    tags = []
    for i in range(shards):
        target = masters[i % len(masters)]
        k = 0
        while True:
            tag = f"{namespace}:{i}" if k == 0 else f"{namespace}:{i}.{k}"
            if owner.get(client.keyslot(tag)) == target:
                break
            k += 1
        tags.append(tag)
    return tuple(tags)


def _parse(text: str, where: str) -> tuple[int, tuple[str, ...]]:
    parts = text.split()
    try:
        n = int(parts[0])
    except (IndexError, ValueError):
        raise DefinitionError(f"{where} holds {text!r}, not a shard count") from None
    tags = tuple(parts[1:])
    if tags and len(tags) != n:
        raise DefinitionError(f"{where} holds {n} shards but {len(tags)} tags")
    return n, tags


def resolve(client: Any, namespace: str, shards: int | None) -> Keyspace:
    """The deployment's keyspace: the stored layout if any (``shards``, when given, must
    match it: :class:`DefinitionError` otherwise), else a new one, stored when it is not
    the single-Redis default."""
    if shards is not None and not 1 <= shards <= MAX_SHARDS:
        raise DefinitionError(f"--shards must be 1 to {MAX_SHARDS}, not {shards}")
    base = Keyspace(namespace, 1)
    key = base.layout
    try:
        stored = cast("str | None", client.hget(key, FIELD))
    except redis.exceptions.NoPermissionError:
        # a user outside this namespace: every later call is refused the same way
        return Keyspace(namespace, shards or 1)
    except (redis.ConnectionError, redis.TimeoutError):
        # Redis away (a console started before it): the count given, or the single-Redis
        # default; every later call fails the same way until it is back
        return Keyspace(namespace, shards or 1)
    cluster = is_cluster(client)
    if stored is None and (shards is not None or cluster):
        n = shards or (len(masters_in_slot_order(client)) if cluster else 1)
        tags = spread_tags(client, namespace, n) if cluster else ()
        text = " ".join([str(n), *tags])
        try:
            if not cluster and n != 1 and client.exists(base.shard(0).seq):
                raise DefinitionError(
                    f"namespace {namespace!r} already holds workflows pushed with 1 shard: "
                    f"it cannot have {n}"
                )
            if client.hsetnx(key, FIELD, text):
                return Keyspace(namespace, n, tags)
        except redis.exceptions.NoPermissionError:
            return Keyspace(namespace, n, tags)  # a reader: use it, store nothing
        stored = cast("str | None", client.hget(key, FIELD))  # another client was first
    if stored is None:
        return Keyspace(namespace, 1)
    n, tags = _parse(stored, f"Redis key {key}")
    if shards is not None and shards != n:
        raise DefinitionError(
            f"--shards {shards} but namespace {namespace!r} has {n} shards (stored in {key})"
        )
    return Keyspace(namespace, n, tags)
