"""The tasks of one workflow, filterable, rows redrawn only when they change."""

from __future__ import annotations

from engine import TaskStatus

from ..data.clock import Clock
from ..data.dag import GLYPH, task_look
from .live_table import LiveTable, Row

MAX_ROWS = 2000
COLUMNS = (
    ("idx", "#", 5),
    ("name", "Task", 20),
    ("type", "Type", 8),
    ("state", "State", 12),
    ("attempts", "Tries", 6),
    ("agent", "Agent", 10),
    ("took", "Took", 8),
)


def task_row(t: TaskStatus, clock: Clock) -> Row:
    """The cells of one task."""
    look = task_look(t)
    tries = f"{t.attempts}/{t.max_attempts}" if t.max_attempts > 1 else str(t.attempts)
    return (
        (str(t.index), "dim"),
        t.name,
        t.type or '""',
        (f"{GLYPH.get(look, '?')} {look}", look),
        tries,
        t.agent or "",
        clock.since(t.started_at, t.finished_at) if t.started_at else "",
    )


class TaskTable(LiveTable):
    """Tasks of the open workflow (at most :data:`MAX_ROWS`), keyed by task index."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(COLUMNS, id=id)
        self.truncated = 0

    @property
    def selected_task(self) -> int | None:
        """The task index under the cursor."""
        key = self.cursor_key
        return None if key is None else int(key)

    def show(self, tasks: list[TaskStatus], clock: Clock) -> None:
        """Show ``tasks`` (already filtered)."""
        self.truncated = max(0, len(tasks) - MAX_ROWS)
        self.set_rows([(str(t.index), task_row(t, clock)) for t in tasks[:MAX_ROWS]])

    def select_task(self, task: int) -> None:
        """Move the cursor to ``task`` if it is listed."""
        self.move_to(str(task))
