"""Lifecycle events, live: a background listener on the event channels.

Every script call that changes state writes one batch of events to its shard's capped
stream and publishes the same text on the shard's event channel; the batch format is
:mod:`engine.store.codec`'s (:func:`~engine.store.codec.decode_batch`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import redis

from engine.core.model import Event
from engine.store.codec import decode_batch

if TYPE_CHECKING:
    from engine.store.reads import Reads

log = logging.getLogger("redisflow.events")

__all__ = ["EventListener", "decode_batch"]


class EventListener:
    """A background thread that calls ``callback`` with every event published live.

    Pub/sub is a hint: messages can be lost on reconnect, so callers that must not miss
    an outcome (e.g. :meth:`engine.Engine.wait`) also read the state.
    """

    def __init__(
        self, reads: Reads, channels: list[str], callback: Callable[[Event], None]
    ) -> None:
        self._pubsub = reads.pubsub(channels)
        self._callback = callback
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="redisflow-events", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                msg = self._pubsub.get_message(timeout=0.5)
            except (redis.ConnectionError, redis.TimeoutError):
                self._stop.wait(0.5)
                continue
            except (TypeError, AttributeError, ValueError):
                # close() timed out waiting for this thread (a loaded machine) and closed
                # the connection under the read: the listener is stopping anyway
                if self._stop.is_set():
                    return
                raise
            if not msg or msg["type"] != "message":
                continue
            try:
                events = decode_batch(msg["data"])
            except (ValueError, KeyError, TypeError):
                log.warning("ignoring a malformed event batch: %.200r", msg["data"])
                continue
            for event in events:
                try:
                    self._callback(event)
                except Exception:  # a callback's bug must not stop the listener
                    log.exception("event callback failed on %s", event.kind)

    def close(self) -> None:
        """Stop listening."""
        self._stop.set()
        self._thread.join(5)
        self._pubsub.close()

    def __enter__(self) -> EventListener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
