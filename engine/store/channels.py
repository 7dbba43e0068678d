"""Pub/sub on a Redis Cluster with sharded channels (Redis 7: SSUBSCRIBE / SPUBLISH).

A sharded channel lives on the master of its slot: a subscriber holds one connection per
master it listens to, and each message is delivered by that master alone (a plain PUBLISH
in a cluster is sent to every node). :class:`ShardedPubSub` gives the engine's readers
the plain pub/sub calls they use (``subscribe``, ``get_message``...) over redis-py's
``ClusterPubSub``'s sharded ones.
"""

from __future__ import annotations

import time
from typing import Any

POLL_S = 0.02  # how long each master's connection is waited on, in turn


class ShardedPubSub:
    """Sharded subscriptions over every master, read as one stream of messages."""

    def __init__(self, client: Any) -> None:
        self._ps = client.pubsub(ignore_subscribe_messages=True)
        self.connection = None  # reconnects are per master: see ``connects``

    def subscribe(self, *channels: str) -> None:
        if channels:
            self._ps.ssubscribe(*channels)

    def unsubscribe(self, *channels: str) -> None:
        if channels:
            self._ps.sunsubscribe(*channels)

    def get_message(self, timeout: float = 0.0) -> dict[str, Any] | None:
        """The next message of any master, waiting up to ``timeout`` seconds; the
        messages come as plain ones (type ``message``)."""
        deadline = time.monotonic() + timeout
        while True:
            if not self._ps.node_pubsub_mapping:
                time.sleep(max(0.0, min(POLL_S, deadline - time.monotonic())))
                msg = None
            else:
                left = max(0.0, deadline - time.monotonic())
                slice_s = min(left, POLL_S) / max(1, len(self._ps.node_pubsub_mapping))
                msg = self._ps.get_sharded_message(timeout=slice_s)
            if msg is not None:
                if msg.get("type") == "smessage":
                    msg = {**msg, "type": "message"}
                return dict(msg)
            if time.monotonic() >= deadline:
                return None

    def close(self) -> None:
        self._ps.close()
