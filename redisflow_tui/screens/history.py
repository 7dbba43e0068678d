"""Run-time history: per task type or per template, the last hour's and the last day's
runs, failures and quantiles, with the day as a sparkline (hour by hour)."""

from __future__ import annotations

import math
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from engine import Engine, HistoryStat, history, sparkline

from ..data.feed import Changes
from ..widgets.key_bar import KeyBar
from ..widgets.looks import look_style
from .base import LiveScreen


def seconds(v: float | None) -> str:
    """A quantile as the table shows it: ``120ms``, ``2.5s``, ``>1h``, ``-`` for none."""
    if v is None:
        return "-"
    if math.isinf(v):
        return ">1h"
    return f"{v * 1000:.0f}ms" if v < 1 else f"{v:g}s"


class HistoryScreen(LiveScreen):
    """Counts and run-time quantiles per task type (or template), live."""

    MODE = "workflows"
    PERIOD_S = 5.0  # agents send their counters every few seconds
    BINDINGS = [
        Binding("escape", "back", "Back", tooltip="Back to where you were"),
        Binding("b", "by", "Type/template", tooltip="Show per task type or per template"),
    ]

    def __init__(self, by: str = "type") -> None:
        super().__init__()
        self.by = by
        self.data: dict[str, dict[str, HistoryStat]] | None = None

    def compose(self) -> ComposeResult:
        yield from self.frame()
        yield Static(id="history-title")
        with VerticalScroll(id="history-body"):
            yield Static(id="history-table")
        yield KeyBar()

    def read(self, engine: Engine, changes: Changes) -> Any:
        return history(engine, self.by)

    def apply(self, result: Any, changes: Changes) -> None:
        self.data = result
        self.draw()

    def draw(self) -> None:
        title = Text.assemble(
            ("History", "bold"), f" · per {self.by} · the last hour and the last 24 hours",
            (" · b: per " + ("template" if self.by == "type" else "task type"), "dim"),
        )  # fmt: skip
        self.query_one("#history-title", Static).update(title)
        if self.data is None:
            return
        day, hour = self.data["day"], self.data["hour"]
        table = Table(box=None, header_style="bold", pad_edge=False)
        for col in (self.by, "hour ok", "failed", "p50", "p90", "p99", "day ok", "failed",
                    "p50", "p99", "last 24h (hourly)"):  # fmt: skip
            table.add_column(col, justify="left" if col in (self.by,) else "right")
        bad = look_style(self.app, "failed")
        for name in sorted(day):
            d, h = day[name], hour.get(name)
            table.add_row(
                name or '""',
                f"{h.succeeded:,}" if h else "0",
                Text(f"{h.failed:,}", style=bad if h.failed else "") if h else "0",
                seconds(h.quantile(0.5) if h else None),
                seconds(h.quantile(0.9) if h else None),
                seconds(h.quantile(0.99) if h else None),
                f"{d.succeeded:,}",
                Text(f"{d.failed:,}", style=bad if d.failed else ""),
                seconds(d.quantile(0.5)),
                seconds(d.quantile(0.99)),
                Text(sparkline(d.hourly), style=look_style(self.app, "succeeded")),
            )
        body = table if day else Text(f"No {self.by} has run times in the last day.", "dim")
        self.query_one("#history-table", Static).update(body)

    def action_by(self) -> None:
        self.by = "template" if self.by == "type" else "type"
        self.data = None
        self.draw()
        self.request()

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
