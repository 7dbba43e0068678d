"""A table drawn with the line API, for lists that change several times a second.

Textual's DataTable re-renders every visible row after any cell changes; this table
keeps one rendered line per row and redraws only rows whose cells changed, so a page
of workflows updating live costs a few rows per frame. Rows are keyed: the cursor stays
on its row's key when rows move.

A cell is plain text, ``(text, look)``, or a list of such parts; a look names a
component class (``table--succeeded``...) so states take the theme's colours.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip

from engine import TASK_LOOKS

from .line_view import LineView
from .looks import look_css

Part = tuple[str, str]
Cell = str | Part | list[Part]
Row = tuple[Cell, ...]

LOOKS = (
    *TASK_LOOKS,
    "paused",
    "scheduled",
    "queued",
    "online",
    "stale",
    "dead",
    "stopped",
    "draining",
    "dim",
    "bold",
)


def _parts(cell: Cell) -> list[Part]:
    if isinstance(cell, str):
        return [(cell, "")]
    if isinstance(cell, tuple):
        return [cell]
    return cell


def cell_text(cell: Cell) -> str:
    """The plain text of a cell."""
    return "".join(text for text, _ in _parts(cell))


class LiveTable(LineView, can_focus=True):
    """Keyed rows under a fixed header, with a row cursor."""

    STYLE_PREFIX = "table"

    COMPONENT_CLASSES = {"table--header", "table--cursor", "table--odd"} | {
        f"table--{look}" for look in LOOKS
    }
    DEFAULT_CSS = """
    LiveTable { background: $surface; height: 1fr; scrollbar-size-vertical: 1; }
    LiveTable > .table--header { background: $panel; text-style: bold; color: $foreground; }
    LiveTable > .table--cursor {
        background: $block-cursor-blurred-background;
        color: $block-cursor-blurred-foreground;
    }
    LiveTable:focus > .table--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
        text-style: bold;
    }
    LiveTable > .table--odd { background: $surface-lighten-1; }
    """ + look_css("LiveTable", "table", LOOKS, bold=("running", "failed", "stale", "dead", "bold"))
    BINDINGS = [
        Binding("up", "move(-1)", "Up", show=False),
        Binding("down", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "move(-1000000000)", "First", show=False),
        Binding("end", "move(1000000000)", "Last", show=False),
        Binding("enter", "select", "Select", show=False),
    ]

    cursor = reactive(0, init=False)

    class Highlighted(Message):
        """The cursor moved to the row ``key`` (``None`` when the table is empty)."""

        def __init__(self, table: LiveTable, key: str | None) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> LiveTable:
            return self.table

    class Selected(Message):
        """Enter (or a click on the cursor row) on the row ``key``."""

        def __init__(self, table: LiveTable, key: str) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> LiveTable:
            return self.table

    class HeaderClicked(Message):
        """A click on the header of column ``column`` (its key)."""

        def __init__(self, table: LiveTable, column: str) -> None:
            super().__init__()
            self.table = table
            self.column = column

        @property
        def control(self) -> LiveTable:
            return self.table

    def __init__(
        self,
        columns: Sequence[tuple[str, str, int]],
        *,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.columns = list(columns)
        self._declared = list(columns)  # the least widths: columns widen to fit their text
        self.keys: list[str] = []
        self.rows: list[Row] = []
        self._index: dict[str, int] = {}
        self._width = sum(w for _, _, w in self.columns) + len(self.columns)

    # -- content ----------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self.rows)

    @property
    def cursor_key(self) -> str | None:
        """The key of the row under the cursor."""
        return self.keys[self.cursor] if 0 <= self.cursor < len(self.keys) else None

    def row(self, key: str) -> Row | None:
        """The cells of row ``key``."""
        at = self._index.get(key)
        return None if at is None else self.rows[at]

    def text(self, at: int, column: str) -> str:
        """The plain text of one cell (row by position, column by key)."""
        col = [c[0] for c in self.columns].index(column)
        return cell_text(self.rows[at][col])

    def set_rows(self, rows: Sequence[tuple[str, Row]], keep: str | None = None) -> None:
        """Replace the rows; only rows whose cells changed are redrawn.

        The cursor stays on ``keep`` (default: the key under it) if that row remains.
        """
        keep = self.cursor_key if keep is None else keep
        old = dict(zip(self.keys, self.rows, strict=True))
        old_pos = self._index
        self.keys = [k for k, _ in rows]
        self.rows = [r for _, r in rows]
        self._index = {k: i for i, k in enumerate(self.keys)}
        lines: dict[int, Strip] = {}
        for i, (key, cells) in enumerate(rows):
            was = old_pos.get(key)
            if was == i and old.get(key) == cells and i in self._lines:
                lines[i] = self._lines[i]
        self._lines = lines
        if self._fit():
            self._lines = {}
        self.virtual_size = Size(self._width, len(self.rows) + 1)
        target = self._index.get(keep, min(self.cursor, len(self.rows) - 1)) if keep else 0
        target = max(0, target)
        if target != self.cursor:
            self.cursor = target
        elif keep != self.cursor_key:
            self.post_message(self.Highlighted(self, self.cursor_key))
        self.refresh()

    def _fit(self) -> bool:
        """Widen columns whose text is cut while the table has room to spare, left to
        right (never narrower than declared); True when the widths changed."""
        room = self.size.width - sum(w for _, _, w in self._declared) - len(self._declared)
        widths = [w for _, _, w in self._declared]
        if room > 0 and self.rows:
            for c, (_, label, w) in enumerate(self._declared):
                texts = [cell_text(r[c]) for r in self.rows if c < len(r)]
                need = max([cell_len(label)] + [cell_len(t) for t in texts])
                grow = min(room, need - w)
                if grow > 0:
                    widths[c] += grow
                    room -= grow
        columns = [(k, label, w) for (k, label, _), w in zip(self._declared, widths, strict=True)]
        if columns == self.columns:
            return False
        self.columns = columns
        self._width = sum(widths) + len(widths)
        return True

    def on_resize(self) -> None:
        if self._fit():
            self._lines = {}
            self.virtual_size = Size(self._width, len(self.rows) + 1)
            self.refresh()

    def column_at(self, x: int) -> str | None:
        """The key of the column at cell ``x`` of a row (``None`` past the last)."""
        left = 0
        for key, _, width in self.columns:
            if left <= x < left + width + 1:
                return key
            left += width + 1
        return None

    def set_labels(self, labels: dict[str, str]) -> None:
        """Change some columns' header labels (by key), e.g. to show a sort arrow."""
        self._declared = [(k, labels.get(k, label), w) for k, label, w in self._declared]
        self.columns = [(k, labels.get(k, label), w) for k, label, w in self.columns]
        self._fit()
        self._lines = {}
        self.refresh()

    def clear(self) -> None:
        """Drop every row."""
        self.set_rows([])

    def move_to(self, key: str) -> None:
        """Put the cursor on row ``key`` if present."""
        at = self._index.get(key)
        if at is not None and at != self.cursor:
            self.cursor = at

    # -- rendering --------------------------------------------------------------------

    def _render_cells(
        self, cells: Sequence[Cell], base: Style, looks: bool = True
    ) -> list[Segment]:
        segments: list[Segment] = []
        for (_, _, width), cell in zip(self.columns, cells, strict=False):
            used = 0
            for text, look in _parts(cell):
                room = width - used
                if room <= 0:
                    break
                if cell_len(text) > room:
                    text = text[: max(0, room - 1)] + "…"
                styled = looks and look
                segments.append(Segment(text, base + self._style(look) if styled else base))
                used += cell_len(text)
            segments.append(Segment(" " * (width - used + 1), base))
        return segments

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        base = self.rich_style
        if y == 0:
            header = self._style("header")
            labels = [label for _, label, _ in self.columns]
            strip = Strip(self._render_cells(labels, header))
            return strip.crop_extend(scroll_x, scroll_x + width, header)
        row = scroll_y + y - 1
        if not 0 <= row < len(self.rows):
            return Strip.blank(width, base)
        cached = self._lines.get(row)
        if cached is None:
            style = base
            if row == self.cursor:
                style = self._style("cursor")
            elif row % 2:
                style = self._style("odd")
            # the cursor row in the cursor's colours, for contrast
            strip = Strip(self._render_cells(self.rows[row], style, row != self.cursor))
            cached = strip.extend_cell_length(max(width, self._width), style)
            self._lines[row] = cached
        return cached.crop_extend(scroll_x, scroll_x + width, base)

    # -- moving -----------------------------------------------------------------------

    def watch_cursor(self, old: int, new: int) -> None:
        self._lines.pop(old, None)
        self._lines.pop(new, None)
        self.refresh()
        # rows new and new+1 of the virtual space: row ``new`` below the fixed header
        self.scroll_to_region(Region(0, new, 1, 2), animate=False, x_axis=False, immediate=True)
        self.post_message(self.Highlighted(self, self.cursor_key))

    def on_focus(self) -> None:
        self._lines.pop(self.cursor, None)
        self.refresh()

    def on_blur(self) -> None:
        self._lines.pop(self.cursor, None)
        self.refresh()

    def action_move(self, delta: int) -> None:
        if self.rows:
            self.cursor = max(0, min(len(self.rows) - 1, self.cursor + delta))

    def action_page(self, delta: int) -> None:
        self.action_move(delta * max(1, self.size.height - 2))

    def action_select(self) -> None:
        key = self.cursor_key
        if key is not None:
            self.post_message(self.Selected(self, key))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            column = self.column_at(int(self.scroll_x) + offset.x)
            if column is not None:
                self.post_message(self.HeaderClicked(self, column))
            return
        row = int(self.scroll_y) + offset.y - 1
        if 0 <= row < len(self.rows):
            if row == self.cursor:
                self.action_select()
            else:
                self.cursor = row
