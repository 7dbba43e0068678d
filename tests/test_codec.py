"""The formats Python and Lua share agree: each side's half run against the other's.

``engine/store/codec.py`` and ``engine/store/keys.py`` are the Python halves of
``engine/store/lua/_lib.lua``; these tests run the Lua helpers on a real Redis.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from engine import Engine, Workflow
from engine.store import Keyspace
from engine.store.codec import (
    decode_batch,
    decode_claim_row,
    pack_record,
    parse_record,
    parse_status,
)

RECORDS = [
    ("ready", "0", "0", "", "", ""),
    ("running", "3", "12", "40", "", "agent-a"),
    ("succeeded", "1", "5", "6", "90", "we|ird:agent {x}"),
    ("failed", "2", "", "7", "8", "a"),
]


def run_lua(engine: Engine, body: str, *args: Any) -> Any:
    """Run ``body`` after the shared helpers, on shard 0 (ARGV[3...] are ``args``)."""
    lib = (resources.files("engine.store") / "lua" / "_lib.lua").read_text(encoding="utf-8")
    shard = engine.keys.shard(0)
    return engine.redis.eval(f"{lib}\n{body}", 1, shard.seq, shard.prefix, 100, *args)


@pytest.mark.parametrize("parts", RECORDS)
def test_the_task_record_is_one_format_on_both_sides(engine: Engine, parts: tuple) -> None:
    packed = pack_record(*parts)
    assert parse_record(packed) == parts
    lua_packed, lua_repacked, lua_parts = run_lua(
        engine,
        """
        local s, a, q, b, d, g = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
        local v = trec(s, a, q, b, d, g)
        return {v, tpack(tparse(v)), {tparts(v)}}
        """,
        *parts,
    )
    assert lua_packed == packed
    assert lua_repacked == packed
    assert tuple(lua_parts) == parts


def test_no_record_is_a_waiting_task_on_both_sides(engine: Engine) -> None:
    state, parts = run_lua(engine, "return {tstate(nil), {tparts(nil)}}")
    assert state == parse_record(None)[0] == "waiting"
    assert tuple(parts) == parse_record(None)


def test_key_names_agree(engine: Engine) -> None:
    shard = Keyspace("rf", 1).shard(0)
    got = run_lua(
        engine,
        """
        return {K_SEQ, K_DELAYED, K_ALL, K_NAMES, K_STATS, K_TYPES, K_AGENTS, K_AGENTS_SEEN,
          K_AGENTS_LIVE, K_AGENTS_STATE, K_EVENTS, K_EVCHAN, wkey('7'), k_definition('ab'),
          k_queue('io'), k_wake('io'), k_state('failed'), k_name('nightly'), k_running('a1'),
          k_items(wkey('7'), '2'), k_pending(wkey('7'), '2'), k_flying(wkey('7'), '2'),
          k_failed(wkey('7'), '2'), K_SCHEDULED, K_TIMEOUTS,
          K_DEADLINES}
        """,
    )
    assert got == [
        shard.seq, shard.delayed, shard.all, shard.names, shard.stats, shard.types,
        shard.agents, shard.agents_seen, shard.agents_live, shard.agents_state, shard.events,
        shard.event_channel, shard.workflow(7), shard.definition("ab"), shard.queue("io"),
        shard.wake("io"), shard.by_state("failed"), shard.by_name("nightly"),
        shard.running_of("a1"), shard.map_items(7, 2), shard.map_pending(7, 2),
        shard.map_flying(7, 2), shard.map_failed(7, 2), shard.scheduled, shard.timeouts,
        shard.deadlines,
    ]  # fmt: skip


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


def test_claim_rows_and_status_decode_what_the_scripts_store(engine: Engine) -> None:
    wf = Workflow("codec")
    a = wf.task("a", payload={"n": 1}, type="io")
    wf.task("b", payload=[1, 2], after=[a], type="io", priority=3)
    wid = engine.push(wf)
    shard = engine.keys.shard(0)
    engine.store.register(shard, "agent|x", "{}", 60_000)
    rows = engine.redis.evalsha(
        engine.store.scripts.sha("claim"), 1, shard.queue("io"), shard.prefix, 100, "agent|x", 5
    )
    [task] = [decode_claim_row(r) for r in rows]
    assert (task.workflow_id, task.index, task.name, task.type) == (wid, 0, "a", "io")
    assert (task.payload, task.attempt, task.parents) == ({"n": 1}, 1, {})
    outcome = (wid, 0, 1, "ok", json.dumps({"out": True}))
    engine.store.scripts.run(engine.store.complete_call(shard, "agent|x", [outcome]))
    raw = engine.redis.hgetall(shard.workflow(wid))
    definition = engine.redis.hgetall(shard.definition(raw["d"]))
    status = parse_status(wid, {**definition, **raw})
    first, second = status.tasks
    assert (first.state, first.attempts, first.agent, first.output) == (
        "succeeded", 1, "agent|x", {"out": True},
    )  # fmt: skip
    assert (second.state, second.priority, second.parents) == ("ready", 3, ["a"])
    [child] = engine.store.scripts.run(engine.store.claim_call(shard, "agent|x", ["io"], 5))
    assert child.parents == {"a": {"out": True}}
