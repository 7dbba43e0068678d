"""Event tuples: ``codec/events.py`` decodes what ``lua/lib/events.lua`` writes.

Each side's half runs against the other's, the Lua on a real Redis.
"""

from __future__ import annotations

from lua_helpers import run_lua

from engine import Engine
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
