"""Events: the lifecycle stream, newest first, with a filter and a freeze."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.css.query import NoMatches
from textual.widgets import Input

from ..data.feed import Changes
from ..widgets.event_log import EventLogView
from ..widgets.filter_box import FilterBox
from ..widgets.key_bar import KeyBar
from ..widgets.text_line import TextLine
from .base import LiveScreen, OpenWorkflow


class EventsScreen(LiveScreen):
    """The event log: history from the stream at start, then live."""

    MODE = "events"
    BINDINGS = [
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("space", "freeze", "Freeze/resume"),
        Binding("escape", "clear", "Clear filter", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.text = ""
        self._shown = (-1, "", False)

    def compose(self) -> ComposeResult:
        yield from self.frame()
        yield FilterBox(
            placeholder="filter: words to match in kind, workflow id, #task, task name, detail "
            "(e.g. “failed”, “task.claimed agent-a”)",
            id="event-filter",
        )
        yield TextLine(id="events-status")
        yield EventLogView(self.console.clock, id="events")
        yield KeyBar()

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one(EventLogView).focus()

    def absorb(self, changes: Changes) -> None:
        pass  # the log is kept by the app; nothing to read here

    def wants_read(self, changes: Changes) -> bool:
        return False

    def tick(self) -> None:
        try:
            self._show()
        except NoMatches:
            pass  # not composed yet, or being torn down

    def _show(self) -> None:
        log = self.console.event_log
        state = (log.version, self.text, log.frozen)
        if state == self._shown:
            return
        self._shown = state
        events = log.view(self.text)
        self.query_one(EventLogView).show(events)
        if log.frozen:
            status = Content.from_markup(
                "[reverse $warning] FROZEN [/] $n shown · [b]$missed new[/b] since · space resumes",
                n=f"{len(events):,}",
                missed=f"{log.missed:,}",
            )
        else:
            status = Content.from_markup(
                "[$success]● live[/] · $n of the last $total events$filter · newest first · "
                "space freezes · enter opens the workflow",
                n=f"{len(events):,}",
                total=f"{len(log):,}",
                filter=f" matching “{self.text}”" if self.text else "",
            )
        if log.dropped:
            status += Content.from_markup(
                " [$warning]· $d too fast to show[/]", d=f"{log.dropped:,}"
            )
        self.query_one("#events-status", TextLine).set(status)

    @on(Input.Changed, "#event-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.text = event.value.strip()
        self.tick()

    @on(Input.Submitted, "#event-filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self.query_one(EventLogView).focus()

    @on(EventLogView.Open)
    def _open(self, event: EventLogView.Open) -> None:
        self.post_message(OpenWorkflow(event.wid))

    def action_filter(self) -> None:
        self.query_one("#event-filter", Input).focus()

    def action_freeze(self) -> None:
        log = self.console.event_log
        log.freeze(not log.frozen)
        self.tick()

    def action_clear(self) -> None:
        box = self.query_one("#event-filter", Input)
        box.value = ""
        self.query_one(EventLogView).focus()
