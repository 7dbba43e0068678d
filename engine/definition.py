"""Workflow definitions: the builder, validation, and the compact form pushed to Redis."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import DefinitionError

DEFAULT_MAX_PAYLOAD = 1024 * 1024
DEFAULT_BACKOFF_MAX = 600.0  # seconds: retry delays double up to this
PRIORITY_RANGE = (-999, 999)
MAX_TASKS = 100_000
_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


@dataclass
class TaskDef:
    """One task of a workflow definition.

    Attributes:
        name: unique within the workflow.
        payload: any JSON value, handed to the handler.
        type: agents serve tasks by type ("" is the default type).
        priority: higher runs first among ready tasks of the same type.
        after: names of the parent tasks, which must all succeed before this one runs.
        max_attempts: how many times a failing handler is tried.
        where: where the task was defined (file and line), for error messages.
    """

    name: str
    payload: Any = None
    type: str = ""
    priority: int = 0
    after: list[str] = field(default_factory=list)
    max_attempts: int = 1
    where: str | None = None


class Workflow:
    """A workflow definition built in Python.

    Example:
        >>> wf = Workflow("TestWorkflow")
        >>> a = wf.task("TestNode1", payload="Node1")
        >>> b = wf.task("TestNode2", payload="Node2", after=[a])
    """

    def __init__(
        self,
        name: str,
        *,
        retry_backoff: float = 1.0,
        retry_backoff_max: float = DEFAULT_BACKOFF_MAX,
        where: str | None = None,
    ):
        self.name = name
        self.retry_backoff = retry_backoff
        self.retry_backoff_max = retry_backoff_max
        self.where = where
        self.tasks: list[TaskDef] = []

    def task(
        self,
        name: str,
        payload: Any = None,
        *,
        type: str = "",
        priority: int = 0,
        after: Iterable[TaskDef | str] = (),
        max_attempts: int = 1,
        where: str | None = None,
    ) -> TaskDef:
        """Add a task and return it; pass it (or its name) in another task's ``after``."""
        parents = [p.name if isinstance(p, TaskDef) else p for p in after]
        t = TaskDef(name, payload, type, priority, parents, max_attempts, where)
        self.tasks.append(t)
        return t

    def __len__(self) -> int:
        return len(self.tasks)

    def __repr__(self) -> str:
        return f"Workflow({self.name!r}, {len(self.tasks)} tasks)"


def _at(where: str | None) -> str:
    return f"{where}: " if where else ""


def _fail(where: str | None, message: str) -> DefinitionError:
    return DefinitionError(f"{_at(where)}{message}")


def validate(wf: Workflow, max_payload: int = DEFAULT_MAX_PAYLOAD) -> list[str]:
    """Check a definition; raise :class:`DefinitionError` naming what and where.

    Returns the JSON text of every task's payload (``None`` for no payload), in task order.
    """
    where = wf.where
    if not isinstance(wf.name, str):
        raise _fail(where, f"workflow name must be a string, not {wf.name!r} (quote it)")
    if not wf.name.strip():
        raise _fail(where, "the workflow has no name")
    if not wf.tasks:
        raise _fail(where, f"workflow {wf.name!r} has no tasks")
    if len(wf.tasks) > MAX_TASKS:
        raise _fail(where, f"workflow {wf.name!r} has {len(wf.tasks)} tasks; at most {MAX_TASKS}")
    if not isinstance(wf.retry_backoff, int | float) or not 0 <= wf.retry_backoff < math.inf:
        raise _fail(where, f"workflow {wf.name!r}: retry_backoff must be a number >= 0")
    cap = wf.retry_backoff_max
    if isinstance(cap, bool) or not isinstance(cap, int | float) or not 0 <= cap < math.inf:
        raise _fail(where, f"workflow {wf.name!r}: retry_backoff_max must be a number >= 0")
    seen: dict[str, TaskDef] = {}
    payloads: list[str] = []
    lo, hi = PRIORITY_RANGE
    for t in wf.tasks:
        here = t.where or where
        if not isinstance(t.name, str):
            raise _fail(here, f"task name must be a string, not {t.name!r} (quote it)")
        if not t.name:
            raise _fail(here, f"a task of workflow {wf.name!r} has no name")
        if t.name in seen:
            first = seen[t.name].where
            also = f" (first defined at {first})" if first else ""
            raise _fail(here, f"duplicate task name {t.name!r}{also}")
        seen[t.name] = t
        if not isinstance(t.type, str):
            raise _fail(here, f"task {t.name!r}: type must be a string, not {t.type!r}")
        if isinstance(t.priority, bool) or not isinstance(t.priority, int):
            raise _fail(here, f"task {t.name!r}: priority must be an integer, not {t.priority!r}")
        if not lo <= t.priority <= hi:
            raise _fail(here, f"task {t.name!r}: priority {t.priority} is outside {lo}..{hi}")
        if isinstance(t.max_attempts, bool) or not isinstance(t.max_attempts, int):
            raise _fail(here, f"task {t.name!r}: max_attempts must be an integer")
        if t.max_attempts < 1:
            raise _fail(here, f"task {t.name!r}: max_attempts must be at least 1")
        if t.payload is None:
            payloads.append("")
            continue
        try:
            text = _encode(t.payload)
        except (TypeError, ValueError) as e:
            raise _fail(here, f"task {t.name!r}: payload is not JSON-serialisable ({e})") from None
        size = len(text.encode())
        if size > max_payload:
            raise _fail(
                here, f"task {t.name!r}: payload is {size} bytes, over the {max_payload}-byte limit"
            )
        payloads.append(text)
    children: dict[str, list[str]] = {name: [] for name in seen}
    # When every parent is defined before its child (the usual way to write a DAG) the
    # definition order is a topological order and no cycle can exist.
    earlier: set[str] = set()
    ordered = True
    for t in wf.tasks:
        for p in t.after:
            if p == t.name:
                raise _fail(t.where or where, f"task {t.name!r} depends on itself")
            if p not in seen:
                raise _fail(t.where or where, f"task {t.name!r} depends on unknown task {p!r}")
            children[p].append(t.name)
            ordered = ordered and p in earlier
        if len(set(t.after)) != len(t.after):
            raise _fail(t.where or where, f"task {t.name!r} lists a parent twice")
        earlier.add(t.name)
    cycle = None if ordered else find_cycle(children)
    if cycle:
        raise _fail(where, f"workflow {wf.name!r} has a cycle: {' -> '.join(cycle)}")
    return payloads


def find_cycle(children: dict[str, list[str]]) -> list[str] | None:
    """A cycle of the graph as a closed path (``[a, b, a]``), or ``None`` for a DAG.

    Iterative depth-first search, so a chain of 100,000 tasks does not hit the recursion
    limit.
    """
    done: set[str] = set()
    for root in children:
        if root in done:
            continue
        path = [root]
        on_path = {root}
        stack = [iter(children[root])]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                node = path.pop()
                on_path.discard(node)
                done.add(node)
            elif nxt in on_path:
                return path[path.index(nxt) :] + [nxt]
            elif nxt not in done:
                path.append(nxt)
                on_path.add(nxt)
                stack.append(iter(children[nxt]))
    return None


def task_index(wf_tasks: Sequence[str], name: str) -> int:
    """The index of task ``name`` in a list of task names."""
    try:
        return list(wf_tasks).index(name)
    except ValueError:
        raise DefinitionError(f"no task named {name!r}") from None
