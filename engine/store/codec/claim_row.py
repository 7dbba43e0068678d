"""The claim reply row, decoded into a :class:`~engine.runtime.handlers.Task`.

The Lua half is ``start_task`` in ``lua/lib/claim_row.lua``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from engine.core.model import decode_json
from engine.core.task import Task


def decode_claim_rows(reply: Sequence[Any], at: int = 0) -> list[Task]:
    """The tasks of a flat list of claim rows from ``reply[at]`` on, each as ``put_row`` in
    ``lib/claim_row.lua`` appends it: a header ``"<wid>\\0<index>\\0<name>\\0<type>\\0
    <attempt>\\0<parent names JSON>\\0<extras JSON or "">"``, the payload JSON, the
    workflow input JSON or "", how long it waited ready (ms), how many parents' outputs
    follow, them, and for an item (index ``"c.k"``, or ``"c.k.s"`` for its step s) its
    element JSON. The extras, when there are any: the attempt's ``timeout`` ms, a gather's
    ``errors`` of tolerated items, a condition's ``when`` and its parents' ``states`` (in
    their order). (A hot path: one per task.)"""
    tasks: list[Task] = []
    append = tasks.append
    end = len(reply)
    while at < end:
        wid, idx, name, typ, attempt, parent_names, extras = reply[at].split("\0")
        k = reply[at + 4]
        parents = _parents(parent_names, reply[at + 5 : at + 5 + k]) if k else {}
        given = reply[at + 2]
        c, dot, rest = idx.partition(".")
        task = Task(
            wid,
            int(c),
            name,
            typ,
            _decode_value(reply[at + 1]),
            int(attempt),
            parents,
            decode_json(given) if given else None,
        )
        task._waited_ms = reply[at + 3]
        at += 5 + k
        if dot:
            item, _, s = rest.partition(".")
            task.item_index = int(item)
            task.item = decode_json(reply[at])
            at += 1
            if s:
                task.step = int(s)
        if extras:  # the attempt's timeout, a gather's errors of tolerated items, a condition
            _extras(task, decode_json(extras), parents)
        append(task)
    return tasks


def decode_claim_row(row: Sequence[Any]) -> Task:
    """The task of one claim row (decode_claim_rows)."""
    [task] = decode_claim_rows(row)
    return task


def _extras(task: Task, extras: dict[str, Any], parents: dict[str, Any]) -> None:
    if "timeout" in extras:
        task.timeout = extras["timeout"] / 1000
    if "when" in extras:  # a condition, and its parents' states (engine.spec.conditions)
        task._when = extras["when"]
        task._states = dict(zip(parents, extras.get("states") or (), strict=False))
    if "errors" in extras:
        task._errors = {
            p: {int(k): e for k, e in errs.items()} if isinstance(errs, dict) else errs
            for p, errs in extras["errors"].items()
        }


# Claim rows repeat the same texts (a shared definition's payloads and parents' names,
# outputs like "null"): decode each once. Only immutable values are kept, so no handler
# can change what another task is given.
_CACHE_MAX = 4096
_KEPT_TEXT = 4096  # longer texts are decoded each time: the caches stay small
_decoded: dict[str, Any] = {}
_IMMUTABLE = (str, int, float, bool, type(None))


def _decode_value(text: str | None) -> Any:
    if not text:
        return None
    value = _decoded.get(text, _decoded)
    if value is not _decoded:
        return value
    value = decode_json(text)
    if isinstance(value, _IMMUTABLE) and len(text) <= _KEPT_TEXT:
        if len(_decoded) >= _CACHE_MAX:
            _decoded.clear()
        _decoded[text] = value
    return value


@functools.lru_cache(maxsize=_CACHE_MAX)
def _names(text: str) -> tuple[str, ...]:
    return tuple(json.loads(text))


# The parents of tasks that share them (a fan-out's: the same names and outputs), made
# once and copied for each task (its own dict), when every output is immutable.
_parent_maps: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}


def _parents(names: str, outputs: Sequence[str]) -> dict[str, Any]:
    key = (names, tuple(outputs))
    shared = _parent_maps.get(key)
    if shared is not None:
        return shared.copy()
    parents = {p: _decode_value(out) for p, out in zip(_names(names), outputs, strict=True)}
    if sum(map(len, outputs)) <= _KEPT_TEXT and all(
        isinstance(v, _IMMUTABLE) for v in parents.values()
    ):
        if len(_parent_maps) >= _CACHE_MAX:
            _parent_maps.clear()
        _parent_maps[key] = parents.copy()
    return parents
