"""The claim reply row, decoded into a :class:`~engine.handlers.Task`.

The Lua half is ``start_task`` in ``lua/lib/claim_row.lua``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from ...handlers import Task
from ...model import decode_json


def decode_claim_row(row: Sequence[Any]) -> Task:
    """A task as ``start_task`` in ``lib/claim_row.lua`` returns it: ``{wid, idx, name, type,
    payload, attempt, parent names JSON, {their outputs}, workflow input JSON or ""}``,
    then for an item (idx ``"c.k"``, or ``"c.k.s"`` for its step s) its element JSON
    ("" for a plain task), then, when there are any, extras as a JSON object: the
    attempt's ``timeout`` ms, a gather's ``errors`` of tolerated items, a condition's
    ``when`` and its parents' ``states`` (in their order); last, how long it waited ready
    (ms, an integer: the only one there). (A hot path: one per task.)"""
    wid, idx, name, typ, payload, attempt, parent_names, outputs, given, *rest = row
    waited = rest.pop() if rest and type(rest[-1]) is int else 0
    parents = (
        {p: _decode_value(out) for p, out in zip(_names(parent_names), outputs, strict=True)}
        if outputs
        else {}
    )
    given_value = decode_json(given) if given else None
    if type(idx) is int or "." not in idx:
        task = Task(
            str(wid),
            int(idx),
            name,
            typ,
            _decode_value(payload),
            int(attempt),
            parents,
            given_value,
        )
    else:
        c, _, k = str(idx).partition(".")
        task = Task(
            str(wid), int(c), name, typ, _decode_value(payload), int(attempt), parents, given_value
        )
        k, _, s = k.partition(".")
        task.item_index = int(k)
        task.item = decode_json(rest[0])
        if s:
            task.step = int(s)
    task._waited_ms = waited
    if len(rest) > 1:  # extras: the attempt's timeout, a gather's errors of tolerated items
        extras = decode_json(rest[1])
        if "timeout" in extras:
            task.timeout = extras["timeout"] / 1000
        if "when" in extras:  # a condition, and its parents' states (engine.conditions)
            task._when = extras["when"]
            task._states = dict(zip(parents, extras.get("states") or (), strict=False))
        if "errors" in extras:
            task._errors = {
                p: {int(k): e for k, e in errs.items()} if isinstance(errs, dict) else errs
                for p, errs in extras["errors"].items()
            }
    return task


# Claim rows repeat the same texts (a shared definition's payloads and parents' names,
# outputs like "null"): decode each once. Only immutable values are kept, so no handler
# can change what another task is given.
_CACHE_MAX = 4096
_decoded: dict[str, Any] = {}
_IMMUTABLE = (str, int, float, bool, type(None))


def _decode_value(text: str | None) -> Any:
    if not text:
        return None
    value = _decoded.get(text, _decoded)
    if value is not _decoded:
        return value
    value = decode_json(text)
    if isinstance(value, _IMMUTABLE):
        if len(_decoded) >= _CACHE_MAX:
            _decoded.clear()
        _decoded[text] = value
    return value


@functools.lru_cache(maxsize=_CACHE_MAX)
def _names(text: str) -> tuple[str, ...]:
    return tuple(json.loads(text))
