"""Webhook triggers as stored, and the HTTP server's counters (both in shard 0).

A trigger is one hash, ``P:trig:<name>``; ``P:trigs`` lists the names, scored by
creation ms. The HTTP server (:mod:`engine.http`) reads a trigger on each delivery and
counts what it accepted and rejected in ``P:http`` (see :mod:`.keys`).
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import cast

import redis

from .keys import Keyspace, ShardKeys

# Field names of a trigger hash.
TR_TEMPLATE, TR_AUTH, TR_SECRET, TR_IDEMPOTENCY = "t", "a", "s", "ih"
TR_CREATED, TR_BY = "ct", "by"

AUTH_SCHEMES = ("github", "standard-webhooks", "bearer", "none")


@dataclass(frozen=True)
class Trigger:
    """A webhook trigger: deliveries to ``POST /v1/triggers/<name>`` that pass ``auth``
    run template ``template`` with the body as input.

    ``secret`` is what ``auth`` checks against (empty only for ``none``);
    ``idempotency_header`` names the request header whose value makes a delivery
    idempotent (empty: every delivery runs).
    """

    name: str
    template: str
    auth: str
    secret: str = ""
    idempotency_header: str = ""
    created_at: float | None = None  # epoch seconds
    created_by: str = ""

    def to_dict(self, secret: bool = False) -> dict[str, object]:
        """The trigger as JSON, its secret left out unless ``secret``."""
        d: dict[str, object] = {
            "name": self.name,
            "template": self.template,
            "auth": self.auth,
            "idempotency_header": self.idempotency_header or None,
            "created_at": self.created_at,
            "created_by": self.created_by,
            "has_secret": bool(self.secret),
        }
        if secret:
            d["secret"] = self.secret
        return d


def _fields(t: Trigger, now_ms: int) -> list[str]:
    return [
        TR_TEMPLATE, t.template,
        TR_AUTH, t.auth,
        TR_SECRET, t.secret,
        TR_IDEMPOTENCY, t.idempotency_header,
        TR_CREATED, str(now_ms),
        TR_BY, t.created_by,
    ]  # fmt: skip


def _parse(name: str, raw: dict[str, str]) -> Trigger:
    created = raw.get(TR_CREATED)
    return Trigger(
        name=name,
        template=raw.get(TR_TEMPLATE, ""),
        auth=raw.get(TR_AUTH, ""),
        secret=raw.get(TR_SECRET, ""),
        idempotency_header=raw.get(TR_IDEMPOTENCY, ""),
        created_at=int(created) / 1000.0 if created else None,
        created_by=raw.get(TR_BY, ""),
    )


class TriggerStore:
    """Triggers and HTTP counters of one deployment."""

    def __init__(self, client: redis.Redis, keys: Keyspace) -> None:
        self.redis = client
        self.shard: ShardKeys = keys.shard(0)

    def put(self, trigger: Trigger) -> None:
        """Store ``trigger``, replacing one of the same name, in one transaction."""
        sec, usec = self.redis.time()
        now_ms = int(sec) * 1000 + int(usec) // 1000
        key = self.shard.trigger(trigger.name)
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(key)
        pipe.hset(key, items=_fields(trigger, now_ms))
        pipe.zadd(self.shard.triggers, {trigger.name: now_ms})
        pipe.execute()

    def get(self, name: str) -> Trigger | None:
        """The trigger called ``name``, or None."""
        raw = cast("dict[str, str]", self.redis.hgetall(self.shard.trigger(name)))
        return _parse(name, raw) if raw else None

    def all(self) -> builtins.list[Trigger]:
        """Every trigger, oldest first."""
        names = cast("list[str]", self.redis.zrange(self.shard.triggers, 0, -1))
        pipe = self.redis.pipeline(transaction=False)
        for name in names:
            pipe.hgetall(self.shard.trigger(name))
        return [_parse(n, raw) for n, raw in zip(names, pipe.execute(), strict=True) if raw]

    def remove(self, name: str) -> bool:
        """Delete trigger ``name``; False when there was none."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(self.shard.trigger(name))
        pipe.zrem(self.shard.triggers, name)
        deleted, _ = pipe.execute()
        return bool(deleted)

    def count(self, field: str, by: int = 1) -> None:
        """Add ``by`` to the HTTP counter ``field`` (``rejected:<reason>``, ...)."""
        self.redis.hincrby(self.shard.http_counters, field, by)

    def counters(self) -> dict[str, int]:
        """Every HTTP counter."""
        raw = cast("dict[str, str]", self.redis.hgetall(self.shard.http_counters))
        return {k: int(v) for k, v in raw.items()}
