"""The key bar at the foot of every screen: compact on a narrow terminal, so more keys
stay readable (80 columns)."""

from __future__ import annotations

from textual import events
from textual.widgets import Footer

NARROW = 120  # below this many columns the keys go without padding


class KeyBar(Footer):
    """Textual's footer, compact when the terminal is narrow."""

    def on_resize(self, event: events.Resize) -> None:
        self.compact = event.size.width < NARROW
