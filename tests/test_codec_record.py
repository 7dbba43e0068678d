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
