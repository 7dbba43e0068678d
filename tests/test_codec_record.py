"""The task record: ``codec/record.py`` and ``lua/lib/record.lua`` agree.

Each side's half runs against the other's, the Lua on a real Redis.
"""

from __future__ import annotations

import pytest
from lua_helpers import run_lua

from engine import Engine
from engine.store.codec import (
    pack_record,
    parse_record,
)

RECORDS = [
    ("ready", "0", "0", "", "", ""),
    ("running", "3", "12", "40", "", "agent-a"),
    ("succeeded", "1", "5", "6", "90", "we|ird:agent {x}"),
    ("failed", "2", "", "7", "8", "a"),
]


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


# A record as an earlier release wrote it (the state's word, every time after the
# creation) and as this one writes the same record.
EARLIER = [
    ("ready|0|0|||", ("ready", "0", "0", "", "", ""), "Q|0|0|||"),
    ("running|3|12|40||agent-a", ("running", "3", "12", "40", "", "agent-a"), "R|3|12|28||agent-a"),
    ("succeeded|1|5|6|90|a|b", ("succeeded", "1", "5", "6", "90", "a|b"), "S|1|5|1|84|a|b"),
    ("failed|2||7|8|a", ("failed", "2", "", "7", "8", "a"), "F|2||7|1|a"),
    ("skipped|0|4||9|", ("skipped", "0", "4", "", "9", ""), "K|0|4||5|"),
    ("ready|1|-3|2|5|b", ("ready", "1", "-3", "2", "5", "b"), "Q|1|-3|5|3|b"),
]


@pytest.mark.parametrize(("earlier", "parts", "compact"), EARLIER)
def test_a_record_of_an_earlier_release_reads_as_it_was_on_both_sides(
    engine: Engine, earlier: str, parts: tuple, compact: str
) -> None:
    assert parse_record(earlier) == parts == parse_record(compact)
    assert pack_record(*parts) == compact
    lua_parts, lua_repacked, lua_state = run_lua(
        engine,
        "local v = ARGV[3]; return {{tparts(v)}, tpack(tparse(v)), tstate(v)}",
        earlier,
    )
    assert tuple(lua_parts) == parts
    assert lua_repacked == compact
    assert lua_state == parts[0]


@pytest.mark.parametrize("earlier", ["running|1|10|25||ag", "R|1|10|15||ag", "running|1||25||ag"])
def test_a_running_task_of_either_form_ends_compact(engine: Engine, earlier: str) -> None:
    ended = run_lua(
        engine,
        """
        local s, a, q, b, bn, g = trunning(ARGV[3])
        return {s, tended('succeeded', a, q, b, bn, 40, g)}
        """,
        earlier,
    )
    assert ended[0] == "running"
    assert parse_record(ended[1]) == ("succeeded", "1", parse_record(earlier)[2], "25", "40", "ag")
    assert ended[1].startswith("S|")
