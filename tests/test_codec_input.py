"""A workflow's input: ``codec/input.py`` and ``lua/lib/input.lua`` store and read it alike.

Each side's half runs against the other's, the Lua on a real Redis.
"""

from __future__ import annotations

import pytest
from lua_helpers import run_lua

from engine import Engine
from engine.connect.urls import open_client
from engine.store.codec import (
    INPUT_OWN_KEY,
    INPUT_PIECE,
    INPUT_PIECES_MAX,
    INPUT_VALUE,
    input_layout,
    stored_input,
)
from engine.store.scripts import lib_for, with_fields

INPUTS = [
    "",
    '"x"',
    "1" * INPUT_PIECE,
    "1" * INPUT_VALUE,
    "1" * (INPUT_VALUE + 1),
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
    if pieces:  # "#<n>" and the first piece, the others in fields of their own
        assert head.startswith(f"#{len(pieces) + 1}") and len(head.encode()) <= INPUT_PIECE
        assert own is None and len(pieces) < INPUT_PIECES_MAX
    elif own is not None:
        assert head == INPUT_OWN_KEY and own == text
    else:
        assert head == text and len(head.encode()) <= INPUT_VALUE
    # Python reads what Lua's read_input reads, from the same stored fields
    raw = {"in": head, **{f"in{k}": p for k, p in enumerate(pieces, 2)}}
    assert stored_input(raw, own) == text
    w = engine.keys.shard(0).workflow(1)  # in the slot run_lua's script runs on
    engine.redis.hset(w, mapping=raw)
    if own is not None:
        engine.redis.set(engine.keys.shard(0).workflow_input(1), own)
    got = run_lua(engine, f"return {{read_input('{w}', redis.call('HGET', '{w}', 'in'))}}")
    assert got == [text]


def test_a_workflow_too_big_for_pieces_keeps_its_input_in_a_key_of_its_own() -> None:
    text = "x" * (INPUT_VALUE + 1)
    assert input_layout(text, 10) == ("#2" + "x" * 61, ["x" * 4], None)
    assert input_layout(text, 58) == (INPUT_OWN_KEY, [], text)  # 11 + 116 + 2 > 128


def test_lua_cuts_and_joins_bytes_that_are_not_utf_8_unchanged(redis_url: str) -> None:
    data = b"\x80" * 70 + b"\xff" * 100  # continuation bytes only: 3 bytes back at most
    body = """
        local head, pieces = input_layout(ARGV[3], 10)
        redis.call('HSET', KEYS[1], 'in', head, unpack(pieces))
        return {head, read_input(KEYS[1], head)}
    """
    lib = lib_for(body)  # what a script carries: the whole library is too many locals
    client = open_client(redis_url)  # bytes, not text
    try:
        head, joined = client.eval(with_fields(f"{lib}\n{body}"), 1, "w", "p", 100, data)
        assert (head[:2], joined) == (b"#3", data)
        # the first piece after "#3": 61 bytes less the 3 a piece may end before
        assert [len(head) - 2, *(len(client.hget("w", f"in{k}")) for k in (2, 3))] == [58, 63, 49]
    finally:
        client.close()


@pytest.mark.parametrize("size", [65, 105, 128, 200, 256])
def test_an_earlier_release_s_pieces_read_back_on_both_sides(engine: Engine, size: int) -> None:
    # "#<n>" alone, every piece of 64 bytes in fields in1..in<n>, as earlier runs hold them
    text = "".join(chr(97 + k % 26) for k in range(size))  # stored as given: any text
    cuts = [text[k : k + 64] for k in range(0, size, 64)]
    raw = {"in": f"#{len(cuts)}", **{f"in{k}": p for k, p in enumerate(cuts, 1)}}
    assert stored_input(raw) == text
    w = engine.keys.shard(0).workflow(1)
    engine.redis.hset(w, mapping=raw)
    got = run_lua(engine, f"return {{read_input('{w}', redis.call('HGET', '{w}', 'in'))}}")
    assert got == [text]
