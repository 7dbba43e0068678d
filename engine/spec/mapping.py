"""Runtime fan-out: a task that maps over a parent's output, one item per element.

``wf.task("count", map=split["sections"])`` runs ``count`` once per element of the list
under ``sections`` in ``split``'s output (``map=split`` when the output is itself a list);
each item gets its element as ``task.item``. A child of ``count`` is its gather: it runs
when every item has ended and gets the items' outputs, in item order, as ``count``'s
output. Semantics (see docs/maps.md):

* an empty list: ``on_empty="succeed"`` (the default: output ``[]``, the gather runs),
  ``"skip"`` (the map and what depends on it are skipped; the workflow can still
  succeed) or ``"fail"``;
* an output that is not a list, or lacks the key: the map fails, not retried;
* a failed item (after its own retries) fails the map unless ``tolerate`` allows it (a
  count, or ``"5%"``): its slot in the gathered list is then ``null``;
* at most ``concurrency`` items are ready or running at once (the window); at most
  ``max_items`` items (default 100,000): more fails the map with a clear error;
* with ``steps`` (a small workflow of its own) each item runs those steps, each with its
  own ``after``, type, payload and attempts, and each item's steps progress on their own:
  a step gets the element and its parents' outputs within the item; the item's output is
  its last step's (``{step: output}`` of several last steps); a step that finally fails
  fails its item (its error "step <name>: ..."), and retrying the item runs its failed
  steps again, keeping what succeeded;
* the steps manager's files set ``gather`` (the ``itemListKey``): the map's output is then the
  manager's gather (:func:`gather_of`), not the list of the items' outputs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from engine.errors import DefinitionError

DEFAULT_WINDOW = 1000
DEFAULT_MAX_ITEMS = 100_000
ON_EMPTY = ("succeed", "skip", "fail")
_PERCENT = re.compile(r"^(\d+(\.\d+)?)%$")


@dataclass(frozen=True)
class OutputRef:
    """A parent's output, or one key of it: what a map maps over (``split["sections"]``)."""

    task: str
    key: str | None = None


@dataclass
class MapSpec:
    """How a task maps over a parent's output (see the module's docstring)."""

    over: str
    key: str | None = None
    concurrency: int = DEFAULT_WINDOW
    max_items: int = DEFAULT_MAX_ITEMS
    on_empty: str = "succeed"
    tolerate: int | str = 0
    steps: list[Any] | None = None  # the TaskDefs each item runs (None: the task itself)
    # The steps manager's gather (its files set it, see gather_of): the map's output is one object,
    # the items' values under element_key(gather) listed under ``gather`` in item order,
    # their other keys merged in; None: the native list of the items' outputs.
    gather: str | None = None


def element_key(list_key: str) -> str:
    """The steps manager's name for one element of the list under ``list_key``: the key less one
    trailing ``s`` when it is longer than one character (``sections`` -> ``section``,
    ``categories`` -> ``categorie``, ``address`` -> ``addres``), as its manager reads it."""
    return list_key[:-1] if len(list_key) > 1 and list_key.endswith("s") else list_key


def gather_of(outputs: list[Any], list_key: str) -> dict[str, Any]:
    """The steps manager's gather of its items' ``outputs`` (the reference of the Lua gather,
    ``manager_gather`` in ``lib/maps.lua``): each object's value under the element key listed,
    in order, under ``list_key``; every other key merged in, the first item's value
    winning; an output that is not an object adds nothing."""
    elem = element_key(list_key)
    listed: list[Any] = []
    merged: dict[str, Any] = {}
    for out in outputs:
        if not isinstance(out, dict):
            continue
        for k, v in out.items():
            if k == elem:
                listed.append(v)
            elif k != list_key and k not in merged:
                merged[k] = v
    return {list_key: listed, **merged}


def check_map(spec: MapSpec, task: str, parents: list[str], where: str) -> None:
    """Raise :class:`DefinitionError` (prefixed with ``where``) unless ``spec`` is valid
    for ``task`` whose parents are ``parents``."""
    at = f"{where}task {task!r}: map"
    if not isinstance(spec.over, str) or spec.over not in parents:
        raise DefinitionError(f"{at} over {spec.over!r}, which is not one of its parents")
    if spec.key is not None and (not isinstance(spec.key, str) or not spec.key):
        raise DefinitionError(f"{at}: key must be a non-empty string, not {spec.key!r}")
    for name in ("concurrency", "max_items"):
        value = getattr(spec, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DefinitionError(f"{at}: {name} must be a whole number >= 1, not {value!r}")
    if spec.max_items > 10_000_000:
        raise DefinitionError(f"{at}: max_items is at most 10,000,000")
    if spec.on_empty not in ON_EMPTY:
        raise DefinitionError(f"{at}: on_empty must be one of {', '.join(ON_EMPTY)}")
    tol = spec.tolerate
    if isinstance(tol, bool) or not (
        (isinstance(tol, int) and tol >= 0) or (isinstance(tol, str) and _PERCENT.match(tol))
    ):
        raise DefinitionError(f"{at}: tolerate must be a count >= 0 or a percentage like '5%'")
    if isinstance(tol, str) and float(tol[:-1]) > 100:
        raise DefinitionError(f"{at}: tolerate is at most 100%")
    if spec.gather is not None and (not isinstance(spec.gather, str) or not spec.gather):
        raise DefinitionError(f"{at}: gather must be a non-empty string, not {spec.gather!r}")
    if spec.steps is not None and (not isinstance(spec.steps, list) or not spec.steps):
        raise DefinitionError(f"{at}: steps must be a non-empty list of tasks")


def map_of(value: Any, task: str) -> MapSpec:
    """A :class:`MapSpec` from what ``Workflow.task(map=...)`` takes: a task, an
    :class:`OutputRef`, a task name, or a spec already."""
    if isinstance(value, MapSpec):
        return value
    if isinstance(value, OutputRef):
        return MapSpec(value.task, value.key)
    name = getattr(value, "name", value)
    if isinstance(name, str):
        return MapSpec(name)
    raise DefinitionError(f"task {task!r}: map must name a parent task, not {value!r}")


def items_of(output: Any, spec: MapSpec, over: str, max_items: int) -> list[Any] | str:
    """The elements a map runs over, from its parent's decoded output; or the error that
    fails the map (not a list, a missing key, too many items)."""
    what = over if spec.key is None else f"{over}.{spec.key}"
    value = output
    if spec.key is not None:
        if not isinstance(output, dict):
            kind = "no output" if output is None else f"a {type(output).__name__}"
            return f"cannot map over {what}: {over}'s output is {kind}, not an object"
        if spec.key not in output:
            return f"cannot map over {what}: {over}'s output has no key {spec.key!r}"
        value = output[spec.key]
    if not isinstance(value, list):
        kind = "null" if value is None else f"a {type(value).__name__}"
        return f"cannot map over {what}: it is {kind}, expected a list"
    if len(value) > max_items:
        return f"cannot map over {what}: {len(value):,} items, over max_items {max_items:,}"
    return value
