"""Claim rows and status: ``codec/claim_row.py`` and ``codec/status.py`` decode what
``lua/lib/claim_row.lua`` and the scripts store.

Each side's half runs against the other's, the Lua on a real Redis.
"""

from __future__ import annotations

import json

from engine import Engine, Workflow
from engine.store.codec import (
    decode_claim_rows,
    parse_status,
)


def test_claim_rows_and_status_decode_what_the_scripts_store(engine: Engine) -> None:
    wf = Workflow("codec")
    a = wf.task("a", payload={"n": 1}, type="io")
    wf.task("b", payload=[1, 2], after=[a], type="io", priority=3)
    wid = engine.push(wf)
    shard = engine.keys.shard_of(wid)
    engine.store.calls.register(shard, "agent|x", "{}", 60_000)
    rows = engine.redis.evalsha(
        engine.store.scripts.sha("claim"), 1, shard.queue("io"), shard.prefix, 100, "agent|x", 5
    )
    [task] = decode_claim_rows(rows, 2)  # after the rate limits' two numbers
    assert (task.workflow_id, task.index, task.name, task.type) == (wid, 0, "a", "io")
    assert (task.payload, task.attempt, task.parents) == ({"n": 1}, 1, {})
    outcome = (wid, 0, 1, "ok", json.dumps({"out": True}))
    engine.store.scripts.run(engine.store.calls.complete_call(shard, "agent|x", [outcome]))
    raw = engine.redis.hgetall(shard.workflow(wid))
    definition = engine.redis.hgetall(shard.definition(raw["d"]))
    status = parse_status(wid, {**definition, **raw})
    first, second = status.tasks
    assert (first.state, first.attempts, first.agent, first.output) == (
        "succeeded", 1, "agent|x", {"out": True},
    )  # fmt: skip
    assert (second.state, second.priority, second.parents) == ("ready", 3, ["a"])
    [child] = engine.store.scripts.run(engine.store.calls.claim_call(shard, "agent|x", ["io"], 5))
    assert child.parents == {"a": {"out": True}}


# Inputs around every boundary of the stored forms: none, one field, pieces (cut before
# a character's continuation bytes: 2-, 3- and 4-byte characters across each cut), a key
# of its own.
