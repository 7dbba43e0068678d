"""A workflow's attempts over time, for a timeline (Gantt) view: from its events in the
capped stream, and from its task records where the stream no longer reaches."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.core.model import TaskState, WorkflowStatus

if TYPE_CHECKING:
    from engine.store.reads import Reads

# how an attempt ended: the task's own states, plus these two
ATTEMPT_RETRIED = "retried"  # it failed and the task was tried again
ATTEMPT_LOST = "lost"  # its agent was lost (the lease ran out): the task was handed on


@dataclass
class Attempt:
    """One run of a task: from its claim to its outcome (``end`` ``None``: running)."""

    task: str
    index: int
    number: int  # 1 for the first attempt
    start: float  # epoch seconds
    end: float | None
    outcome: str  # running, succeeded, failed, retried, lost, cancelled
    agent: str | None = None
    error: str | None = None


@dataclass
class Timeline:
    """A workflow's attempts, task by task, and its span. ``aged_out``: per task index,
    how many of its earlier attempts the capped event stream no longer tells (their
    times are gone; the attempts shown are numbered after them)."""

    status: WorkflowStatus
    attempts: dict[int, list[Attempt]]  # by task index, in order
    begin: float
    end: float | None  # None while it runs
    aged_out: dict[int, int] = field(default_factory=dict)

    @property
    def attempt_count(self) -> int:
        """Every attempt the task table counts: those shown and those aged out."""
        return sum(len(a) for a in self.attempts.values()) + sum(self.aged_out.values())


_ENDS = {
    "task.succeeded": TaskState.SUCCEEDED.value,
    "task.failed": TaskState.FAILED.value,
    "task.retrying": ATTEMPT_RETRIED,
    "task.requeued": ATTEMPT_LOST,
}


def timeline(reads: Reads, wid: str | int) -> Timeline:
    """Every attempt of workflow ``wid``'s tasks that its events still tell, completed
    from its records (the latest attempt of a task whose events the capped stream has
    dropped, and a map's span from its first item to its last)."""
    st = reads.status(wid)
    attempts: dict[int, list[Attempt]] = {t.index: [] for t in st.tasks}
    open_: dict[int, Attempt] = {}
    names = {t.index: t.name for t in st.tasks}
    for e in reads.workflow_events(str(wid), st.created_at):
        if e.task is None or e.task not in attempts:
            continue
        if e.kind == "task.claimed":
            done = attempts[e.task]
            a = Attempt(names[e.task], e.task, len(done) + 1, e.ts, None, "running")
            a.agent = e.data.get("agent")
            done.append(a)
            open_[e.task] = a
        elif e.kind in _ENDS and e.task in open_:
            a = open_.pop(e.task)
            a.end, a.outcome = e.ts, _ENDS[e.kind]
            a.error = e.data.get("error")
    for t in st.tasks:
        done = attempts[t.index]
        if t.started_at is None:
            continue
        last = done[-1] if done else None
        if last is None or last.start < t.started_at - 0.001:
            # the stream no longer tells this attempt (or a map, which is not claimed)
            done.append(
                Attempt(
                    t.name,
                    t.index,
                    max(t.attempts, 1),
                    t.started_at,
                    t.finished_at,
                    t.state.value if t.state.terminal else "running",
                    t.agent,
                    t.error,
                )  # fmt: skip
            )
        elif last.end is None and t.state.terminal:
            last.end, last.outcome = t.finished_at, t.state.value
    aged_out: dict[int, int] = {}
    for t in st.tasks:
        done = attempts[t.index]
        missing = t.attempts - len(done)
        if missing > 0 and done:  # never fewer attempts than the task's record counts
            aged_out[t.index] = missing
            for k, a in enumerate(done):
                a.number = missing + k + 1
    return Timeline(st, attempts, st.created_at, st.finished_at, aged_out)
