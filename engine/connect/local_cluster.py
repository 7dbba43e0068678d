"""A private Redis Cluster on loopback, for developers and tests.

``redisflow server --cluster 3 [--replicas 1]`` runs one: ``masters`` redis-server
processes in cluster mode (each an :class:`~engine.connect.embedded.EmbeddedRedis`: a free port,
a temporary directory, dies with its parent), the 16,384 slots split in equal ranges over
the masters in port order, and ``replicas`` replicas of each master. It is built from
Python with CLUSTER SET-CONFIG-EPOCH / ADDSLOTS / MEET / REPLICATE, as
``redis-cli --cluster create`` does, so it needs nothing but the server binary (Redis 6.2
or 7.x).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import redis

from engine.connect.embedded import EmbeddedRedis, find_redis_server, free_port
from engine.errors import UnreachableError

SLOTS = 16384
NODE_TIMEOUT_MS = 3000  # how long a master may be silent before its replica takes over


def cluster_port() -> int:
    """A free loopback port whose cluster bus port (10,000 higher) is free too."""
    while True:
        port = free_port()
        if port > 55535:
            continue
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        return port


def slot_ranges(masters: int) -> list[tuple[int, int]]:
    """The slots of each master, first and last (inclusive), in equal ranges."""
    return [(k * SLOTS // masters, (k + 1) * SLOTS // masters - 1) for k in range(masters)]


class LocalCluster:
    """A Redis Cluster of ``masters`` masters with ``replicas`` replicas each.

    Example:
        >>> with LocalCluster(3) as cluster:
        ...     engine = Engine.connect(cluster.url)
    """

    def __init__(self, masters: int = 3, replicas: int = 0, binary: str | None = None) -> None:
        if masters < 1:
            raise ValueError("a cluster needs at least one master")
        if replicas < 0:
            raise ValueError("replicas must be 0 or more")
        self.masters = masters
        self.replicas = replicas
        self.binary = binary
        self.servers: list[EmbeddedRedis] = []

    @property
    def url(self) -> str:
        """``redis+cluster://`` URL of the first node (a client finds the others)."""
        return f"redis+cluster://127.0.0.1:{self.servers[0].port}"

    @property
    def ports(self) -> list[int]:
        """Every node's port: the masters first, then the replicas."""
        return [s.port for s in self.servers]

    def start(self, timeout: float = 30.0) -> LocalCluster:
        """Start every node, join them into one cluster and wait until it serves all slots."""
        binary = self.binary or find_redis_server()
        try:
            for _ in range(self.masters * (1 + self.replicas)):
                server = EmbeddedRedis(port=cluster_port(), binary=binary)
                server.extra_args = self._node_args(server.port)
                self.servers.append(server.start())
            self._form(time.monotonic() + timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _clients(self) -> list[redis.Redis]:
        return [redis.Redis(port=p, decode_responses=True) for p in self.ports]

    def _form(self, deadline: float) -> None:
        clients = self._clients()
        masters, replicas = clients[: self.masters], clients[self.masters :]
        for epoch, (client, (first, last)) in enumerate(
            zip(masters, slot_ranges(self.masters), strict=True), start=1
        ):
            _cluster(client, "SET-CONFIG-EPOCH", epoch)
            for at in range(first, last + 1, 2000):
                _cluster(client, "ADDSLOTS", *range(at, min(last, at + 1999) + 1))
        for client in clients[1:]:
            _cluster(client, "MEET", "127.0.0.1", self.ports[0])
        self._until(deadline, lambda: all(len(_nodes(c)) == len(clients) for c in clients))
        ids = [str(_cluster(c, "MYID")) for c in masters]
        for n, client in enumerate(replicas):
            _cluster(client, "REPLICATE", ids[n % self.masters])
        self._until(deadline, lambda: all(_ready(c) for c in clients))
        for c in clients:
            c.close()

    @staticmethod
    def _until(deadline: float, check: Callable[[], bool]) -> None:
        while not check():
            if time.monotonic() > deadline:
                raise UnreachableError("the local Redis Cluster did not form in time")
            time.sleep(0.05)

    def add_replica(self, master_port: int, timeout: float = 30.0) -> EmbeddedRedis:
        """Start one more node, join it to the cluster and make it a replica of the master
        on ``master_port`` (a dead node's replacement after a failover); returns once it
        has synced."""
        binary = self.binary or find_redis_server()
        server = EmbeddedRedis(port=cluster_port(), binary=binary)
        server.extra_args = self._node_args(server.port)
        self.servers.append(server.start())
        deadline = time.monotonic() + timeout
        with (
            redis.Redis(port=server.port, decode_responses=True) as node,
            redis.Redis(port=master_port, decode_responses=True) as master,
        ):
            _cluster(node, "MEET", "127.0.0.1", master_port)
            master_id = str(_cluster(master, "MYID"))
            self._until(deadline, lambda: any(master_id in n for n in _nodes(node)))
            _cluster(node, "REPLICATE", master_id)
            self._until(deadline, lambda: _ready(node))
        return server

    @staticmethod
    def _node_args(port: int) -> list[str]:
        return [
            "--cluster-enabled", "yes",
            "--cluster-config-file", f"nodes-{port}.conf",
            "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
            "--repl-diskless-sync-delay", "0",  # replicas sync at once
        ]  # fmt: skip

    def master_ports(self) -> list[int]:
        """The ports of the nodes that are masters now (after a failover, a replica's)."""
        out = []
        for port in self.ports:
            try:
                with redis.Redis(port=port, decode_responses=True) as c:
                    if c.info("replication")["role"] == "master":
                        out.append(port)
            except redis.ConnectionError:
                continue
        return out

    def stop(self) -> None:
        """Stop every node and remove their files."""
        for server in self.servers:
            server.stop()
        self.servers = []

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _cluster(client: redis.Redis, *args: object) -> Any:
    """``CLUSTER <args>`` on one node."""
    return client.execute_command("CLUSTER", *args)  # type: ignore[no-untyped-call]


def _nodes(client: redis.Redis) -> list[str]:
    text = str(_cluster(client, "NODES"))
    return [line for line in text.splitlines() if line.strip()]


def _ready(client: redis.Redis) -> bool:
    """The node sees every slot served, and (a replica) has synced with its master."""
    info = str(_cluster(client, "INFO"))
    if "cluster_state:ok" not in info or "cluster_slots_ok:16384" not in info:
        return False
    repl = client.info("replication")
    return repl["role"] == "master" or repl.get("master_link_status") == "up"
