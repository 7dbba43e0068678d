"""The Workflow screen's data: one workflow's tasks, their looks, and its graph views."""

from __future__ import annotations

from collections.abc import Sequence

from engine import Engine, NotFoundError, TaskStatus, WorkflowStatus

from .dag import (
    DagGraph,
    LevelRow,
    best_mode,
    fingerprint,
    focus_graph,
    group_graph,
    level_rows,
    levels_of,
    map_text,
    task_graph,
    task_look,
)

TASK_FILTERS = ("all", "failed", "running")
DAG_MODES = ("tasks", "groups", "focus", "levels")


def read_workflow(engine: Engine, wid: str) -> WorkflowStatus | None:
    """The workflow as stored now, or ``None`` once it is cleaned up."""
    try:
        return engine.status(wid)
    except NotFoundError:
        return None


def waiting_for_signal(tasks: Sequence[TaskStatus]) -> list[TaskStatus]:
    """The wait tasks reached that wait for a signal now (one not reached yet is not
    waiting, though a signal sent to it would be kept for it)."""
    return [
        t
        for t in tasks
        if t.wait is not None and "signal" in t.wait and t.state in ("ready", "suspended")
    ]


def task_matches(task: TaskStatus, filter_: str) -> bool:
    """Whether a task passes the table's filter (``all``, ``failed``, ``running``)."""
    if filter_ == "failed":
        return task.state == "failed" or (task.state == "ready" and task.failures > 0)
    if filter_ == "running":
        return task.state == "running"
    return True


class WorkflowView:
    """One open workflow: the last status read and what is derived from its definition.

    The definition-derived parts (levels, fingerprint, group graph) are computed on the
    first status only; later statuses only update the task looks.
    """

    def __init__(self, wid: str) -> None:
        self.wid = wid
        self.status: WorkflowStatus | None = None
        self.gone = False
        self.looks: list[str] = []
        self.map_counts: dict[int, str] = {}  # per map (task index), its chip's counts
        self.level: list[int] = []
        self.key = ""
        self._graphs: dict[tuple[str, int], DagGraph] = {}

    def update(self, status: WorkflowStatus | None) -> set[int]:
        """Take a freshly read status; returns the indexes of tasks whose look changed."""
        if status is None:
            self.gone = True
            return set()
        first = self.status is None or len(status.tasks) != len(self.looks)
        self.status = status
        looks = [task_look(t) for t in status.tasks]
        counts = {t.index: map_text(t) for t in status.tasks if t.items is not None}
        if first:
            self.level = levels_of(status.tasks)
            self.key = fingerprint(status.tasks)
            self._graphs.clear()
            changed = set(range(len(looks)))
        else:
            changed = {i for i, (a, b) in enumerate(zip(self.looks, looks, strict=True)) if a != b}
            changed |= {i for i, text in counts.items() if self.map_counts.get(i) != text}
        self.looks = looks
        self.map_counts = counts
        return changed

    @property
    def tasks(self) -> Sequence[TaskStatus]:
        return self.status.tasks if self.status else ()

    def default_mode(self) -> str:
        """The DAG view this workflow opens in, by size."""
        return best_mode(self.tasks, len(self.graph("groups").labels))

    def graph(self, mode: str, focus: int = 0) -> DagGraph:
        """The graph of ``mode`` (``tasks``, ``groups``, ``focus`` around a task)."""
        cache_key = (mode, focus if mode == "focus" else 0)
        found = self._graphs.get(cache_key)
        if found is None:
            if mode == "groups":
                found = group_graph(self.tasks, self.level, self.key)
            elif mode == "focus":
                found = focus_graph(self.tasks, focus, self.key)
            else:
                found = task_graph(self.tasks, self.key)
            if mode != "focus":
                self._graphs[cache_key] = found
        return found

    def levels(self) -> list[LevelRow]:
        """Progress per level."""
        return level_rows(self.looks, self.level, [t.name for t in self.tasks])

    def filtered(self, filter_: str) -> list[TaskStatus]:
        """The tasks the table shows under ``filter_``."""
        return [t for t in self.tasks if task_matches(t, filter_)]

    def counts(self) -> dict[str, int]:
        """Tasks per look."""
        out: dict[str, int] = {}
        for look in self.looks:
            out[look] = out.get(look, 0) + 1
        return out
