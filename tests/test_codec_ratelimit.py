"""Rate-limit buckets: ``engine/spec/rate_limits.py`` + ``keys.py`` and ``lua/lib/rate_limits.lua``
agree on a task's bucket (the Lua on a real Redis)."""

from __future__ import annotations

import json

import pytest
from lua_helpers import run_lua

from engine import Engine
from engine.spec.rate_limits import RateLimit, encode_spec
from engine.store.keys import bucket_id


@pytest.mark.parametrize(
    ("typ", "key", "constant"),
    [("api", "acme", True), ("a:b", "c:d", False), ("", "ü €", False), ("7", "", True)],
)
def test_a_tasks_bucket_is_the_same_on_both_sides(
    engine: Engine, typ: str, key: str, constant: bool
) -> None:
    shard = engine.keys.shard(0)
    spec = encode_spec(
        RateLimit("k" if constant else "input.k", 3, "1s", 2), key if constant else None
    )
    assert spec == f"333334|2|{'=' + key if constant else '@'}"  # rounded up: never faster
    dk, wk = shard.definition("test"), shard.workflow(1)
    engine.redis.hset(dk, "0L", spec)
    engine.redis.hset(wk, "rk", json.dumps({"0": key}))
    got = run_lua(
        engine,
        """
        local b, e, burst = rate_bucket(ARGV[3], ARGV[4], '0', '0', ARGV[5])
        return {b, k_rate_queue(b), k_bucket(b), e, burst, bucket_type(b)}
        """,
        wk,
        dk,
        typ,
    )
    assert got == [
        bucket_id(typ, key),
        shard.rate_queue(typ, key),
        shard.bucket(typ, key),
        333334,
        2,
        typ,
    ]
