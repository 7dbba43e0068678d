"""Throughput and queue depth as sparklines over the last minutes."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Sparkline

from .text_line import TextLine


class RatePanel(Vertical):
    """A titled sparkline with its current value."""

    DEFAULT_CSS = """
    RatePanel {
        height: 3;
        width: 1fr;
        padding: 0 1;
    }
    RatePanel > TextLine { height: 1; }
    RatePanel > Sparkline { height: 2; }
    """

    def __init__(self, title: str, unit: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.title = title
        self.unit = unit
        self._key: object = ()

    def compose(self) -> ComposeResult:
        yield TextLine(self.title)
        yield Sparkline([], summary_function=max)

    def show(
        self, series: list[float], current: float, note: str = "", integer: bool = False
    ) -> None:
        """New series (oldest first) and the current value."""
        key = (tuple(series), current, note)
        if key == self._key:
            return
        self._key = key
        self.query_one(Sparkline).data = series or [0.0]
        peak = max(series, default=0.0)
        self.query_one(TextLine).set(
            Content.from_markup(
                "[b]$title[/b] [b $accent]$value[/] $unit [dim]· peak $peak · $window$note[/]",
                title=self.title,
                value=f"{current:,.0f}" if integer or current >= 100 else f"{current:,.1f}",
                unit=self.unit,
                peak=f"{peak:,.0f}",
                window=f"last {len(series) // 60}m" if len(series) >= 60 else "",
                note=f" · {note}" if note else "",
            )
        )
