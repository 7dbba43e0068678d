"""States and the read-side records the engine returns."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class TaskState(StrEnum):
    """Where a task is in its life. Stored in Redis as these exact strings."""

    WAITING = "waiting"  # its trigger rule is not decided yet (some parent has not ended)
    READY = "ready"  # in its type's queue (or held while its workflow is paused)
    RUNNING = "running"  # claimed by an agent holding a lease
    # a wait task waiting for its signal, time or child run: no agent, slot or lease
    SUSPENDED = "suspended"
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # failed its last allowed attempt
    SKIPPED = "skipped"  # a branch not taken (its rule was not met): it will not run
    UPSTREAM_FAILED = "upstream_failed"  # its rule cannot be met because a parent failed
    CANCELLED = "cancelled"  # its workflow was cancelled before it ran

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_TASK_STATES


TERMINAL_TASK_STATES = frozenset(
    {
        TaskState.SUCCEEDED,
        TaskState.FAILED,
        TaskState.SKIPPED,
        TaskState.UPSTREAM_FAILED,
        TaskState.CANCELLED,
    }
)


class WorkflowState(StrEnum):
    """Where a workflow is in its life. Stored in Redis as these exact strings."""

    RUNNING = "running"
    PAUSED = "paused"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SCHEDULED = "scheduled"  # pushed to start later (push --at / --in)
    QUEUED = "queued"  # waiting for a slot of its concurrency key (or its schedule's)

    @property
    def finished(self) -> bool:
        return self in FINISHED_WORKFLOW_STATES


FINISHED_WORKFLOW_STATES = frozenset(
    {WorkflowState.SUCCEEDED, WorkflowState.FAILED, WorkflowState.CANCELLED}
)


class AgentState(StrEnum):
    """Liveness of an agent as the console shows it."""

    ONLINE = "online"  # heartbeat within two heartbeat intervals
    STALE = "stale"  # heartbeat late, lease not yet expired
    DEAD = "dead"  # lease expired (its tasks were or will be handed on)
    STOPPED = "stopped"  # left cleanly
    DRAINING = "draining"  # asked to drain: claims nothing, finishes its tasks, then stops


def decode_json(text: str | None) -> Any:
    """Decode a stored JSON value; ``None`` stays ``None``, non-JSON stays text."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


@dataclass
class TaskStatus:
    """One task of a workflow as stored now."""

    index: int
    name: str
    type: str
    state: TaskState
    priority: int = 0
    payload: Any = None
    parents: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    attempts: int = 0
    failures: int = 0
    max_attempts: int = 1
    agent: str | None = None
    output: Any = None
    error: str | None = None
    ready_at: float | None = None  # epoch seconds
    started_at: float | None = None
    finished_at: float | None = None
    # a map's items by state (waiting, ready, running, succeeded, failed, cancelled) and,
    # once its parent's output is expanded, "total"; None for a task that is not a map
    items: dict[str, int] | None = None
    # when it runs (engine.core.rules): a trigger rule, or "finally" (all_done, and its own
    # failure does not fail the workflow)
    trigger: str = "all_success"
    timeout: float | None = None  # seconds an attempt may run
    delay: float | None = None  # seconds it waits once it could run
    when: str | None = None  # its condition (engine.spec.conditions)
    # why it was skipped by its condition (the expression and the values it read) or by
    # its handler (Skip's reason)
    skip_reason: str | None = None
    # a wait task's (engine.spec.wait_tasks): what it waits for, {"signal", "timeout", "on_timeout"}
    # or {"sleep"} / {"until"} (seconds), with "due": when its timer ends (epoch seconds)
    wait: dict[str, Any] | None = None
    # ... and what ended it: {"name", "id", "by", "at", "comment", "rejected", "timed_out"}
    signal: dict[str, Any] | None = None
    child: str | None = None  # a run: task's child run, once started (engine.runtime.child_runs)
    # its rate limit's bucket key (engine.spec.rate_limits), and while it is ready and that bucket
    # has no token: when the next one comes (epoch seconds)
    rate_key: str | None = None
    throttled_until: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d = self.__dict__.copy()
        d["state"] = str(self.state)
        return d


ITEM_STATES = ("waiting", "ready", "running", "succeeded", "failed", "cancelled")


@dataclass
class ItemStatus:
    """One item of a map (the task ``<map>.<index>``) as stored now."""

    index: int
    state: TaskState
    attempts: int = 0
    failures: int = 0
    element: Any = None  # kept while the item may run (again); gone once it succeeded
    output: Any = None
    error: str | None = None
    agent: str | None = None
    ready_at: float | None = None  # epoch seconds
    started_at: float | None = None
    finished_at: float | None = None
    # a map with steps: each step's state in this item, by step name, in step order
    steps: dict[str, TaskState] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = self.__dict__.copy()
        d["state"] = str(self.state)
        if self.steps is not None:
            d["steps"] = {name: str(s) for name, s in self.steps.items()}
        return d


