"""Event tuples: ``codec/events.py`` decodes what ``lua/lib/events.lua`` writes.

Each side's half runs against the other's, the Lua on a real Redis.
"""

from __future__ import annotations

from lua_helpers import run_lua

from engine import Engine
from engine.ops.watch import EventBatch
from engine.store.codec import (
    decode_batch,
)


def test_event_tuples_decode_as_lua_writes_them(engine: Engine) -> None:
    body = run_lua(
        engine,
        """
        emit('pushed', 7, -1, 'nightly')
        emit_json('claimed', 7, 2, cjson.encode('agent-a'))
        emit('retrying', 7, 2, {1, 500})
        emit('rejected', 7, 3, {'agent-b', 2})
        emit('failed', 7, 3, 'boom')
        emit('cancelled', 7, -1, 4)
        emit('agent.dead', 0, -1, 'agent-b')
        return '{"ts":' .. NOW .. ',"ev":[' .. table.concat(events, ',') .. ']}'
        """,
    )
    got = [(e.kind, e.wid, e.task, e.data) for e in decode_batch(body)]
    assert got == [
        ("workflow.pushed", "7", None, {"name": "nightly"}),
        ("task.claimed", "7", 2, {"agent": "agent-a"}),
        ("task.retrying", "7", 2, {"failures": 1, "delay_ms": 500}),
        ("task.rejected", "7", 3, {"agent": "agent-b", "attempt": 2}),
        ("task.failed", "7", 3, {"error": "boom"}),
        ("workflow.cancelled", "7", None, {"count": 4}),
        ("agent.dead", "", None, {"agent": "agent-b"}),
    ]


def test_tasks_one_after_another_share_one_event_that_decodes_one_per_task(
    engine: Engine,
) -> None:
    body = run_lua(
        engine,
        """
        local a = cjson.encode('agent-a')
        emit_tasks('claimed', '7:0', a)
        emit_tasks('claimed', '9:3', a)
        emit_tasks('claimed', '9:4', cjson.encode('agent-b'))  -- another extra: its own
        emit_tasks('succeeded', '7:0')
        emit_tasks('succeeded', '7:1')
        emit('succeeded', 7, -1)
        emit_tasks('succeeded', '9:3')  -- not after the last one: its own
        flush()
        return redis.call('XREVRANGE', K_EVENTS, '+', '-', 'COUNT', 1)[1][2][2]
        """,
    )
    batch = EventBatch(body)
    got = [(e.kind, e.wid, e.task, e.data) for e in decode_batch(body)]
    assert got == [
        ("task.claimed", "7", 0, {"agent": "agent-a"}),
        ("task.claimed", "9", 3, {"agent": "agent-a"}),
        ("task.claimed", "9", 4, {"agent": "agent-b"}),
        ("task.succeeded", "7", 0, {}),
        ("task.succeeded", "7", 1, {}),
        ("workflow.succeeded", "7", None, {}),
        ("task.succeeded", "9", 3, {}),
    ]
    assert len(batch.data["ev"]) == 5  # three shared events, two of their own
    assert [(k, w, -1 if i is None else i) for k, w, i, _ in got] == list(batch.brief())
    assert len(batch) == 7


def test_a_signal_event_decodes_by_its_fields(engine: Engine) -> None:
    body = run_lua(
        engine,
        """
        emit('signal', 7, -1, {'approve', 'delivered', 'gate', 'alice', 'token ci-bot'})
        emit('signal', 7, -1, {'paid', 'kept', '', 'bob', 'bob@host'})
        return '{"ts":' .. NOW .. ',"ev":[' .. table.concat(events, ',') .. ']}'
        """,
    )
    got = [(e.kind, e.wid, e.data) for e in decode_batch(body)]
    assert got == [
        ("workflow.signal", "7", {"signal": "approve", "outcome": "delivered", "task": "gate",
                                  "by": "alice", "identity": "token ci-bot"}),
        ("workflow.signal", "7", {"signal": "paid", "outcome": "kept", "by": "bob",
                                  "identity": "bob@host"}),
    ]  # fmt: skip
    earlier = '{"ts":1,"ev":[["signal",7,-1,["approve","kept","","alice"]]]}'  # no identity
    assert decode_batch(earlier)[0].data == {"signal": "approve", "outcome": "kept", "by": "alice"}
