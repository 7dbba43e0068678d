"""Totals by state: workflows (click one to filter the list) and tasks."""

from __future__ import annotations

from textual.content import Content

from engine import Stats

from ..data.dag import GLYPH
from ..data.home import WORKFLOW_STATES
from .looks import WORKFLOW_GLYPH, markup_var
from .text_line import TextLine

WORKFLOW_ORDER = WORKFLOW_STATES
TASK_ORDER = (
    "running", "ready", "waiting", "succeeded", "failed", "upstream_failed", "skipped", "cancelled",
)  # fmt: skip


class StateTotals(TextLine):
    """Two lines: workflows by state (clickable filters) and tasks by state."""

    DEFAULT_CSS = """
    StateTotals {
        height: 2;
        padding: 0 1;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        # the workflow states are links (filters): Textual would paint them all in the
        # link colour; each keeps its state's colour instead
        self.auto_links = False
        self.stats: Stats | None = None
        self.selected: str | None = None
        self._key: object = ()

    def show(self, stats: Stats | None, selected: str | None) -> None:
        """Show ``stats``, highlighting the ``selected`` state filter."""
        key = (
            None
            if stats is None
            else (tuple(stats.workflows.items()), tuple(stats.tasks.items()), stats.tasks_pushed),
            selected,
        )
        if key == self._key:
            return
        self._key = key
        self.stats, self.selected = stats, selected
        self.set(self._content())

    def _content(self) -> Content:
        stats = self.stats
        if stats is None:
            return Content.from_markup("[dim]reading totals…[/]")
        parts: list[Content] = [Content.from_markup("[b]Workflows[/] ")]
        total = sum(stats.workflows.get(s, 0) for s in WORKFLOW_ORDER)
        for state in (None, *WORKFLOW_ORDER):
            n = total if state is None else stats.workflows.get(state, 0)
            label = "all" if state is None else state
            glyph = "Σ" if state is None else WORKFLOW_GLYPH[state]
            color = "$foreground" if state is None else markup_var(state)
            arg = "None" if state is None else repr(state)
            style = "reverse " if state == self.selected else ""
            parts.append(
                Content.from_markup(
                    f"[@click=screen.filter_state({arg})][{style}{color}] $glyph $label "
                    "[b]$n[/b] [/][/]",
                    glyph=glyph,
                    label=label,
                    n=f"{n:,}",
                )
            )
        line2: list[Content] = [Content.from_markup("[b]Tasks[/]     ")]
        for look in TASK_ORDER:
            n = stats.tasks.get(look, 0)
            line2.append(
                Content.from_markup(
                    f"[{markup_var(look)}] $glyph $label [b]$n[/b] [/]",
                    glyph=GLYPH[look],
                    label=look,
                    n=f"{n:,}",
                )
            )
        line2.append(Content.from_markup("[dim] · $n pushed[/]", n=f"{stats.tasks_pushed:,}"))
        return Content("").join(parts) + Content("\n") + Content("").join(line2)
