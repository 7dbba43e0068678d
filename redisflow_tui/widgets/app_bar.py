"""The top bar: screens to switch to, and the connection indicator."""

from __future__ import annotations

from textual.content import Content

from .text_line import TextLine

TABS = (
    ("workflows", "1", "Workflows"),
    ("agents", "2", "Agents"),
    ("events", "3", "Events"),
    ("schedules", "4", "Schedules"),
)


class AppBar(TextLine):
    """``redisflow  1 Workflows  2 Agents  3 Events  4 Schedules ....  ● live redis://...``."""

    DEFAULT_CSS = """
    AppBar {
        dock: top;
        height: 1;
        background: $panel;
        color: $foreground;
    }
    """

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode

    def on_mount(self) -> None:
        self.watch(self.app, "link", self._redraw)

    def _redraw(self, _: object = None) -> None:
        app = self.app
        parts = [Content.from_markup("[b $accent] redisflow [/]")]
        for mode, key, label in TABS:
            if mode == self.mode:
                parts.append(
                    Content.from_markup(
                        f"[reverse $text-primary] {key} {label} [/]", key=key, label=label
                    )
                )
            else:
                parts.append(
                    Content.from_markup(
                        f"[@click=app.show('{mode}')] [dim]$key[/] $label [/]",
                        key=key,
                        label=label,
                    )
                )
        left = Content(" ").join(parts)
        connected, keyspace = getattr(app, "link", (None, False))
        url = getattr(app, "label", "")
        if connected is None:
            status = Content.from_markup("[$warning]◌ connecting[/] $url", url=url)
        elif connected:
            feed = "keyspace + events" if keyspace else "events"
            status = Content.from_markup(
                "[$success]● live[/] $url [dim]($feed)[/]", url=url, feed=feed
            )
        else:
            status = Content.from_markup("[b $error]✖ Redis lost[/] $url", url=url)
        if getattr(app, "read_only", False):
            status = Content.from_markup("[reverse $warning] read-only [/] ") + status
        width = self.size.width or 120
        gap = max(1, width - left.cell_length - status.cell_length - 1)
        self.set(left + Content(" " * gap) + status + Content(" "))

    def on_resize(self) -> None:
        self._redraw()


class Banner(TextLine):
    """A loud line shown only while Redis cannot be reached."""

    DEFAULT_CSS = """
    Banner {
        dock: top;
        height: 1;
        background: $error;
        color: $text;
        text-style: bold;
        display: none;
        padding: 0 1;
    }
    Banner.-lost { display: block; }
    """

    def on_mount(self) -> None:
        self.watch(self.app, "lost", self._redraw)

    def _redraw(self, lost: str) -> None:
        self.set_class(bool(lost), "-lost")
        if lost:
            self.set(
                Content.from_markup(
                    "✖ Redis is unreachable: $error — retrying; the view will resync "
                    "when it is back",
                    error=lost,
                )
            )
