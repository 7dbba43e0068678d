"""Latency as a handler sees it: when handlers start after their task became ready, and
after their parents ended.

With ``redisflow-demo --handler-latency`` every agent notes, for the tasks of one
workflow in ``step`` (by id: ``--latency-sample`` workflows in all), when its handler
started and ended (the machine's clock, as Redis's ``TIME`` reads it: agents and Redis
share the host). The benchmark then reads those workflows back and works out:

* dispatch latency: a task's handler start less the time Redis recorded it ready (kept
  to the millisecond: the record's times are ms after the run's creation). For a root
  task that is from its push; for the others, from the completion that released them;
* step latency: a task's handler start less the end of its last parent's handler (both
  on the agents' clock, to the µs): the report of the parent, the release of the child,
  its claim and its start, whichever agent runs each.

Off by default: the notes cost each task a check of its workflow id, which the CPU
figures should not carry.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from engine import Engine, Task

# (workflow id, task index, handler start, handler end), epoch seconds
Stamp = tuple[str, int, float, float]


def sample_step(workflows: int, sample: int) -> int:
    """Every how many workflows (by id) one is sampled, for about ``sample`` of them."""
    return max(1, workflows // max(1, sample))


def stamped(
    handler: Callable[[Task], Any], step: int, stamps: list[Stamp], shards: int = 1
) -> Callable[[Task], Any]:
    """``handler``, noting start and end of the tasks of every ``step``-th workflow (by
    id) in ``stamps``. Ids go up by ``shards`` (the deployment's shard count) from one
    workflow to the next."""
    clock = time.time

    def note(task: Task) -> Any:
        if int(task.workflow_id) // shards % step:
            return handler(task)
        began = clock()
        try:
            return handler(task)
        finally:
            stamps.append((task.workflow_id, task.index, began, clock()))

    return note


def handler_latency(engine: Engine, stamps: Iterable[Stamp]) -> tuple[list[float], list[float]]:
    """Dispatch and step latencies in ms of the stamped tasks (their workflows read back
    with :meth:`Engine.status`); a task that ran more than once counts its last run."""
    runs: dict[str, dict[int, tuple[float, float]]] = {}
    for wid, index, began, ended in stamps:
        runs.setdefault(wid, {})[index] = (began, ended)
    dispatch: list[float] = []
    step: list[float] = []
    for wid, ran in runs.items():
        status = engine.status(wid)
        by_name = {t.name: t.index for t in status.tasks}
        for t in status.tasks:
            if t.index not in ran:
                continue
            began = ran[t.index][0]
            if t.ready_at is not None:
                dispatch.append((began - t.ready_at) * 1000.0)
            ends = [ran[by_name[p]][1] for p in t.parents if by_name.get(p) in ran]
            if t.parents and len(ends) == len(t.parents):
                step.append((began - max(ends)) * 1000.0)
    return dispatch, step
