"""The task record, ``state|attempts|ready|begin|done|agent``.

Stored compact: the state as one letter (:data:`LETTER`), ready as ms after the
workflow's creation, begin as ms after ready and done as ms after begin (after ready, or
the creation, when the time before it is not set). A record of an earlier release (the
state's word, each time after the creation) is read as it was: its state is longer than
a letter. Read either way, a record gives the state's word and times after the creation.

The Lua half is ``lua/lib/record.lua``.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Record(NamedTuple):
    """A task's record as its parts (a tuple, in the stored order); times are ms after
    the workflow's creation, "" for none."""

    state: str
    attempts: str  # the fencing token
    ready: str
    begin: str
    done: str
    agent: str


NO_RECORD = Record("waiting", "0", "", "", "", "")

# The record's form this release writes: 2, compact. An agent says it in its registry
# entry; agents of releases that write form 1 (the state's word, times after the
# creation) misread form 2, so an agent does not start beside them (agent_ops).
RECORD_FORM = 2

# A task state's letter in a compact record (lib/record.lua's LETTER)
LETTER = {
    "waiting": "W",
    "ready": "Q",
    "running": "R",
    "suspended": "P",
    "succeeded": "S",
    "failed": "F",
    "skipped": "K",
    "upstream_failed": "U",
    "cancelled": "C",
}
WORD = {letter: word for word, letter in LETTER.items()}


def _num(text: str) -> int | float:
    """A time of a record as a number (a whole number of ms, or as Lua wrote it)."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def _text(n: int | float) -> str:
    """A time as Lua's NUM writes it."""
    return str(int(n)) if n == int(n) else repr(float(n))


def parse_record(value: str | None) -> Record:
    """A task's record as its parts: state, attempts (the fencing token), ready, begin and
    done times (ms after the workflow's creation, "" for none), agent. No record: a
    waiting task never started."""
    if not value:
        return NO_RECORD
    st, a, q, b, d, g = value.split("|", 5)
    if len(st) == 1:  # compact: begin after ready, done after begin
        base = _num(q) if q else None
        if b:
            bn = _num(b) + (base or 0)
            b, base = _text(bn), bn
        if d:
            d = _text(_num(d) + (base or 0))
        st = WORD.get(st, st)
    return Record(st, a, q, b, d, g)


def pack_record(
    state: str,
    attempts: int | str,
    ready: Any = "",
    begin: Any = "",
    done: Any = "",
    agent: str = "",
) -> str:
    """The record field of a task, compact (``trec`` in ``lib/record.lua``), from its times
    after the creation; the agent comes last, so its id may hold any character."""
    base = _num(str(ready)) if ready != "" else None
    if begin != "":
        bn = _num(str(begin))
        if base is not None:
            begin = _text(bn - base)
        base = bn
    if done != "" and base is not None:
        done = _text(_num(str(done)) - base)
    return f"{LETTER[state]}|{attempts}|{ready}|{begin}|{done}|{agent}"
