"""The tasks of one workflow, filterable, updated cell by cell."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from engine import TaskStatus

from ..data.clock import Clock
from ..data.dag import task_look
from .looks import look_text

MAX_ROWS = 2000
COLUMNS = (
    ("idx", "#", 5),
    ("name", "Task", 22),
    ("type", "Type", 8),
    ("state", "State", 12),
    ("attempts", "Tries", 6),
    ("agent", "Agent", 12),
    ("took", "Took", 8),
)


class TaskTable(DataTable[object]):
    """Tasks of the open workflow (at most :data:`MAX_ROWS`), keyed by task index."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._plain: dict[int, tuple[str, ...]] = {}
        self.truncated = 0

    def on_mount(self) -> None:
        for key, label, width in COLUMNS:
            self.add_column(label, key=key, width=width)

    @property
    def selected_task(self) -> int | None:
        """The task index under the cursor."""
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except Exception:  # noqa: BLE001 - no such row while the table changes
            return None
        return int(key.value) if key.value is not None else None

    def _row(self, t: TaskStatus, clock: Clock) -> tuple[tuple[str, ...], tuple[object, ...]]:
        look = task_look(t)
        tries = f"{t.attempts}/{t.max_attempts}" if t.max_attempts > 1 else str(t.attempts)
        took = clock.since(t.started_at, t.finished_at) if t.started_at else ""
        type_ = t.type or '""'
        agent = t.agent or ""
        plain = (str(t.index), t.name, type_, look, tries, agent, took)
        cells: tuple[object, ...] = (
            Text(str(t.index), style="dim"),
            t.name,
            type_,
            look_text(self.app, look),
            tries,
            agent,
            took,
        )
        return plain, cells

    def show(self, tasks: list[TaskStatus], clock: Clock, force: bool = False) -> None:
        """Show ``tasks`` (already filtered); only changed cells are touched."""
        self.truncated = max(0, len(tasks) - MAX_ROWS)
        tasks = tasks[:MAX_ROWS]
        wanted = {t.index for t in tasks}
        for gone in [i for i in self._plain if i not in wanted]:
            self.remove_row(str(gone))
            del self._plain[gone]
        keys = [c[0] for c in COLUMNS]
        added = False
        for t in tasks:
            plain, cells = self._row(t, clock)
            old = self._plain.get(t.index)
            if old is None:
                self.add_row(*cells, key=str(t.index))
                added = True
            else:
                for k, key in enumerate(keys):
                    if force or old[k] != plain[k]:
                        self.update_cell(str(t.index), key, cells[k])
            self._plain[t.index] = plain
        if added and self.row_count > 1:
            self.sort("idx", key=lambda cell: int(str(cell)))

    def reset(self) -> None:
        """Drop every row (before showing a differently filtered list)."""
        self.clear()
        self._plain.clear()

    def select_task(self, task: int) -> None:
        """Move the cursor to ``task`` if it is listed."""
        if task in self._plain:
            row = self.get_row_index(str(task))
            if row != self.cursor_row:
                self.move_cursor(row=row, animate=False, scroll=True)
