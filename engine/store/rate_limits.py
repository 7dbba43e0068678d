"""The deployment's rate limits by task type, in Redis (shard 0's ``P:rl``).

Pushes read them (:meth:`engine.Engine.compile`): a task of a type listed here, with no
rate limit of its own nor from its workflow's ``rate_limits``, gets this one. Runs pushed
before a change keep the limit they were pushed with (docs/rate-limits.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import cast

import redis

from engine.spec.rate_limits import RateLimit, rate_limit_from

from ..errors import NotFoundError
from .keys import Keyspace


def _parse(raw: dict[str, str]) -> dict[str, RateLimit]:
    out: dict[str, RateLimit] = {}
    for typ, text in sorted(raw.items()):
        r = rate_limit_from(json.loads(text), f"rate limit of type {typ!r}")
        if r is not None:
            out[typ] = r
    return out


class RateLimits:
    """Put, list and delete the deployment's rate limits (one per task type)."""

    def __init__(self, client: redis.Redis, keys: Keyspace):
        self.redis = client
        self.key = keys.shard(0).rate_limits

    def put(self, task_type: str, limit: RateLimit) -> None:
        """Set the rate limit of ``task_type`` (checked by the caller)."""
        self.redis.hset(self.key, task_type, json.dumps(limit.as_dict(), separators=(",", ":")))

    def all(self) -> dict[str, RateLimit]:
        """Every type's rate limit, by type (one read)."""
        return _parse(cast("dict[str, str]", self.redis.hgetall(self.key)))

    def of_types(self, types: Iterable[str]) -> dict[str, RateLimit]:
        """The rate limits of ``types`` that have one (one HMGET, what a push reads: an
        agent's ACL role allows it, so a push refused by the role is refused at its
        script)."""
        names = sorted(set(types))
        if not names:
            return {}
        got = cast("list[str | None]", self.redis.hmget(self.key, names))
        return _parse({t: v for t, v in zip(names, got, strict=True) if v is not None})

    def delete(self, task_type: str) -> None:
        """Remove the rate limit of ``task_type`` (:class:`NotFoundError` if none)."""
        if not self.redis.hdel(self.key, task_type):
            raise NotFoundError(f"no rate limit for task type {task_type!r}")
