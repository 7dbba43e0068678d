"""The task record, ``state|attempts|ready|begin|done|agent``.

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


def parse_record(value: str | None) -> Record:
    """A task's record as its parts: state, attempts (the fencing token), ready, begin and
    done times (ms after the workflow's creation, "" for none), agent. No record: a
    waiting task never started."""
    if not value:
        return NO_RECORD
    st, a, q, b, d, g = value.split("|", 5)
    return Record(st, a, q, b, d, g)


def pack_record(
    state: str,
    attempts: int | str,
    ready: Any = "",
    begin: Any = "",
    done: Any = "",
    agent: str = "",
) -> str:
    """The record field of a task (``trec`` in ``lib/record.lua``); the agent comes last, so its
    id may hold any character."""
    return f"{state}|{attempts}|{ready}|{begin}|{done}|{agent}"
