"""Webhook triggers as stored, and the HTTP server's counters (both in shard 0).

A trigger is one hash among the sealed keys, ``S:trig:<name>``; ``S:trigs`` lists the
names, scored by creation ms. Sealed keys (``<namespace>!...``) are outside the key
pattern of the reader and agent ACL roles: only the operator's user (``redisflow trigger``,
``redisflow serve``) reads a secret or changes a scheme. The HTTP server
(:mod:`engine.http`) reads a trigger on each delivery and counts what it accepted and
rejected in ``P:http`` (see :mod:`.keys`).

A trigger stored the old way (``P:trig:<name>``, readable and writable by every role) is
read back marked ``legacy``: it refuses every delivery until put again, with a new secret.
"""

from __future__ import annotations

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
    legacy: bool = False  # stored before sealed keys: refuses deliveries until put again

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
        if self.legacy:
            d["legacy"] = True
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


def _parse(name: str, raw: dict[str, str], legacy: bool = False) -> Trigger:
    created = raw.get(TR_CREATED)
    return Trigger(
        name=name,
        template=raw.get(TR_TEMPLATE, ""),
        auth=raw.get(TR_AUTH, ""),
        secret=raw.get(TR_SECRET, ""),
        idempotency_header=raw.get(TR_IDEMPOTENCY, ""),
        created_at=int(created) / 1000.0 if created else None,
        created_by=raw.get(TR_BY, ""),
        legacy=legacy,
    )


class TriggerStore:
    """Triggers and HTTP counters of one deployment."""

    def __init__(self, client: redis.Redis, keys: Keyspace) -> None:
        self.redis = client
        self.shard: ShardKeys = keys.shard(0)

    def put(self, trigger: Trigger) -> None:
        """Store ``trigger`` (sealed), replacing one of the same name and any copy stored
        the old way, in one transaction."""
        sec, usec = self.redis.time()
        now_ms = int(sec) * 1000 + int(usec) // 1000
        key = self.shard.trigger(trigger.name)
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(key)
        pipe.hset(key, items=_fields(trigger, now_ms))
        pipe.zadd(self.shard.triggers, {trigger.name: now_ms})
        pipe.delete(self.shard.legacy_trigger(trigger.name))
        pipe.zrem(self.shard.legacy_triggers, trigger.name)
        pipe.execute()

    def get(self, name: str) -> Trigger | None:
        """The trigger called ``name`` (marked ``legacy`` when only stored the old way), or
        None."""
        raw = cast("dict[str, str]", self.redis.hgetall(self.shard.trigger(name)))
        if raw:
            return _parse(name, raw)
        raw = cast("dict[str, str]", self.redis.hgetall(self.shard.legacy_trigger(name)))
        return _parse(name, raw, legacy=True) if raw else None

    def all(self) -> list[Trigger]:
        """Every trigger, oldest first; then those stored the old way (``legacy``)."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.zrange(self.shard.triggers, 0, -1)
        pipe.zrange(self.shard.legacy_triggers, 0, -1)
        sealed, old = cast("tuple[list[str], list[str]]", tuple(pipe.execute()))
        old = [n for n in old if n not in set(sealed)]
        pipe = self.redis.pipeline(transaction=False)
        for name in sealed:
            pipe.hgetall(self.shard.trigger(name))
        for name in old:
            pipe.hgetall(self.shard.legacy_trigger(name))
        found = pipe.execute()
        return [
            _parse(n, raw, legacy=k >= len(sealed))
            for k, (n, raw) in enumerate(zip([*sealed, *old], found, strict=True))
            if raw
        ]

    def remove(self, name: str) -> bool:
        """Delete trigger ``name`` (and any copy stored the old way); False when there was
        none."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(self.shard.trigger(name))
        pipe.delete(self.shard.legacy_trigger(name))
        pipe.zrem(self.shard.triggers, name)
        pipe.zrem(self.shard.legacy_triggers, name)
        sealed, old, _, _ = pipe.execute()
        return bool(sealed or old)

    def count(self, field: str, by: int = 1) -> None:
        """Add ``by`` to the HTTP counter ``field`` (``rejected:<reason>``, ...)."""
        self.redis.hincrby(self.shard.http_counters, field, by)

    def counters(self) -> dict[str, int]:
        """Every HTTP counter."""
        raw = cast("dict[str, str]", self.redis.hgetall(self.shard.http_counters))
        return {k: int(v) for k, v in raw.items()}
