"""The body of a benchmark task: nothing, simulated work, or one Redis round trip.

``redisflow-demo`` and ``demos/compare.py`` run these, so every system measured does the
same work per task. ``--task-io`` makes each task do what real handlers do, I/O: one
``SET key value GET`` (a write and a read in one round trip) on a connection of the
handler's own to the same Redis, on a key of its own (one per worker process, so the
benchmark's memory per task is the engine's alone).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import redis
import redis.asyncio

from engine import Task, TaskFailed
from engine.connect.urls import close_client, connection_defaults, is_cluster_url, open_client


def _timeouts(url: str) -> dict[str, Any]:
    """The engine's timeouts and keepalive (not on a unix socket) for a client of ours."""
    return connection_defaults(tcp=not url.startswith("unix:"))


def node_url(url: str, key: str) -> str:
    """A plain ``redis://`` URL for ``key``'s Redis: on a cluster, the master that owns its
    slot (user and password kept), so the round trip is one hop as on a single Redis."""
    if not is_cluster_url(url):
        return url
    cluster = open_client(url)
    try:
        node = cluster.get_node_from_key(key)  # type: ignore[attr-defined]
    finally:
        close_client(cluster)
    parts = urlsplit(url)
    auth = parts.netloc.rpartition("@")[0]
    scheme = parts.scheme.split("+")[0]
    return f"{scheme}://{auth + '@' if auth else ''}{node.host}:{node.port}"


class RoundTrip:
    """One ``SET key value GET`` per call, on a connection of the calling thread's own.

    It talks to the connection directly (send the command, read the reply): a round trip
    through ``redis.Redis.set`` costs about 120 us of CPU in redis-py 8.1 (its per-command
    bookkeeping) on the benchmark machine, more than the engine spends on a task, and
    would measure the client library rather than the systems compared. The I/O, a
    blocking round trip to Redis, is the same.
    """

    def __init__(self, url: str, key: str) -> None:
        self.client = redis.Redis.from_url(node_url(url, key), **_timeouts(url))
        self.key = key
        self._local = threading.local()

    def __call__(self, value: str) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self.client.connection_pool.get_connection()
        conn.send_command("SET", self.key, value, "GET")
        return conn.read_response()


class AsyncRoundTrip:
    """:class:`RoundTrip` for ``async`` handlers; its client is made on first use, in
    the event loop that runs the handlers."""

    def __init__(self, url: str, key: str) -> None:
        self.url = node_url(url, key)
        self.key = key
        self.client: redis.asyncio.Redis | None = None

    async def __call__(self, value: str) -> Any:
        if self.client is None:
            self.client = redis.asyncio.Redis.from_url(self.url, **_timeouts(self.url))
        return await self.client.set(self.key, value, get=True)


def bench_handler(
    *,
    task_ms: float = 0.0,
    fail_rate: float = 0.0,
    seed: int = 0,
    io: tuple[str, str] | None = None,
    is_async: bool = False,
) -> Callable[[Task], Any] | Callable[[Task], Awaitable[Any]]:
    """A benchmark handler: ``task_ms`` of sleep, a failure with probability
    ``fail_rate``, and with ``io`` (url, key) one Redis round trip; ``async def`` when
    ``is_async``."""
    rng = random.Random(seed)
    delay = task_ms / 1000.0

    def check() -> None:
        if fail_rate and rng.random() < fail_rate:
            raise TaskFailed("injected failure (--fail-rate)")

    if is_async:
        aio = AsyncRoundTrip(*io) if io else None

        async def async_handler(task: Task) -> None:
            if delay:
                await asyncio.sleep(delay)
            if aio is not None:
                await aio(task.idempotency_key)
            check()

        return async_handler
    sio = RoundTrip(*io) if io else None

    def handler(task: Task) -> None:
        if delay:
            time.sleep(delay)
        if sio is not None:
            sio(task.idempotency_key)
        check()

    return handler
