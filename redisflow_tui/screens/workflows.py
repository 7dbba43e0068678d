"""The home screen: totals, throughput, and the live, paged list of workflows."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.content import Content
from textual.css.query import NoMatches
from textual.widgets import Input

from engine import Engine, bulk

from ..data import actions
from ..data import bulk as bulk_actions
from ..data.feed import Changes
from ..data.home import HomePage, HomeQuery, read_page
from ..data.sorting import Sort
from ..widgets.filter_box import FilterBox
from ..widgets.key_bar import KeyBar
from ..widgets.live_table import LiveTable
from ..widgets.name_suggester import NameSuggester
from ..widgets.rates import RatePanel
from ..widgets.text_line import TextLine
from ..widgets.totals import StateTotals
from ..widgets.workflow_table import COLUMNS as WORKFLOW_COLUMNS
from ..widgets.workflow_table import WorkflowTable
from .base import LiveScreen, OpenWorkflow, PlanAction, RunAction
from .bulk_choice import BulkChoiceScreen

PAGES = Binding.Group("Page", compact=True)


class WorkflowsScreen(LiveScreen):
    """Workflows: totals by state, sparklines, and a table paging through all of them."""

    MODE = "workflows"
    PERIOD_S = 2.0  # ages move even when nothing happens
    BINDINGS = [
        Binding("enter", "open", "Open", show=False, tooltip="Open the selected workflow"),
        Binding("slash", "search", "Search", key_display="/", tooltip="Search workflows by name"),
        Binding("s", "next_state", "State", tooltip="Filter by state (all, running, paused, …)"),
        Binding("escape", "clear", "Clear filters", show=False),
        Binding(
            "left_square_bracket",
            "page(-1)",
            "Previous page",
            key_display="[",
            group=PAGES,
            tooltip="Previous page",
        ),
        Binding("right_square_bracket", "page(1)", "Next page", key_display="]", group=PAGES),
        Binding("p", "pause", "Pause", tooltip="Pause the selected workflow"),
        Binding("r", "release", "Release", tooltip="Release (resume) the selected workflow"),
        Binding("x", "cancel", "Cancel", tooltip="Cancel the selected workflow"),
        Binding("t", "retry", "Retry", tooltip="Retry the failed tasks of the selected workflow"),
        Binding(
            "c", "cleanup", "Clean up", tooltip="Clean up (delete) the selected finished workflow"
        ),
        Binding(
            "space",
            "mark",
            "Mark",
            tooltip="Mark the selected workflow: p r x t c then act on every marked one",
        ),
        Binding(
            "A",
            "bulk",
            "All matching",
            key_display="A",
            tooltip="Act on every workflow the filter matches (the count is confirmed)",
        ),
        Binding("f", "freeze", "Freeze", tooltip="Freeze the list while browsing"),
        Binding("f", "unfreeze", "Unfreeze", tooltip="Follow the list live again"),
        Binding(
            "S",
            "sort_next",
            "Sort",
            key_display="S",
            tooltip="Sort by the next column (or click a header; again: reverse)",
        ),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.query_ = HomeQuery()
        self.page: HomePage | None = None
        self.marked: set[str] = set()  # ids chosen for a bulk action (space)
        self.frozen = False  # the list not re-read while the operator browses it
        self.sort = Sort()

    def compose(self) -> ComposeResult:
        yield from self.frame()
        yield StateTotals(id="totals")
        with Horizontal(id="rates"):
            yield RatePanel("Throughput", "tasks/s", id="throughput")
            yield RatePanel("Queued", "ready tasks", id="queued")
        with Horizontal(id="listbar"):
            yield TextLine(id="listinfo")
            yield FilterBox(
                placeholder="workflow name (Tab completes, Enter filters, Esc clears)",
                id="search",
                suggester=NameSuggester(self.console.engine),
            )
        yield WorkflowTable(id="workflows")
        yield KeyBar()

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one(WorkflowTable).focus()
        self._info()

    # -- live -------------------------------------------------------------------------

    def absorb(self, changes: Changes) -> None:
        # which workflows changed does not matter here, only that some did
        if changes.resync:
            self.pending.resync = True
        elif changes.workflows_changed:
            self.pending.pushed += 1

    def wants_read(self, changes: Changes) -> bool:
        return changes.workflows_changed

    def read(self, engine: Engine, changes: Changes) -> HomePage:
        return read_page(engine, self.query_, with_stats=False)

    def apply(self, result: Any, changes: Changes) -> None:
        page: HomePage = result
        if page.query.page != self.query_.page and page.query.state == self.query_.state:
            self.query_ = page.query
        self.page = page
        self._show()
        self._info()

    def _show(self) -> None:
        if self.page is None:
            return
        follow = self.query_.page == 0 and self.sort == Sort()
        rows = self.sort.apply(self.page.rows)
        table = self.query_one(WorkflowTable)
        table.show(rows, self.console.clock, follow_head=follow, marked=self.marked)

    def tick(self) -> None:
        # Frozen: only what the operator asks for (a page, a filter) is read.
        if not self.frozen or self.pending.resync:
            super().tick()
        try:
            self._summary()
        except NoMatches:
            pass  # not composed yet, or being torn down

    def _summary(self) -> None:
        app = self.console
        now = app.clock.now()
        self.query_one(StateTotals).show(app.stats, self.query_.state)
        series = app.rates.throughput(now)
        self.query_one("#throughput", RatePanel).show(series, app.rates.rate(now))
        queue = app.rates.queue(now)
        note = ""
        if app.stats is not None and app.stats.queued:
            busiest = sorted(app.stats.queued.items(), key=lambda kv: -kv[1])[:3]
            note = ", ".join(f"{t or '“”'} {n:,}" for t, n in busiest if n)
        self.query_one("#queued", RatePanel).show(
            queue, queue[-1] if queue else 0.0, note, integer=True
        )

    def _info(self) -> None:
        q = self.query_
        page = self.page
        if page is None:
            text = Content.from_markup("[dim]reading…[/]")
        else:
            label = dict((k, v) for k, v, _ in WORKFLOW_COLUMNS).get(self.sort.column, "")
            text = Content.from_markup(
                "$frozen[b]$what[/b] · page [b]$page[/b] of $pages · $n match · $order$marked",
                frozen="❄ FROZEN (f: live) · " if self.frozen else "Showing ",
                what=q.describe(),
                page=f"{q.page + 1:,}",
                pages=f"{page.pages:,}",
                n=f"{page.matching:,}",
                order=self.sort.describe(label),
                marked=f" · {len(self.marked):,} marked (esc clears)" if self.marked else "",
            )
        self.query_one("#listinfo", TextLine).set(text)

    # -- the list ---------------------------------------------------------------------

    def _requery(self, query: HomeQuery) -> None:
        self.query_ = query
        self._info()
        self._summary()
        self.request()

    def filter_state(self, state: str | None) -> None:
        """Show only workflows in ``state`` (``None``: all)."""
        self._requery(replace(self.query_, state=state, page=0))

    def action_filter_state(self, state: str | None) -> None:
        self.filter_state(state)

    def action_next_state(self) -> None:
        self._requery(self.query_.next_state())

    def action_page(self, delta: int) -> None:
        pages = self.page.pages if self.page else 1
        page = max(0, min(pages - 1, self.query_.page + delta))
        if page != self.query_.page:
            self._requery(replace(self.query_, page=page))

    def action_search(self) -> None:
        box = self.query_one("#search", Input)
        box.add_class("-open")
        box.focus()

    def action_clear(self) -> None:
        if self.marked:
            self.marked.clear()
            self._show()
            self._info()
            return
        box = self.query_one("#search", Input)
        box.value = ""
        box.remove_class("-open")
        self.query_one(WorkflowTable).focus()
        if self.query_.state or self.query_.name or self.query_.page:
            self._requery(HomeQuery(oldest=self.query_.oldest))

    @on(Input.Submitted, "#search")
    def _searched(self, event: Input.Submitted) -> None:
        self.search_name(event.value.strip())

    @work(thread=True, group="search", exclusive=True, exit_on_error=False)
    def search_name(self, text: str) -> None:
        """Filter by a workflow name: the exact one, else the only name starting so."""
        if not text:
            self.app.call_from_thread(self.action_clear)
            return
        engine = self.console.engine
        found: Any = engine.names(prefix=text)
        names = [n for n, _ in found]
        chosen = text if text in names else (names[0] if len(names) == 1 else None)
        newest = engine.list_ids(self.query_.state, chosen, 0, 1) if chosen else []
        self.app.call_from_thread(self._use_name, text, chosen, names, newest)

    def _use_name(self, text: str, chosen: str | None, names: list[str], newest: list[str]) -> None:
        """The list filtered by the name found, and its newest workflow opened."""
        if chosen is None:
            hint = f": {', '.join(names[:6])}" if names else ""
            self.notify(f"No single workflow name matches “{text}”{hint}", severity="warning")
            return
        box = self.query_one("#search", Input)
        box.value = chosen
        self.query_one(WorkflowTable).focus()
        self._requery(replace(self.query_, name=chosen, page=0))
        if newest:
            self.post_message(OpenWorkflow(newest[0]))

    @on(LiveTable.Selected, "#workflows")
    def _row_selected(self, event: LiveTable.Selected) -> None:
        self.action_open()

    # -- actions ----------------------------------------------------------------------

    def _selected(self) -> str | None:
        wid = self.query_one(WorkflowTable).selected_wid
        if wid is None:
            self.notify("No workflow selected", severity="warning")
        return wid

    def action_open(self) -> None:
        wid = self._selected()
        if wid:
            self.post_message(OpenWorkflow(wid))

    def _on_marked(self, action: str) -> bool:
        """With rows marked, plan ``action`` over them (True); else False. The marks are
        spent: the confirmation lists what they chose."""
        if not self.marked:
            return False
        ids = sorted(self.marked, key=int)
        self.marked.clear()
        self._show()
        self._info()
        self.post_message(PlanAction(bulk_actions.plan_bulk, action, ids))
        return True

    def action_pause(self) -> None:
        if not self._on_marked("pause") and (wid := self._selected()):
            self.post_message(RunAction(actions.pause, wid))

    def action_release(self) -> None:
        if not self._on_marked("release") and (wid := self._selected()):
            self.post_message(RunAction(actions.release, wid))

    def action_cancel(self) -> None:
        if not self._on_marked("cancel") and (wid := self._selected()):
            self.post_message(PlanAction(actions.plan_cancel, wid))

    def action_retry(self) -> None:
        if not self._on_marked("retry") and (wid := self._selected()):
            self.post_message(PlanAction(actions.plan_retry, wid))

    def action_cleanup(self) -> None:
        if not self._on_marked("cleanup") and (wid := self._selected()):
            self.post_message(PlanAction(actions.plan_cleanup, wid))

    def action_mark(self) -> None:
        """Mark (or unmark) the selected workflow, then move to the next row."""
        table = self.query_one(WorkflowTable)
        wid = table.selected_wid
        if wid is None:
            return
        self.marked.symmetric_difference_update({wid})
        self._show()
        table.action_move(1)
        self._info()

    def action_bulk(self) -> None:
        """Choose an action for every workflow the filter matches; the count is confirmed."""
        described = self.query_.describe()
        flt = bulk.Filter(self.query_.state, self.query_.name)

        def chosen(action: str | None) -> None:
            if action:
                self.post_message(PlanAction(bulk_actions.plan_bulk, action, None, flt, described))

        self.app.push_screen(BulkChoiceScreen(described), chosen)

    # -- freezing and sorting ---------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "freeze":
            return not self.frozen
        if action == "unfreeze":
            return self.frozen
        return super().check_action(action, parameters)

    def action_freeze(self) -> None:
        self.frozen = True
        self.refresh_bindings()
        self._info()

    def action_unfreeze(self) -> None:
        self.frozen = False
        self.refresh_bindings()
        self._info()
        self.request()

    def action_sort_next(self) -> None:
        self.sort_by(self.sort.next())

    @on(LiveTable.HeaderClicked, "#workflows")
    def _header_clicked(self, event: LiveTable.HeaderClicked) -> None:
        self.sort_by(self.sort.by(event.column))

    def sort_by(self, sort: Sort) -> None:
        """Sort the list: by id or age the whole list (read again), else the page."""
        self.sort = sort
        self.query_one(WorkflowTable).sorted_by(sort.column, sort.arrow())
        if sort.oldest_first != self.query_.oldest:
            self._requery(replace(self.query_, oldest=sort.oldest_first, page=0))
        else:
            self._show()
            self._info()
