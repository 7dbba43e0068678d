"""The formats Python and Lua share agree: each side's half run against the other's.

``engine/store/codec.py`` and ``engine/store/keys.py`` are the Python halves of
the helpers in ``engine/store/lua/lib``; these tests run the Lua helpers on a real Redis.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import Engine, Workflow
from engine.store.codec import (
    INPUT_OWN_KEY,
    INPUT_PIECE,
    INPUT_PIECES_MAX,
    decode_batch,
    decode_claim_row,
    input_layout,
    pack_record,
    parse_record,
    parse_status,
    stored_input,
)
from engine.store.scripts import library
from engine.urls import open_client

RECORDS = [
    ("ready", "0", "0", "", "", ""),
    ("running", "3", "12", "40", "", "agent-a"),
    ("succeeded", "1", "5", "6", "90", "we|ird:agent {x}"),
    ("failed", "2", "", "7", "8", "a"),
]


def run_lua(engine: Engine, body: str, *args: Any) -> Any:
    """Run ``body`` after the shared helpers, on shard 0 (ARGV[3...] are ``args``)."""
    lib = library()
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
    shard = engine.keys.shard(0)  # its hash tag: the deployment's (a cluster's spread tags)
    got = run_lua(
        engine,
        """
        return {K_SEQ, K_DELAYED, K_ALL, K_NAMES, K_STATS, K_TYPES, K_AGENTS, K_AGENTS_SEEN,
          K_AGENTS_LIVE, K_AGENTS_STATE, K_EVENTS, K_EVCHAN, wkey('7'), k_definition('ab'),
          k_queue('io'), k_wake('io'), k_state('failed'), k_name('nightly'), k_running('a1'),
          k_items(wkey('7'), '2'), k_pending(wkey('7'), '2'), k_flying(wkey('7'), '2'),
          k_failed(wkey('7'), '2'), K_SCHEDULED, K_TIMEOUTS,
          K_DEADLINES, k_input(wkey('7'))}
        """,
    )
    assert got == [
        shard.seq, shard.delayed, shard.all, shard.names, shard.stats, shard.types,
        shard.agents, shard.agents_seen, shard.agents_live, shard.agents_state, shard.events,
        shard.event_channel, shard.workflow(7), shard.definition("ab"), shard.queue("io"),
        shard.wake("io"), shard.by_state("failed"), shard.by_name("nightly"),
        shard.running_of("a1"), shard.map_items(7, 2), shard.map_pending(7, 2),
        shard.map_flying(7, 2), shard.map_failed(7, 2), shard.scheduled, shard.timeouts,
        shard.deadlines, shard.workflow_input(7),
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
    shard = engine.keys.shard_of(wid)
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


# Inputs around every boundary of the stored forms: none, one field, pieces (cut before
# a character's continuation bytes: 2-, 3- and 4-byte characters across each cut), a key
# of its own.
INPUTS = [
    "",
    '"x"',
    "1" * INPUT_PIECE,
    "1" * (INPUT_PIECE + 1),
    "2" * (INPUT_PIECE * INPUT_PIECES_MAX),
    "3" * (INPUT_PIECE * INPUT_PIECES_MAX + 1),
    '"' + "é" * 80 + '"',
    '"' + "a" + "€" * 40 + '"',
    '"' + "ab" + "€" * 40 + '"',
    '"' + "😀" * 30 + '"',
    '"' + "a" * 61 + "😀" * 20 + '"',
    '"' + "a" * 62 + "😀" * 20 + '"',
    '"' + "a" * 63 + "😀" * 20 + '"',
    '"' + "😀" * 100 + '"',
    '{"k":"' + "x" * 2000 + '"}',
]


def lua_layout(engine: Engine, text: str, tasks: int) -> tuple[str, list[str], str | None]:
    head, pieces, own = run_lua(
        engine,
        """
        local head, pieces, own = input_layout(ARGV[3], tonumber(ARGV[4]))
        local values = {}
        for k = 2, #(pieces or {}), 2 do values[#values + 1] = pieces[k] end
        return {head, values, own or false}
        """,
        text,
        tasks,
    )
    return head, pieces, own or None


@pytest.mark.parametrize("text", INPUTS)
@pytest.mark.parametrize("tasks", [10, 58])
def test_an_input_is_stored_and_read_alike_on_both_sides(
    engine: Engine, text: str, tasks: int
) -> None:
    layout = input_layout(text, tasks)
    assert lua_layout(engine, text, tasks) == layout
    head, pieces, own = layout
    for piece in pieces:  # every piece is text of its own, short enough for a listpack
        assert 0 < len(piece.encode()) <= INPUT_PIECE
    assert len(head.encode()) <= INPUT_PIECE
    if pieces:
        assert head == f"#{len(pieces)}" and own is None and len(pieces) <= INPUT_PIECES_MAX
    elif own is not None:
        assert head == INPUT_OWN_KEY and own == text
    else:
        assert head == text
    # Python reads what Lua's read_input reads, from the same stored fields
    raw = {"in": head, **{f"in{k}": p for k, p in enumerate(pieces, 1)}}
    assert stored_input(raw, own) == text
    w = engine.keys.shard(0).workflow(1)  # in the slot run_lua's script runs on
    engine.redis.hset(w, mapping=raw)
    if own is not None:
        engine.redis.set(engine.keys.shard(0).workflow_input(1), own)
    got = run_lua(engine, f"return {{read_input('{w}', redis.call('HGET', '{w}', 'in'))}}")
    assert got == [text]


def test_a_workflow_too_big_for_pieces_keeps_its_input_in_a_key_of_its_own() -> None:
    text = "x" * (INPUT_PIECE + 1)
    assert input_layout(text, 10)[0] == "#2"
    assert input_layout(text, 58) == (INPUT_OWN_KEY, [], text)  # 11 + 116 + 2 > 128


def test_lua_cuts_and_joins_bytes_that_are_not_utf_8_unchanged(redis_url: str) -> None:
    data = b"\x80" * 70 + b"\xff" * 100  # continuation bytes only: 3 bytes back at most
    lib = library()
    body = """
        local head, pieces = input_layout(ARGV[3], 10)
        redis.call('HSET', KEYS[1], 'in', head, unpack(pieces))
        return {head, read_input(KEYS[1], head)}
    """
    client = open_client(redis_url)  # bytes, not text
    try:
        head, joined = client.eval(f"{lib}\n{body}", 1, "w", "p", 100, data)
        assert (head, joined) == (b"#3", data)
        assert [len(client.hget("w", f"in{k}")) for k in (1, 2, 3)] == [61, 64, 45]
    finally:
        client.close()
