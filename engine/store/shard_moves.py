"""Moving a shard to another master of a Redis Cluster, whole and at once.

A shard is one hash tag, so one slot, and its scripts touch many keys of that slot, most
of them undeclared. A standard resharding (``redis-cli --cluster reshard``) moves a slot
a few keys at a time: meanwhile a script on the source finds some of its keys gone (reads
them as empty, writes stray copies), and a script sent to the target (ASK) finds the keys
not moved yet missing. So a shard moves in ONE script on its master (``lua/move_slot.lua``):
every key of the slot MIGRATEd to the target, then the slot marked MIGRATING, with no other
command run on the source in between. In Redis's own order around it:

1. the target: ``CLUSTER SETSLOT <slot> IMPORTING <source>`` (it will serve the slot to
   clients that say ASKING);
2. the source: the script; after it every command for the slot gets ``ASK`` (its keys are
   all gone), and the client asks the target, which has them all;
3. ``CLUSTER SETSLOT <slot> NODE <target>`` on the target, the source, then every other
   master: clients now get ``MOVED`` and refresh their slot map.

The source serves nothing else while the script runs: :func:`move_shard` reports how long
(12 to 24 µs a key on loopback: docs/cluster.md). A move cut short (a MIGRATE failing)
leaves the slot MIGRATING; the same move run again finishes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any

import redis

from ..errors import DefinitionError, NotFoundError, StateError
from .keys import Keyspace
from .layout import is_cluster

BATCH = 500  # keys per MIGRATE
MIGRATE_TIMEOUT_MS = 10_000  # one MIGRATE's I/O timeout


@dataclass
class ClusterNode:
    """One node as ``CLUSTER NODES`` shows it."""

    id: str
    address: str  # host:port
    master: bool
    failed: bool
    slots: set[int] = field(default_factory=set)
    migrating: dict[int, str] = field(default_factory=dict)  # slot -> target id
    importing: dict[int, str] = field(default_factory=dict)  # slot -> source id

    @property
    def host(self) -> str:
        return self.address.rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])


@dataclass(frozen=True)
class ShardPlace:
    """Where a shard lives: its tag, slot, master and how many keys the slot holds."""

    shard: int
    tag: str
    slot: int
    master: str  # host:port
    keys: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class MoveReport:
    """What a move did: the keys moved and how long the source served nothing else."""

    shard: int
    slot: int
    source: str
    target: str
    keys: int
    blocked_s: float  # the script on the source, seen from this client
    total_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "shard": self.shard,
            "slot": self.slot,
            "from": self.source,
            "to": self.target,
            "keys": self.keys,
            "blocked_ms": round(self.blocked_s * 1000, 1),
            "total_ms": round(self.total_s * 1000, 1),
        }


def parse_nodes(text: str) -> list[ClusterNode]:
    """``CLUSTER NODES`` text as nodes (the slots a node serves, migrating, importing)."""
    nodes = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 8:
            continue
        flags = parts[2].split(",")
        node = ClusterNode(
            id=parts[0],
            address=parts[1].split("@", 1)[0],
            master="master" in flags,
            failed="fail" in flags or "noaddr" in flags,
        )
        for item in parts[8:]:
            if item.startswith("["):
                slot, arrow, other = item.strip("[]").partition("->-")
                if arrow:
                    node.migrating[int(slot)] = other
                else:
                    slot, _, other = item.strip("[]").partition("-<-")
                    node.importing[int(slot)] = other
            elif "-" in item:
                first, last = item.split("-")
                node.slots.update(range(int(first), int(last) + 1))
            else:
                node.slots.add(int(item))
        nodes.append(node)
    return nodes


def _cluster(node: redis.Redis, *args: Any) -> Any:
    return node.execute_command("CLUSTER", *args)  # type: ignore[no-untyped-call]


class ShardMoves:
    """Shard placement on a Redis Cluster: where each shard is, and moving one."""

    def __init__(self, client: Any, keys: Keyspace) -> None:
        if not is_cluster(client):
            raise DefinitionError(
                "not a Redis Cluster: name one with --url redis+cluster://HOST:PORT (or --cluster)"
            )
        self.client = client
        self.keys = keys
        self._opened: list[redis.Redis] = []

    def node(self, address: str) -> redis.Redis:
        """A plain client of one node (a master with no slots yet included: the cluster
        client knows only the nodes that serve slots)."""
        host, _, port = address.rpartition(":")
        known = self.client.get_node(host=host, port=int(port))
        if known is not None and known.redis_connection is not None:
            return known.redis_connection  # type: ignore[no-any-return]
        pool = self.client.get_default_node().redis_connection.connection_pool
        kwargs = {**pool.connection_kwargs, "host": host, "port": int(port)}
        opened = redis.Redis(
            connection_pool=redis.ConnectionPool(connection_class=pool.connection_class, **kwargs)
        )
        self._opened.append(opened)
        return opened

    def nodes(self) -> list[ClusterNode]:
        """Every node, from a master's own view."""
        default = self.client.get_default_node()
        return parse_nodes(str(_cluster(self.node(default.name), "NODES")))

    def _owner(self, nodes: list[ClusterNode], slot: int) -> ClusterNode:
        for n in nodes:
            if n.master and slot in n.slots:
                return n
        raise StateError(f"no master serves slot {slot}: the cluster is not ok")

    def places(self) -> list[ShardPlace]:
        """Every shard: tag, slot, master and the slot's key count."""
        nodes = self.nodes()
        out = []
        for shard in self.keys.all_shards():
            slot = int(self.client.keyslot(shard.seq))
            owner = self._owner(nodes, slot)
            count = int(_cluster(self.node(owner.address), "COUNTKEYSINSLOT", slot))
            out.append(ShardPlace(shard.shard, shard.hash_tag, slot, owner.address, count))
        return out

    def move(
        self,
        shard_no: int,
        target: str,
        batch: int = BATCH,
        timeout_ms: int = MIGRATE_TIMEOUT_MS,
        between: Callable[[], object] | None = None,
    ) -> MoveReport:
        """Move shard ``shard_no`` to the master at ``target`` (``host:port``), while
        agents and pushers run. Refuses, changing nothing, when the shard or the target
        master does not exist or the target has the shard already. ``between`` is called
        once the keys have moved and before the masters hear of the slot's new owner (a
        test's clients meet ASK then)."""
        if not 0 <= shard_no < self.keys.shards:
            raise NotFoundError(
                f"shard {shard_no} does not exist: namespace {self.keys.namespace!r} has "
                f"{self.keys.shards} shards (0 to {self.keys.shards - 1})"
            )
        shard = self.keys.shard(shard_no)
        slot = int(self.client.keyslot(shard.seq))
        nodes = self.nodes()
        masters = [n for n in nodes if n.master and not n.failed]
        to = next((n for n in masters if n.address == target), None)
        if to is None:
            names = ", ".join(sorted(n.address for n in masters))
            raise NotFoundError(f"no master at {target} in the cluster (its masters: {names})")
        source = self._owner(nodes, slot)
        if source.id == to.id:
            raise StateError(f"shard {shard_no} (slot {slot}) is on {target} already")
        src, dst = self.node(source.address), self.node(to.address)
        src_view = parse_nodes(str(_cluster(src, "NODES")))
        under_way = next((n.migrating.get(slot) for n in src_view if slot in n.migrating), None)
        if under_way is not None and under_way != to.id:
            other = next((n.address for n in nodes if n.id == under_way), under_way)
            raise StateError(
                f"slot {slot} of shard {shard_no} is being moved to {other}: "
                f"finish that move first (redisflow cluster move {shard_no} --to {other})"
            )
        if "cluster_state:ok" not in str(_cluster(dst, "INFO")):
            raise StateError(
                f"{target} does not see the cluster as ok yet (CLUSTER INFO): a node just "
                "added needs a few seconds to learn the others"
            )
        started = time.perf_counter()
        _cluster(dst, "SETSLOT", slot, "IMPORTING", source.id)
        kw = src.connection_pool.connection_kwargs
        auth = [kw.get("username") or "", kw["password"]] if kw.get("password") else []
        script = (resources.files("engine.store") / "lua" / "move_slot.lua").read_text("utf-8")
        t0 = time.perf_counter()
        try:
            moved = src.eval(
                script, 1, shard.seq, slot, to.host, to.port, to.id, batch, timeout_ms, *auth
            )
        except redis.ResponseError as e:
            if "RFMOVE" not in str(e):
                raise
            detail = str(e).split("RFMOVE ", 1)[1].split(" script:")[0]
            raise StateError(
                f"moving shard {shard_no} to {target} stopped: {detail}; the slot stays "
                f"MIGRATING: run the same move again to finish it"
            ) from None
        blocked = time.perf_counter() - t0
        if between is not None:
            between()
        # Redis's order: the target first (it owns the slot, bumps its epoch), the source,
        # then every other master (else they redirect to the source until gossip tells them)
        _cluster(dst, "SETSLOT", slot, "NODE", to.id)
        _cluster(src, "SETSLOT", slot, "NODE", to.id)
        for n in masters:
            if n.id not in (source.id, to.id):
                try:
                    _cluster(self.node(n.address), "SETSLOT", slot, "NODE", to.id)
                except redis.RedisError:
                    pass  # gossip carries the new owner there too
        return MoveReport(
            shard_no, slot, source.address, to.address, int(moved), blocked,
            time.perf_counter() - started,
        )  # fmt: skip

    def close(self) -> None:
        """Close the clients opened for nodes the cluster client does not know."""
        for c in self._opened:
            c.close()
            c.connection_pool.disconnect()
        self._opened = []
