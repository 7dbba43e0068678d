"""A workflow's timeline: every task attempt as a bar on one time axis, live."""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from engine import Engine, Timeline, plural

from ..data.feed import Changes
from ..widgets.key_bar import KeyBar
from ..widgets.looks import look_style
from ..widgets.timeline import render_timeline
from .base import LiveScreen


class TimelineScreen(LiveScreen):
    """Workflow ``wid``'s attempts over time (Airflow's Gantt view), redrawn live."""

    MODE = "workflows"
    PERIOD_S = 1.0  # running bars grow with the clock
    BINDINGS = [Binding("escape", "back", "Back", tooltip="Back to the workflow")]

    def __init__(self, wid: str) -> None:
        super().__init__()
        self.wid = str(wid)
        self.timeline: Timeline | None = None

    def compose(self) -> ComposeResult:
        yield from self.frame()
        yield Static(id="timeline-title")
        with VerticalScroll(id="timeline-body"):
            yield Static(id="timeline-chart")
        yield KeyBar()

    def read(self, engine: Engine, changes: Changes) -> Any:
        return engine.timeline(self.wid)

    def apply(self, result: Any, changes: Changes) -> None:
        self.timeline = result
        self.draw()

    def on_resize(self) -> None:
        self.draw()

    def draw(self) -> None:
        tl = self.timeline
        if tl is None:
            return
        st = tl.status
        title = Text.assemble(
            (f"Timeline of workflow {self.wid}", "bold"), f" · {st.name} · ",
            (st.state.value, look_style(self.app, st.state.value)),
            f" · {plural(tl.attempt_count, 'attempt')} of {plural(st.total, 'task')}",
        )  # fmt: skip
        aged = sum(tl.aged_out.values())
        if aged:
            title.append(
                f" · {aged} earlier attempt(s) aged out of the capped event stream: "
                "counted, their bars not drawn (⋯)",
                look_style(self.app, "paused"),
            )
        self.query_one("#timeline-title", Static).update(title)
        body = self.query_one("#timeline-body")
        # the room left by a vertical scrollbar, shown or not yet: a line never wraps
        room = body.scrollable_content_region.width or self.size.width
        width = max(
            1, room - (0 if body.show_vertical_scrollbar else body.styles.scrollbar_size_vertical)
        )
        lines = render_timeline(tl, width, time.time(), lambda look: look_style(self.app, look))
        self.query_one("#timeline-chart", Static).update(Text("\n").join(lines))

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
