"""Pub/sub on a Redis Cluster with sharded channels (Redis 7: SSUBSCRIBE / SPUBLISH).

A sharded channel lives on the master of its slot: a subscriber holds one connection per
master it listens to, and each message is delivered by that master alone (a plain PUBLISH
in a cluster is sent to every node). :class:`ShardedPubSub` gives the engine's readers
the plain pub/sub calls they use (``subscribe``, ``get_message``...) over redis-py's
``ClusterPubSub``'s sharded ones.

When a channel's slot moves to another master (a shard moved: ``store/shard_moves.py``),
the old master ends its subscriptions there (a ``sunsubscribe`` the client did not ask
for, or a ``MOVED`` reply): the subscriptions are made again on the slot's new master,
and a wake-up is returned, since one may have been published in between.
"""

from __future__ import annotations

import time
from typing import Any

import redis

POLL_S = 0.02  # how long each master's connection is waited on, in turn


class ShardedPubSub:
    """Sharded subscriptions over every master, read as one stream of messages."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._ps = client.pubsub()
        self._wanted: set[str] = set()
        self.connection = None  # reconnects are per master: see ``connects``

    def subscribe(self, *channels: str) -> None:
        if channels:
            self._wanted.update(channels)
            self._ps.ssubscribe(*channels)

    def unsubscribe(self, *channels: str) -> None:
        if channels:
            self._wanted.difference_update(channels)
            self._ps.sunsubscribe(*channels)

    def _resubscribe(self) -> dict[str, Any]:
        """Subscribe again on the masters that own the channels now. Returns a message of
        type ``resubscribed``: not one of the channels' (readers of events skip it), but a
        wake-up for those that wait on any (one may have been published meanwhile)."""
        self._ps.close()
        self._client.nodes_manager.initialize()  # the slot map, as a MOVED would refresh it
        self._ps = self._client.pubsub()
        if self._wanted:
            self._ps.ssubscribe(*sorted(self._wanted))
        return {"type": "resubscribed", "pattern": None, "channel": None, "data": None}

    def get_message(self, timeout: float = 0.0) -> dict[str, Any] | None:
        """The next message of any master, waiting up to ``timeout`` seconds; the
        messages come as plain ones (type ``message``), and ``resubscribed`` after a
        channel's slot moved."""
        deadline = time.monotonic() + timeout
        while True:
            if not self._ps.node_pubsub_mapping:
                time.sleep(max(0.0, min(POLL_S, deadline - time.monotonic())))
                msg = None
            else:
                left = max(0.0, deadline - time.monotonic())
                slice_s = min(left, POLL_S) / max(1, len(self._ps.node_pubsub_mapping))
                try:
                    msg = self._ps.get_sharded_message(timeout=slice_s)
                except (redis.exceptions.MovedError, redis.exceptions.AskError):
                    return self._resubscribe()
                except redis.exceptions.ResponseError as e:
                    # A connection redis-py opened again under the subscription: the
                    # reply to its CLIENT SETINFO (Redis < 7.2 knows none) came to us.
                    if "SETINFO" not in str(e):
                        raise
                    return self._resubscribe()
            if msg is not None:
                kind = msg.get("type")
                if kind == "smessage":
                    return {**msg, "type": "message"}
                if kind == "sunsubscribe" and msg.get("channel") in self._wanted:
                    return self._resubscribe()  # its slot moved to another master
            if time.monotonic() >= deadline:
                return None

    def close(self) -> None:
        self._ps.close()
