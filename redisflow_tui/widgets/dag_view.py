"""The DAG view: a workflow's graph, every chip coloured by its state, updated live.

A line-API widget: only the visible rows are rendered, from a layout computed once per
definition (:mod:`redisflow_tui.data.layout`); a state change only recolours. In the
``levels`` mode it shows one line per level instead, for workflows too big to draw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip

from engine import TASK_LOOKS

from ..data.dag import GLYPH, DagGraph, LevelRow, combined
from ..data.home import progress_bar
from ..data.layout import DagLayout, Ref
from .line_view import LineView
from .looks import look_css

LOOKS = TASK_LOOKS
# edges into a failure branch are dashed (the same lines, broken) and end in an arrow
DASHED = str.maketrans({"─": "╌", "│": "╎"})
BRANCH_ARROW = "⇢"


class DagView(LineView, can_focus=True):
    """A workflow's DAG (or its per-level summary) with a selected node."""

    STYLE_PREFIX = "dag"

    COMPONENT_CLASSES = {f"dag--{look}" for look in LOOKS} | {"dag--cursor", "dag--level"}

    DEFAULT_CSS = """
    DagView {
        background: $surface;
        scrollbar-size: 1 1;
    }
    DagView > .dag--cursor { text-style: reverse bold; }
    DagView > .dag--level { color: $foreground-muted; }
    """ + look_css("DagView", "dag", LOOKS, bold=("running", "failed"))

    BINDINGS = [
        Binding("up", "move(0, -1)", "Up", show=False),
        Binding("down", "move(0, 1)", "Down", show=False),
        Binding("left", "move(-1, 0)", "Left", show=False),
        Binding("right", "move(1, 0)", "Right", show=False),
        Binding("enter", "choose", "Select", show=False),
    ]

    class Selected(Message):
        """The selected task changed (``task`` is a task index); ``chosen`` on Enter/click."""

        def __init__(self, view: DagView, task: int, chosen: bool = False) -> None:
            super().__init__()
            self.view = view
            self.task = task
            self.chosen = chosen

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.layout_: DagLayout | None = None
        self.graph: DagGraph | None = None
        self.looks: Sequence[str] = ()
        self.counts: Mapping[int, str] = {}  # per map (task index), its items' counts
        self.levels: list[LevelRow] = []
        self.mode = "tasks"
        self.selected: int | None = None  # a node of the graph
        self._node_looks: list[str] = []

    # -- feeding ----------------------------------------------------------------------

    def show_graph(
        self,
        graph: DagGraph,
        lay: DagLayout,
        looks: Sequence[str],
        counts: Mapping[int, str] | None = None,
    ) -> None:
        """Draw ``graph`` laid out as ``lay`` with every task's ``looks`` (and each map's
        items' ``counts``)."""
        keep = self.selected_task()
        self.mode, self.graph, self.layout_ = graph.mode, graph, lay
        self.selected = None if keep is None else graph.node_of.get(keep)
        if self.selected is None and graph.labels:
            self.selected = 0
        self.virtual_size = Size(lay.width, lay.height)
        self.recolor(looks, counts=counts)

    def show_levels(self, levels: list[LevelRow], looks: Sequence[str]) -> None:
        """Show one line per level instead of a graph."""
        self.mode, self.graph, self.layout_ = "levels", None, None
        self.levels = levels
        self.looks = looks
        self.virtual_size = Size(100, len(levels))
        self._lines.clear()
        self.refresh()

    def recolor(
        self,
        looks: Sequence[str],
        levels: list[LevelRow] | None = None,
        counts: Mapping[int, str] | None = None,
    ) -> None:
        """New task looks (and maps' counts); the layout stays."""
        self.looks = looks
        if counts is not None:
            self.counts = counts
        if levels is not None:
            self.levels = levels
        graph = self.graph
        if graph is not None:
            self._node_looks = [graph.chip(v, looks)[1] for v in range(len(graph.labels))]
        self._lines.clear()
        self.refresh()

    def selected_task(self) -> int | None:
        """The task index of the selected chip (the first member of a group)."""
        if self.graph is None or self.selected is None:
            return None
        return self.graph.members[self.selected][0]

    def select_task(self, task: int, scroll: bool = True) -> None:
        """Select the chip showing ``task`` (without posting :class:`Selected`)."""
        if self.graph is None:
            return
        node = self.graph.node_of.get(task)
        if node is None or node == self.selected:
            return
        self.selected = node
        self._lines.clear()
        self.refresh()
        if scroll:
            self._scroll_to_selected()

    # -- rendering --------------------------------------------------------------------

    def _component(self, look: str) -> str:
        known = look in LOOKS or look in ("cursor", "level")
        return look if known else "waiting"

    def _ref_look(self, ref: Ref) -> str:
        if isinstance(ref, int):
            return self._node_looks[ref] if 0 <= ref < len(self._node_looks) else "waiting"
        return combined([self._node_looks[r] for r in ref if 0 <= r < len(self._node_looks)])

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        row = scroll_y + y
        strip = self._lines.get(row)
        if strip is None:
            strip = self._lines[row] = self._render_row(row)
        return strip.crop_extend(scroll_x, scroll_x + self.size.width, self.rich_style)

    def _render_row(self, row: int) -> Strip:
        base = self.rich_style
        if self.mode == "levels":
            return self._render_level(row, base)
        lay, graph = self.layout_, self.graph
        if lay is None or graph is None or not 0 <= row < lay.height:
            return Strip.blank(0, base)
        segments: list[Segment] = []
        x = 0
        for span in lay.rows[row]:
            if span.x > x:
                segments.append(Segment(" " * (span.x - x), base))
            if span.chip and isinstance(span.ref, int):
                text, look = graph.chip(span.ref, self.looks, self.counts)
                style = base + self._style(look)
                if span.ref == self.selected:
                    style += self._style("cursor")
                segments.append(Segment(text, style))
                x = span.x + len(text)
            else:
                text = span.text
                if graph.branches and graph.into_branch(span.ref):
                    text = text.translate(DASHED)
                    ref = span.ref
                    if isinstance(ref, int) and lay.pos[ref][:2] == (span.x + len(text), row):
                        text = text[:-1] + BRANCH_ARROW  # the cell right before its chip
                segments.append(Segment(text, base + self._style(self._ref_look(span.ref))))
                x = span.x + len(text)
        return Strip(segments)

    def _render_level(self, row: int, base: Style) -> Strip:
        if not 0 <= row < len(self.levels):
            return Strip.blank(0, base)
        lv = self.levels[row]
        ok, bad, rest = progress_bar(lv.done, lv.counts.get("failed", 0), lv.total, 20)
        segs = [
            Segment(f"L{lv.level:<4}", base + self._style("level")),
            Segment(ok, base + self._style("succeeded")),
            Segment(bad, base + self._style("failed")),
            Segment(rest, base + self._style("waiting")),
            Segment(f" {lv.done:>6,}/{lv.total:<6,} ", base),
        ]
        for look in (
            "running", "suspended", "retrying", "ready", "waiting", "failed",
            "upstream_failed", "skipped", "cancelled",
        ):  # fmt: skip
            n = lv.counts.get(look, 0)
            if n:
                segs.append(Segment(f"{GLYPH[look]}{n:,} ", base + self._style(look)))
        segs.append(Segment(" " + ", ".join(lv.names) + ("…" if lv.total > 4 else ""), base))
        return Strip(segs)

    # -- moving -----------------------------------------------------------------------

    def _scroll_to_selected(self) -> None:
        lay = self.layout_
        if lay is None or self.selected is None:
            return
        x, y, w = lay.pos[self.selected]
        self.scroll_to_region(Region(x, y, w, 1), animate=False, spacing=None)

    def _set_selected(self, node: int) -> None:
        if node == self.selected:
            return
        self.selected = node
        self._lines.clear()
        self.refresh()
        self._scroll_to_selected()
        task = self.selected_task()
        if task is not None:
            self.post_message(self.Selected(self, task))

    def action_move(self, dx: int, dy: int) -> None:
        """Select the neighbouring chip in a direction."""
        lay = self.layout_
        if self.mode == "levels" or lay is None:
            self.scroll_to(y=self.scroll_y + dy, x=self.scroll_x + dx * 4, animate=False)
            return
        if self.selected is None:
            if lay.pos:
                self._set_selected(0)
            return
        level = lay.level[self.selected]
        _, y0, _ = lay.pos[self.selected]
        if dy:
            layer = lay.layers[level]
            at = layer.index(self.selected)
            to = at + dy
            if 0 <= to < len(layer):
                self._set_selected(layer[to])
            return
        target = level + dx
        if 0 <= target < len(lay.layers) and lay.layers[target]:
            nearest = min(lay.layers[target], key=lambda v: abs(lay.pos[v][1] - y0))
            self._set_selected(nearest)

    def action_choose(self) -> None:
        task = self.selected_task()
        if task is not None:
            self.post_message(self.Selected(self, task, chosen=True))

    def on_click(self, event: events.Click) -> None:
        lay = self.layout_
        if lay is None:
            return
        offset = event.get_content_offset(self)
        if offset is None:
            return
        node = lay.hit(offset.x + int(self.scroll_x), offset.y + int(self.scroll_y))
        if node is None:
            return
        if node == self.selected:
            self.action_choose()
        else:
            self._set_selected(node)
