"""The live table of workflows: one page, rows redrawn only when they change."""

from __future__ import annotations

from collections.abc import Set

from engine import WorkflowSummary

from ..data.clock import Clock
from ..data.home import progress_bar
from .live_table import Cell, LiveTable, Row
from .looks import WORKFLOW_GLYPH

COLUMNS = (
    ("id", "ID", 9),
    ("name", "Name", 26),
    ("state", "State", 12),
    ("progress", "Progress", 12),
    ("done", "Done/Total", 12),
    ("failed", "Failed", 7),
    ("age", "Age", 6),
    ("took", "Took", 8),
)


MARK = "●"  # before the id of a marked row (space marks it for a bulk action)


def workflow_row(wf: WorkflowSummary, clock: Clock, marked: bool = False) -> Row:
    """The cells of one workflow (``marked``: chosen for a bulk action)."""
    state = str(wf.state)
    ok, bad, rest = progress_bar(wf.succeeded, wf.failed, wf.total, 10)
    bar: Cell = [(ok, "succeeded"), (bad, "failed"), (rest, "dim")]
    return (
        [(MARK, "bold"), (wf.id, "")] if marked else wf.id,
        wf.name,
        (f"{WORKFLOW_GLYPH.get(state, '')} {state}", state),
        bar,
        f"{wf.succeeded:,}/{wf.total:,}",
        (f"{wf.failed:,}", "failed") if wf.failed else "",
        clock.age(wf.created_at),
        clock.since(wf.created_at, wf.finished_at) if wf.finished_at else "",
    )


class WorkflowTable(LiveTable):
    """A page of workflows, newest first; the cursor stays on its workflow as the page
    shifts, except on the first row of the first page, where it follows the newest."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(COLUMNS, id=id)

    @property
    def wids(self) -> list[str]:
        """The workflow ids shown, top to bottom."""
        return self.keys

    @property
    def selected_wid(self) -> str | None:
        """The workflow under the cursor."""
        return self.cursor_key

    def show(
        self,
        rows: list[WorkflowSummary],
        clock: Clock,
        follow_head: bool = False,
        marked: Set[str] = frozenset(),
    ) -> None:
        """Show a page of workflows (``marked``: ids chosen for a bulk action)."""
        keep = None
        if follow_head and self.cursor <= 0:
            keep = rows[0].id if rows else None
        self.set_rows([(wf.id, workflow_row(wf, clock, wf.id in marked)) for wf in rows], keep=keep)

    def sorted_by(self, column: str, arrow: str) -> None:
        """Show ``arrow`` on the header of the column the list is sorted by."""
        labels = {k: label + (f" {arrow}" if k == column else "") for k, label, _ in COLUMNS}
        self.set_labels(labels)
