"""Progress per level of a workflow, one line each (line API: any number of levels)."""

from __future__ import annotations

from rich.segment import Segment
from textual.geometry import Size
from textual.strip import Strip

from ..data.dag import GLYPH, LevelRow
from ..data.home import progress_bar
from .line_view import LineView
from .looks import look_css

BAR = 10


class LevelsView(LineView):
    """``L2 ███████░░░ 7/10 ▶2 ✖1`` per level."""

    STYLE_PREFIX = "levels"

    COMPONENT_CLASSES = {"levels--ok", "levels--bad", "levels--rest", "levels--label"} | {
        f"levels--{look}" for look in GLYPH
    }
    DEFAULT_CSS = """
    LevelsView { background: $surface; scrollbar-size: 1 1; overflow-x: hidden; }
    LevelsView > .levels--ok { color: $success; }
    LevelsView > .levels--bad { color: $error; }
    LevelsView > .levels--rest { color: $foreground-muted; }
    LevelsView > .levels--label { color: $foreground-muted; }
    """ + look_css(
        "LevelsView",
        "levels",
        (
            "running",
            "retrying",
            "ready",
            "failed",
            "upstream_failed",
            "skipped",
            "cancelled",
            "waiting",
            "succeeded",
            "paused",
        ),
    )

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[LevelRow] = []

    def show(self, rows: list[LevelRow]) -> None:
        """New per-level counts."""
        self.rows = rows
        self.virtual_size = Size(self.size.width, len(rows))
        self.refresh()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        row = scroll_y + y
        base = self.rich_style
        if not 0 <= row < len(self.rows):
            return Strip.blank(self.size.width, base)
        lv = self.rows[row]
        ok, bad, rest = progress_bar(lv.done, lv.counts.get("failed", 0), lv.total, BAR)
        segs = [
            Segment(f"L{lv.level:<3}", base + self._style("label")),
            Segment(ok, base + self._style("ok")),
            Segment(bad, base + self._style("bad")),
            Segment(rest, base + self._style("rest")),
            Segment(f" {lv.done}/{lv.total}", base),
        ]
        for look in ("running", "retrying", "failed"):
            n = lv.counts.get(look, 0)
            if n:
                segs.append(Segment(f" {GLYPH[look]}{n}", base + self._style(look)))
        return Strip(segs).crop_extend(scroll_x, scroll_x + self.size.width, base)
