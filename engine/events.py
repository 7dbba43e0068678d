"""Lifecycle events: decoding the coalesced batches the scripts write, and listening.

Every script call that changes state writes one batch, ``{"ts": ms, "ev": [[kind, wid,
task index or -1, extra], ...]}``, to the shard's capped stream and publishes the same
text on the shard's event channel.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import redis

from .model import Event

log = logging.getLogger("redisflow.events")

TASK_KINDS = {"claimed", "succeeded", "failed", "retrying", "rejected", "requeued"}


def decode_batch(body: str | bytes, entry_id: str = "") -> list[Event]:
    """Turn one stored/published batch into events, in the order they happened."""
    data = json.loads(body)
    ts = data["ts"] / 1000.0
    out: list[Event] = []
    for kind, wid, idx, extra in data["ev"]:
        if kind.startswith("agent."):
            out.append(Event(kind, "", ts, None, {"agent": extra}, entry_id))
        elif idx >= 0 and kind in TASK_KINDS:
            out.append(Event(f"task.{kind}", str(wid), ts, idx, _extra(kind, extra), entry_id))
        else:
            out.append(Event(f"workflow.{kind}", str(wid), ts, None, _extra(kind, extra), entry_id))
    return out


def _extra(kind: str, extra: Any) -> dict[str, Any]:
    if extra is None:
        return {}
    if kind in ("claimed", "requeued"):
        return {"agent": extra}
    if kind == "failed":
        return {"error": extra}
    if kind == "retrying":
        return {"failures": extra[0], "delay_ms": extra[1]}
    if kind == "rejected":
        return {"agent": extra[0], "attempt": extra[1]}
    if kind == "pushed":
        return {"name": extra}
    return {"count": extra}


class EventListener:
    """A background thread that calls ``callback`` with every event published live.

    Pub/sub is a hint: messages can be lost on reconnect, so callers that must not miss
    an outcome (e.g. :meth:`engine.Engine.wait`) also read the state.
    """

    def __init__(
        self, client: redis.Redis, channels: list[str], callback: Callable[[Event], None]
    ) -> None:
        self._pubsub = client.pubsub(ignore_subscribe_messages=True)
        self._pubsub.subscribe(*channels)
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
        self._thread.join(2)
        self._pubsub.close()

    def __enter__(self) -> EventListener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_stream(entries: list[tuple[Any, dict[Any, Any]]]) -> Iterator[Event]:
    """Events of stream entries as returned by XRANGE/XREVRANGE."""
    for entry_id, fields in entries:
        eid = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
        body = fields.get(b"e") or fields.get("e")
        if body is not None:
            yield from decode_batch(body, eid)
