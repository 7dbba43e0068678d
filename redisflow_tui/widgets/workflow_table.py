"""The live table of workflows: one page, updated cell by cell."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from engine import WorkflowSummary

from ..data.clock import Clock
from ..data.home import progress_bar
from .looks import look_style, look_text

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


class WorkflowTable(DataTable[object]):
    """A page of workflows. Rows are slots updated in place, never cleared and re-added,
    and the cursor stays on the same workflow when the page shifts."""

    DEFAULT_CSS = """
    WorkflowTable { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.wids: list[str] = []
        self._cells: list[tuple[object, ...]] = []
        self._plain: list[tuple[str, ...]] = []

    def on_mount(self) -> None:
        for key, label, width in COLUMNS:
            self.add_column(label, key=key, width=width)

    @property
    def selected_wid(self) -> str | None:
        """The workflow under the cursor."""
        row = self.cursor_row
        return self.wids[row] if 0 <= row < len(self.wids) else None

    def _row(self, wf: WorkflowSummary, clock: Clock) -> tuple[tuple[str, ...], tuple[object, ...]]:
        app = self.app
        ok, bad, rest = progress_bar(wf.succeeded, wf.failed, wf.total, 10)
        bar = Text()
        bar.append(ok, look_style(app, "succeeded"))
        bar.append(bad, look_style(app, "failed"))
        bar.append(rest, look_style(app, "waiting"))
        age = clock.age(wf.created_at)
        took = clock.since(wf.created_at, wf.finished_at) if wf.finished_at else ""
        failed = f"{wf.failed:,}" if wf.failed else ""
        plain = (
            wf.id,
            wf.name,
            str(wf.state),
            f"{wf.succeeded}/{wf.failed}/{wf.total}",
            f"{wf.succeeded:,}/{wf.total:,}",
            failed,
            age,
            took,
        )
        cells: tuple[object, ...] = (
            wf.id,
            wf.name,
            look_text(app, str(wf.state)),
            bar,
            f"{wf.succeeded:,}/{wf.total:,}",
            Text(failed, style=look_style(app, "failed")) if failed else "",
            age,
            took,
        )
        return plain, cells

    def show(
        self,
        rows: list[WorkflowSummary],
        clock: Clock,
        force: bool = False,
        follow_head: bool = False,
    ) -> None:
        """Show a page; only cells whose text changed are touched.

        The cursor stays on its workflow as rows shift; on the first row of the first
        page (``follow_head``) it stays on the newest instead.
        """
        keep = None if follow_head and self.cursor_row <= 0 else self.selected_wid
        keys = [c[0] for c in COLUMNS]
        for i, wf in enumerate(rows):
            plain, cells = self._row(wf, clock)
            slot = f"s{i}"
            if i < len(self._plain):
                old = self._plain[i]
                for k, key in enumerate(keys):
                    if force or old[k] != plain[k]:
                        self.update_cell(slot, key, cells[k])
                self._plain[i] = plain
                self.wids[i] = wf.id
            else:
                self.add_row(*cells, key=slot)
                self._plain.append(plain)
                self.wids.append(wf.id)
        while len(self._plain) > len(rows):
            self.remove_row(f"s{len(self._plain) - 1}")
            self._plain.pop()
            self.wids.pop()
        if keep is not None and keep in self.wids:
            at = self.wids.index(keep)
            if at != self.cursor_row:
                self.move_cursor(row=at, animate=False, scroll=True)
