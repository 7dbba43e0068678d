"""Watching a deployment live: the event channel plus keyspace notifications, as hints.

A :class:`Watch` is one pub/sub connection that carries the engine's lifecycle event
channel of every shard and, when the server allows it, Redis keyspace notifications
for a few chosen keys: the hashes of the workflows a caller is looking at (and, if
asked, the counters of every shard). Consumers (the console) treat everything as a hint that
something changed, and read the state through :class:`engine.Engine`.

Keyspace notifications are enabled with ``CONFIG SET notify-keyspace-events``, adding
only the flags needed (``K`` and ``h``) to those already set; a server that refuses
``CONFIG`` (managed Redis, ACLs) leaves the event channel alone in charge. Exact
channels are subscribed, never patterns, so the server matches each notification with
one dictionary lookup however busy it is.

Example:
    >>> with Watch(engine) as watch:
    ...     watch.watch_workflows(["12"])
    ...     for hint in watch.poll(timeout=1.0):
    ...         print(hint.events() if isinstance(hint, EventBatch) else hint)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import redis

from engine.client import Engine
from engine.core.model import Event
from engine.store.codec import brief_batch, decode_batch

KEYSPACE_FLAGS = "Kh"  # keyspace channel, hash commands


@dataclass(frozen=True)
class KeyChange:
    """A keyspace notification: a watched key was written.

    Attributes:
        kind: ``"workflow"`` (a watched workflow's hash) or ``"stats"`` (counters).
        wid: the workflow id for ``"workflow"``, else ``None``.
        op: the Redis command family that wrote it (``hset``, ``hincrby``, ``del``...).
    """

    kind: str
    wid: str | None
    op: str


@dataclass
class EventBatch:
    """One published batch of lifecycle events (one script call), decoded on demand.

    :meth:`brief` is cheap enough for thousands of events a second; :meth:`events`
    builds full :class:`~engine.Event` records for the few a reader shows.
    """

    body: str
    _data: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def data(self) -> dict[str, Any]:
        if self._data is None:
            self._data = json.loads(self.body)
        return self._data

    @property
    def ts(self) -> float:
        """When the batch was written, in epoch seconds."""
        return float(self.data["ts"]) / 1000.0

    def __len__(self) -> int:
        return sum(
            len(e[3][1]) if e[0].startswith("item.") and type(e[3][1]) is list
            else e[3][0].count(",") + 1 if e[0].startswith("tasks.")
            else 1
            for e in self.data["ev"]
        )  # fmt: skip

    def brief(self) -> Iterator[tuple[str, str, int]]:
        """``(kind, workflow id, task index or -1)`` of each event, in order.

        Kinds are those of :class:`~engine.Event` (``task.claimed``, ``agent.dead``...);
        agent events have an empty workflow id.
        """
        return brief_batch(self.data)

    def events(self) -> list[Event]:
        """The full events of the batch, in order."""
        return decode_batch(self.body)


Hint = EventBatch | KeyChange


def enable_keyspace_events(engine: Engine) -> bool:
    """Make sure the server sends the keyspace notifications a :class:`Watch` needs.

    Adds ``K`` and ``h`` to ``notify-keyspace-events`` if missing, keeping every flag
    already set. Returns ``False`` when the server does not allow ``CONFIG``.
    """
    return engine.store.reads.enable_keyspace_events(KEYSPACE_FLAGS)


class Watch:
    """One pub/sub connection with the event channels and keyspace notifications.

    Not thread-safe: create, poll and change subscriptions from one thread.

    Args:
        engine: the deployment to watch.
        keyspace: also subscribe to keyspace notifications (when the server allows).
        stats: also receive a notification per counter update (one per script call,
            as many as event batches: off by default, the events say as much).
    """

    def __init__(self, engine: Engine, keyspace: bool = True, stats: bool = False) -> None:
        self.engine = engine
        self.connects = 0
        self._pubsub = engine.store.reads.pubsub([])
        self._shards = engine.keys.all_shards()
        self._ks_prefix = engine.store.reads.keyspace_channel("")
        self._event_channels = {s.event_channel for s in self._shards}
        self._stats_channels = {self._ks_prefix + s.stats for s in self._shards}
        self._workflow_channels: dict[str, str] = {}
        self.keyspace = keyspace and enable_keyspace_events(engine)
        channels = list(self._event_channels)
        if self.keyspace and stats:
            channels += list(self._stats_channels)
        self._pubsub.subscribe(*channels)
        conn = self._pubsub.connection
        if conn is not None:
            # redis-py reconnects and resubscribes silently; count it so callers resync.
            conn.register_connect_callback(self._on_connect)

    def _on_connect(self, connection: Any) -> None:
        self.connects += 1

    def watch_workflows(self, wids: Iterable[str]) -> None:
        """Receive keyspace notifications for exactly these workflows' hashes."""
        if not self.keyspace:
            return
        wanted = {self._ks_prefix + self.engine.keys.shard_of(w).workflow(w): str(w) for w in wids}
        gone = [c for c in self._workflow_channels if c not in wanted]
        new = [c for c in wanted if c not in self._workflow_channels]
        if gone:
            self._pubsub.unsubscribe(*gone)
        if new:
            self._pubsub.subscribe(*new)
        self._workflow_channels = wanted

    def poll(self, timeout: float = 0.5, limit: int = 500) -> list[Hint]:
        """Wait up to ``timeout`` seconds for a message, then take what else is waiting.

        Raises :class:`redis.ConnectionError` when Redis is unreachable.
        """
        hints: list[Hint] = []
        msg = self._pubsub.get_message(timeout=timeout)
        taken = 0
        while msg is not None and taken < limit:
            taken += 1
            self._decode(msg, hints)
            msg = self._pubsub.get_message(timeout=0.0)
        if msg is not None:
            self._decode(msg, hints)
        return hints

    def _decode(self, msg: dict[str, Any], hints: list[Hint]) -> None:
        if msg.get("type") != "message":
            return
        channel = msg["channel"]
        if isinstance(channel, bytes):
            channel = channel.decode()
        data = msg["data"]
        if channel in self._event_channels:
            batch = EventBatch(data if isinstance(data, str) else data.decode())
            try:
                batch.data["ev"]
            except (ValueError, KeyError, TypeError):
                return  # not an event batch: ignore, it is only a hint
            hints.append(batch)
        elif channel in self._stats_channels:
            hints.append(KeyChange("stats", None, str(data)))
        elif channel in self._workflow_channels:
            hints.append(KeyChange("workflow", self._workflow_channels[channel], str(data)))

    def close(self) -> None:
        """Unsubscribe and close the connection."""
        try:
            self._pubsub.close()
        except redis.RedisError:
            pass

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
