"""The lifecycle events, newest first, with a cursor (line API: thousands of lines)."""

from __future__ import annotations

from rich.segment import Segment
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip

from engine import Event, visible

from ..data.clock import Clock
from ..data.events import TASK_WIDTH, detail, task_label
from .line_view import LineView
from .looks import look_css

KIND_LOOK = {
    "task.claimed": "running",
    "task.succeeded": "succeeded",
    "task.failed": "failed",
    "task.retrying": "retrying",
    "task.requeued": "ready",
    "task.rejected": "retrying",
    "task.upstream_failed": "upstream_failed",
    "task.skipped": "skipped",
    "workflow.pushed": "ready",
    "workflow.succeeded": "succeeded",
    "workflow.failed": "failed",
    "workflow.paused": "paused",
    "workflow.started": "running",
    "workflow.released": "running",
    "workflow.cancelled": "cancelled",
    "workflow.retried": "retrying",
    "workflow.cleaned": "skipped",
    "agent.online": "succeeded",
    "agent.dead": "failed",
    "agent.stopped": "skipped",
    "agent.draining": "paused",
    "agent.leases_extended": "retrying",
}


class EventLogView(LineView, can_focus=True):
    """``12:00:01.123  task.failed  wf 12  #3  ValueError: ...`` per event."""

    STYLE_PREFIX = "events"
    ROW_STYLES = frozenset({"cursor"})  # the others colour text laid over it

    COMPONENT_CLASSES = {"events--time", "events--cursor"} | {
        f"events--{look}" for look in set(KIND_LOOK.values())
    }
    DEFAULT_CSS = """
    EventLogView { background: $surface; }
    EventLogView > .events--time { color: $foreground-muted; }
    EventLogView > .events--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
    }
    """ + look_css(
        "EventLogView",
        "events",
        (
            "running",
            "succeeded",
            "failed",
            "retrying",
            "ready",
            "paused",
            "cancelled",
            "skipped",
            "upstream_failed",
        ),  # fmt: skip
    )
    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "cursor(-20)", "Page up", show=False),
        Binding("pagedown", "cursor(20)", "Page down", show=False),
        Binding("home", "cursor(-1000000)", "First", show=False),
        Binding("enter", "open", "Open workflow"),
    ]

    cursor = reactive(0)

    class Open(Message):
        """Open the workflow of the event under the cursor."""

        def __init__(self, wid: str) -> None:
            super().__init__()
            self.wid = wid

    def __init__(self, clock: Clock, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.clock = clock
        self.events: list[Event] = []

    def show(self, events: list[Event]) -> None:
        """New list of events, newest first."""
        self.events = events
        self.virtual_size = Size(120, len(events))
        if self.cursor >= len(events):
            self.cursor = max(0, len(events) - 1)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        row = scroll_y + y
        base = self.rich_style
        if not 0 <= row < len(self.events):
            return Strip.blank(self.size.width, base)
        e = self.events[row]
        on_cursor = row == self.cursor and self.has_focus
        if on_cursor:
            base = self._style("cursor")
        look = KIND_LOOK.get(e.kind, "skipped")
        who = f"wf {e.wid}" if e.wid else ""
        task = task_label(e)
        dim = base if on_cursor else base + self._style("time")
        segs = [
            Segment(f" {self.clock.stamp(e.ts)}  ", dim),
            Segment(f"{e.kind:<21}", base if on_cursor else base + self._style(look)),
            Segment(f"{who:<10}{task:<{TASK_WIDTH}}", base),
            Segment(visible(detail(e)), dim),
        ]
        strip = Strip(segs).extend_cell_length(max(self.size.width, 120), base)
        return strip.crop_extend(scroll_x, scroll_x + self.size.width, self.rich_style)

    def watch_cursor(self, old: int, new: int) -> None:
        self.refresh()
        self.scroll_to_region(Region(0, new, 1, 1), animate=False, spacing=None)

    def action_cursor(self, delta: int) -> None:
        if self.events:
            self.cursor = max(0, min(len(self.events) - 1, self.cursor + delta))

    def action_open(self) -> None:
        if 0 <= self.cursor < len(self.events) and self.events[self.cursor].wid:
            self.post_message(self.Open(self.events[self.cursor].wid))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None:
            row = offset.y + int(self.scroll_y)
            if 0 <= row < len(self.events):
                if row == self.cursor:
                    self.action_open()
                self.cursor = row

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
