"""Ready tasks that no live agent serves: a workflow that would wait for ever, said at once.

A task is claimed only by an agent running its type; when none of the agents alive (online
or stale) has it, the task stays ready until one starts. ``push --wait``, ``status`` and the
console say so rather than wait in silence.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.core.model import AgentInfo, AgentState, TaskState, WorkflowState, WorkflowStatus

LIVE = frozenset({AgentState.ONLINE, AgentState.STALE})


def served_types(agents: Iterable[AgentInfo]) -> set[str]:
    """The task types some live agent runs."""
    return {t for a in agents if a.state in LIVE for t in a.types}


def unserved(status: WorkflowStatus, agents: Iterable[AgentInfo]) -> dict[str, list[str]]:
    """A running workflow's ready tasks whose type no live agent serves, by type (empty
    for a workflow not running: a paused one holds its ready tasks on purpose)."""
    if status.state != WorkflowState.RUNNING:
        return {}
    served = served_types(agents)
    found: dict[str, list[str]] = {}
    for t in status.tasks:
        if t.state == TaskState.READY and t.type not in served and t.wait is None:
            found.setdefault(t.type, []).append(t.name)
    return found


def unserved_line(found: dict[str, list[str]], most: int = 5) -> str:
    """``no live agent serves type 'slow' (ready: a, b)``; "" when ``found`` is empty."""
    if not found:
        return ""
    types = ", ".join(repr(t) for t in found)
    names = [n for ns in found.values() for n in ns]
    shown = ", ".join(names[:most]) + (
        f" and {len(names) - most} more" if len(names) > most else ""
    )
    kind = "type" if len(found) == 1 else "types"
    return f"no live agent serves {kind} {types} (ready: {shown})"
