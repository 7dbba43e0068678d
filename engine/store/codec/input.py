"""A workflow's input as stored: in one field, in pieces or in a key of its own.

The Lua half is ``lua/lib/input.lua``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.spec.definition import DEFAULT_MAX_PAYLOAD

from ...errors import DefinitionError
from .fields import (
    F_INPUT,
    INPUT_OWN_KEY,
    INPUT_PIECE,
    INPUT_PIECES_MAX,
    INPUT_VALUE,
    LISTPACK_ENTRIES,
    _encode_strict,
)


def encode_input(value: Any, max_bytes: int = DEFAULT_MAX_PAYLOAD) -> str:
    """A workflow's input as stored (JSON; "" for none), or :class:`DefinitionError`
    naming what is wrong: not JSON, too deep, not valid text, or over ``max_bytes``."""
    if value is None:
        return ""
    try:
        text = _encode_strict(value)
        size = len(text.encode())
    except UnicodeEncodeError:  # a ValueError: first
        raise DefinitionError("input: holds text that is not valid Unicode") from None
    except (TypeError, ValueError) as e:
        raise DefinitionError(f"input: not JSON-serialisable ({e})") from None
    except RecursionError:
        raise DefinitionError("input: nested too deeply") from None
    if size > max_bytes:
        raise DefinitionError(f"input is {size} bytes, over the {max_bytes}-byte limit")
    return text


def input_layout(text: str, tasks: int) -> tuple[str, list[str], str | None]:
    """How ``push.lua`` stores input JSON ``text`` of a workflow of ``tasks`` tasks
    (``input_layout`` in ``lib/input.lua``): the value of field ``in``, the pieces after
    the first (fields ``in2``, ``in3``...) and the value of the input's own key (None:
    none).

    Up to :data:`INPUT_VALUE` bytes the JSON is ``in`` itself. Longer, it is cut into
    pieces, each ending before a UTF-8 continuation byte (so each piece is text of its
    own): ``in`` is ``"#<n>"`` (which no JSON can start with) and the first piece, the
    others are fields of their own, each at most :data:`INPUT_PIECE` bytes, ``in`` too.
    A longer value would turn the whole workflow hash from a compact listpack into a
    hashtable, several times bigger. Past :data:`INPUT_PIECES_MAX` pieces, or when the
    pieces would take a workflow's hash past :data:`LISTPACK_ENTRIES` fields once it has
    run (11 of its own, a record and an output per task), the JSON goes to a key of its
    own (``ShardKeys.workflow_input``) and ``in`` is :data:`INPUT_OWN_KEY`.
    """
    data = text.encode()
    size = len(data)
    if size <= INPUT_VALUE:
        return text, [], None
    if size > INPUT_PIECE * INPUT_PIECES_MAX - 2:
        return INPUT_OWN_KEY, [], text
    pieces: list[str] = []
    start = 0
    while start < size:
        end = start + INPUT_PIECE - (2 if start == 0 else 0)  # the first after "#<n>"
        back = 0
        while end < size and back < 3 and data[end] & 0xC0 == 0x80:
            end -= 1
            back += 1
        pieces.append(data[start:end].decode())
        start = end
    if len(pieces) > INPUT_PIECES_MAX or 11 + 2 * tasks + len(pieces) > LISTPACK_ENTRIES:
        return INPUT_OWN_KEY, [], text
    return f"#{len(pieces)}{pieces[0]}", pieces[1:], None


def stored_input(raw: Mapping[str, str], own: str | None = None) -> str:
    """The input JSON ("" for none) of a workflow hash's fields ``raw``, its pieces
    joined (``read_input`` in ``lib/input.lua``); ``own`` is the value of the input's own key,
    read when field ``in`` is :data:`INPUT_OWN_KEY` (see :func:`input_layout`)."""
    head = raw.get(F_INPUT) or ""
    if not head.startswith("#"):
        return head
    if head == INPUT_OWN_KEY:
        return own or ""
    n = int(head[1])
    if len(head) == 2:  # an earlier release's: every piece in a field of its own
        return "".join(raw[f"{F_INPUT}{k}"] for k in range(1, n + 1))
    return head[2:] + "".join(raw[f"{F_INPUT}{k}"] for k in range(2, n + 1))
