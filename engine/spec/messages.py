"""How a definition error says what it names: a value shown short and on one line, where
it was defined, and the one way every part of a definition refuses a field it does not
know. Below every other module of the workflow language (imports only the errors)."""

from __future__ import annotations

import reprlib
from collections.abc import Collection, Mapping
from typing import Any

from engine.errors import DefinitionError


class _ShortRepr(reprlib.Repr):
    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 256:  # repr() of a long enough int raises (the digit limit)
            return f"<an integer of {x.bit_length()} bits>"
        return super().repr_int(x, level)


_REPR = _ShortRepr()
_REPR.maxstring = _REPR.maxother = 60


def show_value(value: Any) -> str:
    """A short one-line ``repr`` of any value, however big, deep or long, for messages."""
    try:
        return one_line(_REPR.repr(value))
    except Exception:  # a user's object whose __repr__ fails
        return f"<a {type(value).__name__}>"


def one_line(text: str) -> str:
    """``text`` with control characters, line breaks and lone surrogates escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def at(where: str | None) -> str:
    """``"<where>: "``, the start of a message about something defined there (or ``""``)."""
    return f"{where}: " if where else ""


def fail(where: str | None, message: str) -> DefinitionError:
    """The error for ``message`` about something defined at ``where``, on one line."""
    return DefinitionError(one_line(f"{at(where)}{message}"))


def refuse_unknown(
    value: Mapping[Any, Any],
    known: Collection[str],
    subject: str,
    *,
    all_named: bool = False,
) -> None:
    """Refuse the keys of ``value`` (a mapping a file or a call gave) not in ``known``.

    The message starts with ``subject`` (what has them, with where it is: ``"w.yaml:3:
    task 'a'"``) and names the first unknown key and every known one: ``... has unknown
    field 'x' (known: a, b)``; with ``all_named`` it names them all, as written:
    ``... has unknown option(s) x, y (known: a, b)``. The known keys are listed sorted,
    or in their order when ``known`` is a tuple or a list.
    """
    allowed = known if isinstance(known, set | frozenset) else set(known)
    if value.keys() <= allowed:
        return
    extra = sorted(set(value) - allowed, key=str)
    listed = ", ".join(known if isinstance(known, tuple | list) else sorted(known))
    if all_named:
        what = f"unknown option(s) {', '.join(map(str, extra))}"
    else:
        what = f"unknown field {show_value(extra[0])}"
    raise DefinitionError(f"{subject} has {what} (known: {listed})")
