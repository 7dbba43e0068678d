"""The tasks of one workflow, filterable, rows redrawn only when they change."""

from __future__ import annotations

from textual.binding import Binding
from textual.message import Message

from engine import ItemStatus, TaskState, TaskStatus

from ..data.clock import Clock
from ..data.dag import GLYPH, task_look
from .live_table import LiveTable, Row

MAX_ROWS = 2000
COLUMNS = (
    ("idx", "#", 5),
    ("name", "Task", 18),
    ("type", "Type", 8),
    ("state", "State", 17),  # "⇣ upstream_failed"
    ("attempts", "Tries", 6),
    ("agent", "Agent", 10),
    ("took", "Took", 8),
)


def task_row(t: TaskStatus, clock: Clock) -> Row:
    """The cells of one task."""
    return _row(t.index, t.name, t, task_look(t), t, clock)


def item_row(item: ItemStatus, task: TaskStatus, clock: Clock) -> Row:
    """The cells of one item of map ``task``: named ``<map>.<index>``, as agents see it."""
    look = item_look(item)
    return _row(item.index, f"{task.name}.{item.index}", task, look, item, clock)


def item_look(item: ItemStatus) -> str:
    """The state an item shows: its state, or ``retrying`` if it is backing off."""
    if item.state == TaskState.READY and item.failures > 0:
        return "retrying"
    return str(item.state)


def _row(
    index: int, name: str, task: TaskStatus, look: str, run: TaskStatus | ItemStatus, clock: Clock
) -> Row:
    most = task.max_attempts
    return (
        (str(index), "dim"),
        name,
        task.type or '""',
        (f"{GLYPH.get(look, '?')} {look}", look),
        f"{run.attempts}/{most}" if most > 1 else str(run.attempts),
        run.agent or "",
        clock.since(run.started_at, run.finished_at) if run.started_at else "",
    )


class TaskTable(LiveTable):
    """Tasks of the open workflow (at most :data:`MAX_ROWS`), keyed by task index; or a
    page of a map's items, keyed by item index (``[`` and ``]`` ask for another page)."""

    BINDINGS = [
        Binding("left_square_bracket", "page_items(-1)", "Previous page", show=False),
        Binding("right_square_bracket", "page_items(1)", "Next page", show=False),
    ]

    class Page(Message):
        """Show the page of items ``delta`` pages on."""

        def __init__(self, delta: int) -> None:
            super().__init__()
            self.delta = delta

    def action_page_items(self, delta: int) -> None:
        self.post_message(self.Page(delta))

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

    def show_items(self, items: list[ItemStatus], task: TaskStatus, clock: Clock) -> None:
        """Show a page of map ``task``'s items, keyed by item index."""
        self.truncated = 0
        self.set_rows([(str(i.index), item_row(i, task, clock)) for i in items])

    def select_task(self, task: int) -> None:
        """Move the cursor to ``task`` if it is listed."""
        self.move_to(str(task))