@dataclass
class WorkflowSummary:
    """The few fields a list shows of a workflow."""

    id: str
    name: str
    state: WorkflowState
    total: int
    succeeded: int
    failed: int
    skipped: int
    created_at: float
    finished_at: float | None
    upstream_failed: int = 0

    @property
    def done(self) -> int:
        return self.succeeded

    def to_dict(self) -> dict[str, Any]:
        d = self.__dict__.copy()
        d["state"] = str(self.state)
        return d


@dataclass
class WorkflowStatus(WorkflowSummary):
    """A whole workflow: summary, counts by task state and every task."""

    counts: dict[str, int] = field(default_factory=dict)
    tasks: list[TaskStatus] = field(default_factory=list)
    input: Any = None  # given at push, shared by every task
    start_at: float | None = None  # a scheduled workflow's start time (epoch seconds)
    reason: str | None = None  # why it ended so, beyond its state: "deadline"
    deadline: float | None = None  # when its deadline falls, epoch seconds
    # a child run's parent task, "<wid>:<task index>:<attempt>" (engine.runtime.child_runs), how
    # deep it nests (0: no one's child) and the run at the top of its tree
    parent: str | None = None
    depth: int = 0
    root: str | None = None
    template: str | None = None  # the template it runs, when it was run from one

    def task(self, name: str) -> TaskStatus:
        """The task called ``name``."""
        for t in self.tasks:
            if t.name == name:
                return t
        raise KeyError(name)

    def why(self, task: TaskStatus) -> str:
        """Why ``task`` is in its state, by its rule and its parents' states, e.g.
        ``all_success: 3/5 succeeded, 1 failed, 1 pending → upstream_failed``; for a
        task skipped by its condition or its handler, the reason it keeps."""
        from engine.core.rules import explain

        if task.skip_reason and task.state == "skipped":
            return task.skip_reason

        by_name = {t.name: t for t in self.tasks}
        ups = [str(by_name[p].state) for p in task.parents if p in by_name]
        return explain(task.trigger, ups, str(task.state))

    def failures(self) -> tuple[list[str], list[str]]:
        """``(unhandled, handled)``: the failed tasks that fail the workflow, and those a
        failure branch downstream handled (a finally task's failure is in neither)."""
        from engine.core.rules import FINALLY, workflow_result

        index = {t.name: t.index for t in self.tasks}
        parents = [[index[p] for p in t.parents if p in index] for t in self.tasks]
        rules = [t.trigger for t in self.tasks]
        _, unhandled = workflow_result([str(t.state) for t in self.tasks], parents, rules)
        failed = [t.index for t in self.tasks if t.state == "failed" and t.trigger != FINALLY]
        names = [t.name for t in self.tasks]
        return [names[i] for i in unhandled], [names[i] for i in failed if i not in unhandled]

    def to_dict(self) -> dict[str, Any]:
        d = WorkflowSummary.to_dict(self)
        d["tasks"] = [t.to_dict() for t in self.tasks]
        return d


@dataclass
class AgentInfo:
    """One agent as the registry knows it."""

    id: str
    types: list[str]
    concurrency: int
    state: AgentState
    heartbeat_age: float | None  # seconds since the last heartbeat
    lease_s: float
    heartbeat_s: float
    running: list[str]  # "<wid>:<idx>" of the tasks it holds
    host: str = ""
    pid: int = 0
    started_at: float | None = None
    records: int = 1  # the task record form it reads and writes (codec.record.RECORD_FORM)

    def to_dict(self) -> dict[str, Any]:
        d = self.__dict__.copy()
        d["state"] = str(self.state)
        return d


@dataclass
class Stats:
    """Counters read in O(1) per shard and summed."""

    tasks: dict[str, int]
    workflows: dict[str, int]
    tasks_pushed: int
    workflows_pushed: int
    queued: dict[str, int]  # ready tasks waiting per type
    # finished workflows past their retention that housekeeping has not removed yet
    retention_backlog: int = 0

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


@dataclass
class Event:
    """One lifecycle event. ``kind`` is e.g. ``task.succeeded`` or ``workflow.failed``."""

    kind: str
    wid: str
    ts: float
    task: int | None = None
    data: dict[str, Any] = field(default_factory=dict)
    id: str = ""  # the stream entry id the event came in
    task_name: str | None = None  # filled in by Engine.name_tasks

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


@dataclass
class TemplateInfo:
    """One version of a stored template (``redisflow template put``)."""

    name: str
    version: int
    latest: int  # the newest version (runs start from it)
    put_at: float  # when this version was stored, epoch seconds
    source: str  # where its text came from (a file name)
    runs: int = 0  # runs of the template pushed so far, every version
    text: str | None = None  # the workflow file as it was put
    new: bool = False  # put_template only: this put stored a new version
    # put_template only: what to know about it (a template that runs itself)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = self.__dict__.copy()
        del d["new"], d["warnings"]
        return d


@dataclass(frozen=True)
class RunResult:
    """What :meth:`Engine.run` did: the run's workflow id, whether it existed already
    (its idempotency key named it: nothing was pushed), and the template version."""

    id: str
    existing: bool
    template: str
    version: int
