"""Drawing a DAG in a terminal: a layered layout computed once, recoloured live.

The layout is independent of task states, so it is computed once per workflow
definition (see :class:`LayoutCache`) and every update only changes colours.

How a graph is laid out:

1. Layers, left to right, from :func:`networkx.topological_generations` (a task sits
   one layer right of its deepest parent): :func:`_levels`.
2. An edge that skips layers runs through invisible filler nodes, one chain per source,
   so the long edges of one task share one line and never mix with another's:
   :func:`_with_fillers`.
3. Each layer is ordered by barycenter sweeps, then every node gets a row near the
   mean row of its neighbours (isotonic regression keeps the order and the spacing):
   :func:`_order`, then :func:`_rows`.
4. Between two layers, edges run on vertical *tracks*: a task with several children
   has its own track, and so has a task with several parents; nothing else shares a
   vertical line, so unrelated edges never merge. Tracks are ordered to cross little,
   and so that no task's outgoing line runs into another task's incoming line:
   :func:`_columns` (and :func:`_tracks` between two layers).
5. Every cell gets a direction mask per net; masks of one net join into junctions
   (``╭ ╮ ╰ ╯ ├ ┤ ┬ ┴ ┼``), a vertical passing a foreign horizontal is drawn as a
   crossing ``│``. Each cell remembers which node's state colours it (an edge takes
   the colour of the node it leads to): :func:`_edge_cells`, then :func:`_spans`.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import networkx as nx

UP, DOWN, LEFT, RIGHT = 1, 2, 4, 8
TRACK_GAP = 2  # columns from one vertical track to the next: a gap keeps them apart
GLYPHS = {
    0: " ",
    UP: "│",
    DOWN: "│",
    UP | DOWN: "│",
    LEFT: "─",
    RIGHT: "─",
    LEFT | RIGHT: "─",
    DOWN | RIGHT: "╭",
    DOWN | LEFT: "╮",
    UP | RIGHT: "╰",
    UP | LEFT: "╯",
    UP | DOWN | RIGHT: "├",
    UP | DOWN | LEFT: "┤",
    DOWN | LEFT | RIGHT: "┬",
    UP | LEFT | RIGHT: "┴",
    UP | DOWN | LEFT | RIGHT: "┼",
}

Ref = int | tuple[int, ...]
"""What colours a span: one node, or several (the most active of them wins)."""


@dataclass(frozen=True)
class Span:
    """A run of cells on one row: an edge drawing, or a node's chip when ``chip``."""

    x: int
    text: str
    ref: Ref
    chip: bool = False


@dataclass
class DagLayout:
    """Where every node and edge cell goes; independent of states.

    Attributes:
        width: columns needed.
        height: rows needed.
        rows: spans of each row, left to right.
        pos: per node, ``(x, y, width)`` of its chip.
        layers: per layer, the nodes in it from top to bottom.
        level: per node, its layer.
    """

    width: int
    height: int
    rows: list[list[Span]]
    pos: list[tuple[int, int, int]]
    layers: list[list[int]]
    level: list[int]

    def hit(self, x: int, y: int) -> int | None:
        """The node whose chip covers cell ``(x, y)``, if any."""
        if not 0 <= y < self.height:
            return None
        for span in self.rows[y]:
            if span.chip and isinstance(span.ref, int):
                px, _, w = self.pos[span.ref]
                if px <= x < px + w:
                    return span.ref
        return None


@dataclass
class _Track:
    key: tuple[str, int]
    exits: list[int]  # rows where a source line leaves towards the track
    entries: list[int]  # rows where a line leaves the track towards a target
    sources: list[int]
    targets: list[int]
    x: int = 0

    @property
    def top(self) -> int:
        return min(self.exits + self.entries)

    @property
    def bottom(self) -> int:
        return max(self.exits + self.entries)


def _isotonic(targets: list[float]) -> list[float]:
    """Least-squares non-decreasing fit of ``targets`` (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, weight, count]
    for t in targets:
        blocks.append([t, 1.0, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, c2 = blocks.pop()
            m1, w1, c1 = blocks.pop()
            w = w1 + w2
            blocks.append([(m1 * w1 + m2 * w2) / w, w, int(c1 + c2)])
    out: list[float] = []
    for mean, _, count in blocks:
        out.extend([mean] * int(count))
    return out


def layout(widths: Sequence[int], edges: Sequence[tuple[int, int]]) -> DagLayout:
    """Lay out a DAG of ``len(widths)`` nodes whose chips are ``widths`` cells wide, in the
    phases the module's docstring lists."""
    n = len(widths)
    level = _levels(n, edges)
    graph = _with_fillers(level, edges)
    layers = _order(graph)
    row, height = _rows(graph, layers)
    cols = _columns(graph, layers, widths, row)
    cells = _edge_cells(graph, layers, widths, row, cols)
    pos = [(cols.x[level[v]], row[v], widths[v]) for v in range(n)]
    rows = _spans(cells, height, pos)
    real_layers = [[v for v in layer if graph.real[v]] for layer in layers]
    return DagLayout(cols.width, height, rows, pos, real_layers, level)


@dataclass
class _Graph:
    """The DAG with its filler nodes: nodes ``0..n-1`` are real, the fillers follow."""

    n: int
    nlayers: int
    level: list[int]  # per node, fillers included, its layer
    succ: dict[int, list[int]]
    pred: dict[int, list[int]]
    real: list[bool]

    @property
    def total(self) -> int:
        return len(self.level)


@dataclass
class _Columns:
    """Where the layers and the channels of tracks between them go."""

    w: list[int]  # per layer, its width: its widest chip
    x: list[int]  # per layer, its first column
    channels: list[list[_Track]]  # per layer but the last, the tracks right of it
    width: int


def _levels(n: int, edges: Sequence[tuple[int, int]]) -> list[int]:
    """1. Each node's layer: one right of its deepest parent."""
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    level = [0] * n
    for depth, generation in enumerate(nx.topological_generations(g)):
        for v in generation:
            level[v] = depth
    return level


def _with_fillers(level: list[int], edges: Sequence[tuple[int, int]]) -> _Graph:
    """2. The graph with layer-skipping edges run through fillers: one chain per source."""
    n = len(level)
    nlayers = max(level, default=-1) + 1
    children: dict[int, set[int]] = {u: set() for u in range(n)}
    for a, b in edges:
        children[a].add(b)
    lvl = list(level)
    succ: dict[int, list[int]] = {v: [] for v in range(n)}
    pred: dict[int, list[int]] = {v: [] for v in range(n)}

    def new_node(lv: int) -> int:
        v = len(lvl)
        lvl.append(lv)
        succ[v] = []
        pred[v] = []
        return v

    def link(a: int, b: int) -> None:
        succ[a].append(b)
        pred[b].append(a)

    for u in range(n):
        kids = sorted(children[u])
        far = [v for v in kids if level[v] > level[u] + 1]
        for v in kids:
            if level[v] == level[u] + 1:
                link(u, v)
        if far:
            chain = {}
            prev = u
            for lv in range(level[u] + 1, max(level[v] for v in far)):
                f = new_node(lv)
                link(prev, f)
                chain[lv] = f
                prev = f
            for v in far:
                link(chain[level[v] - 1], v)
    real = [v < n for v in range(len(lvl))]
    return _Graph(n, nlayers, lvl, succ, pred, real)


def _order(graph: _Graph) -> list[list[int]]:
    """3. The nodes of each layer, top to bottom, ordered by barycenter sweeps."""
    nlayers, succ, pred = graph.nlayers, graph.succ, graph.pred
    layers: list[list[int]] = [[] for _ in range(nlayers)]
    for v in range(graph.total):
        layers[graph.level[v]].append(v)
    position = {v: i for layer in layers for i, v in enumerate(layer)}

    def sweep(order: range, neighbours: dict[int, list[int]]) -> None:
        for li in order:
            layer = layers[li]

            def key(v: int) -> float:
                ns = neighbours[v]
                if not ns:
                    return float(position[v])
                return sum(position[w] for w in ns) / len(ns)

            layer.sort(key=key)
            for i, v in enumerate(layer):
                position[v] = i

    rounds = 4 if graph.total <= 2000 else 1
    for _ in range(rounds):
        sweep(range(1, nlayers), pred)
        sweep(range(nlayers - 2, -1, -1), succ)
    sweep(range(1, nlayers), pred)
    return layers


def _rows(graph: _Graph, layers: list[list[int]]) -> tuple[dict[int, int], int]:
    """3. Each node's row, near the mean row of its neighbours, keeping the order and
    spacing of its layer (isotonic regression); and the rows needed."""
    nlayers, real = graph.nlayers, graph.real

    def gap(a: int, b: int) -> int:
        return 2 if real[a] and real[b] else 1

    offsets: list[list[int]] = []
    for layer in layers:
        off = [0]
        for a, b in zip(layer, layer[1:], strict=False):
            off.append(off[-1] + gap(a, b))
        offsets.append(off)
    tallest = max((off[-1] for off in offsets if off), default=0)
    y: dict[int, float] = {}
    for layer, off in zip(layers, offsets, strict=True):
        shift = (tallest - (off[-1] if off else 0)) / 2
        for v, o in zip(layer, off, strict=True):
            y[v] = o + shift

    def place(li: int, neighbours: dict[int, list[int]]) -> None:
        layer, off = layers[li], offsets[li]
        if not layer:
            return
        wanted = []
        for v, o in zip(layer, off, strict=True):
            ns = neighbours[v]
            want = sum(y[w] for w in ns) / len(ns) if ns else y[v]
            wanted.append(want - o)
        fitted = _isotonic(wanted)
        for v, o, q in zip(layer, off, fitted, strict=True):
            y[v] = q + o

    for _ in range(3 if graph.total <= 2000 else 1):
        for li in range(1, nlayers):
            place(li, graph.pred)
        for li in range(nlayers - 2, -1, -1):
            place(li, graph.succ)
    for li in range(1, nlayers):
        place(li, graph.pred)
    row: dict[int, int] = {}
    for layer in layers:
        last = None
        for v in layer:
            r = round(y[v])
            if last is not None:
                r = max(r, row[last] + gap(last, v))
            row[v] = r
            last = v
    top = min(row.values(), default=0)
    for v in row:
        row[v] -= top
    height = max(row.values(), default=-1) + 1
    return row, height


def _columns(
    graph: _Graph, layers: list[list[int]], widths: Sequence[int], row: dict[int, int]
) -> _Columns:
    """4. The columns of the layers, and the vertical tracks between them (see
    :func:`_tracks`), each at its own column."""
    nlayers = graph.nlayers
    col_w = []
    for layer in layers:
        col_w.append(max([widths[v] for v in layer if graph.real[v]] or [1]))
    channels = [_tracks(layers[li], graph.succ, graph.pred, row) for li in range(nlayers - 1)]
    col_x = []
    x = 0
    for li in range(nlayers):
        col_x.append(x)
        x += col_w[li]
        if li < nlayers - 1:
            x += TRACK_GAP * len(channels[li]) + 2 - (TRACK_GAP - 1 if channels[li] else 0)
    for li, tracks in enumerate(channels):
        cs = col_x[li] + col_w[li]  # first cell of the channel
        for i, t in enumerate(tracks):
            t.x = cs + 1 + TRACK_GAP * i
    return _Columns(col_w, col_x, channels, x)


Cells = dict[tuple[int, int], list[tuple[int, int, Ref]]]
"""Per cell ``(x, y)``, the nets through it: ``(net, direction mask, what colours it)``."""


def _edge_cells(
    graph: _Graph,
    layers: list[list[int]],
    widths: Sequence[int],
    row: dict[int, int],
    cols: _Columns,
) -> Cells:
    """5. The direction masks, per net, of every cell the edges pass, each with the node
    (or nodes) whose state colours it: the one it leads to."""
    n, real, succ, lvl = graph.n, graph.real, graph.succ, graph.level
    col_x, col_w = cols.x, cols.w
    cells: Cells = {}

    def mark(cx: int, cy: int, net: int, mask: int, ref: Ref) -> None:
        entries = cells.setdefault((cx, cy), [])
        for i, (nid, m, r) in enumerate(entries):
            if nid == net:
                entries[i] = (nid, m | mask, r)
                return
        entries.append((net, mask, ref))

    def hline(y0: int, x0: int, x1: int, net: int, ref: Ref) -> None:
        """A horizontal line over cells x0..x1 inclusive, open at both ends."""
        for cx in range(x0, x1 + 1):
            mark(cx, y0, net, LEFT | RIGHT, ref)

    net_ids = iter(range(1, 1 << 30))

    def final_targets(v: int) -> tuple[int, ...]:
        """The real nodes a filler chain (or real node) ends in."""
        if real[v]:
            return (v,)
        out: list[int] = []
        stack = [v]
        while stack:
            w = stack.pop()
            for s in succ[w]:
                if real[s]:
                    out.append(s)
                else:
                    stack.append(s)
        return tuple(sorted(set(out)))

    @functools.cache
    def ref_of(v: int) -> Ref:
        t = final_targets(v)
        return t[0] if len(t) == 1 else t

    # fillers: a straight line across their column
    for v in range(n, graph.total):
        li = lvl[v]
        hline(row[v], col_x[li], col_x[li] + col_w[li] - 1, -v - 1, ref_of(v))

    for li, tracks in enumerate(cols.channels):
        cs = col_x[li] + col_w[li]  # first cell of the channel
        ce = col_x[li + 1] - 1  # last cell of the channel
        entry_x: dict[int, int] = {}
        for t in tracks:
            for v in t.targets:
                entry_x[v] = min(entry_x.get(v, 1 << 30), t.x)
        # real sources: a line from the chip's end to the channel
        for v in layers[li]:
            if real[v] and succ[v]:
                stub = tuple(sorted({r for w in succ[v] for r in _as_tuple(ref_of(w))}))
                stub_ref: Ref = stub[0] if len(stub) == 1 else stub
                hline(row[v], col_x[li] + widths[v], cs - 1, next(net_ids), stub_ref)
        straight = [
            (u, vv)
            for u in layers[li]
            for vv in succ[u]
            if not any(u in t.sources and vv in t.targets for t in tracks)
        ]
        for u, vv in straight:
            hline(row[u], cs, ce, next(net_ids), ref_of(vv))
        for t in tracks:
            net = next(net_ids)
            targets_ref = tuple(sorted({r for v in t.targets for r in _as_tuple(ref_of(v))}))
            tref: Ref = targets_ref[0] if len(targets_ref) == 1 else targets_ref
            for u in t.sources:
                yu = row[u]
                hline(yu, cs, t.x - 1, net, tref)
                mark(t.x, yu, net, LEFT, tref)
            for cy in range(t.top, t.bottom + 1):
                mask = 0
                if cy > t.top:
                    mask |= UP
                if cy < t.bottom:
                    mask |= DOWN
                mark(t.x, cy, net, mask, _nearest(cy, t, row, ref_of, tref))
            for v in t.targets:
                mark(t.x, row[v], net, RIGHT, ref_of(v))
        for v, ex in entry_x.items():
            hline(row[v], ex + 1, ce, -(1 << 30) - v, ref_of(v))
    return cells


def _spans(cells: Cells, height: int, pos: list[tuple[int, int, int]]) -> list[list[Span]]:
    """5. Each row's spans, left to right: the masks of a cell joined into one glyph (see
    :func:`_glyph`), runs of one colour as one span, and the chips at ``pos``."""
    rows: list[list[Span]] = [[] for _ in range(height)]
    grid: dict[int, list[tuple[int, str, Ref]]] = {}
    for (cx, cy), entries in cells.items():
        grid.setdefault(cy, []).append((cx, *_glyph(entries)))
    for cy in range(height):
        items = sorted(grid.get(cy, []))
        spans: list[Span] = []
        run_x, run_text, run_ref = -1, "", None
        for cx, ch, ref in items:
            if run_ref == ref and cx == run_x + len(run_text):
                run_text += ch
                continue
            if run_text:
                spans.append(Span(run_x, run_text, run_ref))  # type: ignore[arg-type]
            run_x, run_text, run_ref = cx, ch, ref
        if run_text:
            spans.append(Span(run_x, run_text, run_ref))  # type: ignore[arg-type]
        rows[cy] = spans
    for v, (px, py, _) in enumerate(pos):
        rows[py].append(Span(px, "", v, chip=True))
    for spans in rows:
        spans.sort(key=lambda s: s.x)
    return rows


def _as_tuple(ref: Ref) -> tuple[int, ...]:
    return ref if isinstance(ref, tuple) else (ref,)


def _nearest(
    cy: int, t: _Track, row: dict[int, int], ref_of: Callable[[int], Ref], tref: Ref
) -> Ref:
    """Colour of a track cell: the target it leads to, nearest beyond this row."""
    if not t.sources or len(t.targets) == 1:
        return tref
    src = row[t.sources[0]]
    if cy < src:
        beyond = [v for v in t.targets if row[v] <= cy]
        if beyond:
            return ref_of(max(beyond, key=lambda v: row[v]))
    elif cy > src:
        beyond = [v for v in t.targets if row[v] >= cy]
        if beyond:
            return ref_of(min(beyond, key=lambda v: row[v]))
    return tref


def _glyph(entries: list[tuple[int, int, Ref]]) -> tuple[str, Ref]:
    if len(entries) == 1:
        _, mask, ref = entries[0]
        return GLYPHS[mask], ref
    verticals = [e for e in entries if e[1] & (UP | DOWN) and not e[1] & (LEFT | RIGHT)]
    horizontals = [e for e in entries if e[1] & (LEFT | RIGHT) and not e[1] & (UP | DOWN)]
    if verticals and len(verticals) + len(horizontals) == len(entries) and horizontals:
        # a track passing a line it has nothing to do with: a crossing, not a junction
        return "│", verticals[0][2]
    mask = 0
    for _, m, _ in entries:
        mask |= m
    # the net that turns (a track's junction) decides the colour
    turning = [e for e in entries if e[1] & (UP | DOWN) and e[1] & (LEFT | RIGHT)]
    ref = (turning or entries)[0][2]
    return GLYPHS[mask], ref


def _tracks(
    layer: list[int],
    succ: dict[int, list[int]],
    pred: dict[int, list[int]],
    row: dict[int, int],
) -> list[_Track]:
    """The vertical tracks between ``layer`` and the next, in left-to-right order."""
    tracks: list[_Track] = []
    by_target: dict[int, _Track] = {}
    for u in layer:
        out = succ[u]
        if len(out) >= 2:
            tracks.append(_Track(("s", u), [row[u]], [row[v] for v in out], [u], list(out)))
    for u in layer:
        out = succ[u]
        if len(out) != 1:
            continue
        v = out[0]
        if len(pred[v]) >= 2:
            t = by_target.get(v)
            if t is None:
                t = _Track(("t", v), [], [row[v]], [], [v])
                by_target[v] = t
                tracks.append(t)
            t.exits.append(row[u])
            t.sources.append(u)
        elif row[v] != row[u]:
            tracks.append(_Track(("s", u), [row[u]], [row[v]], [u], [v]))
    if len(tracks) <= 1:
        return tracks

    def crossings(a: _Track, b: _Track) -> int:
        """Crossings if ``a`` is left of ``b``."""
        c = sum(1 for e in b.exits if a.top <= e <= a.bottom)
        c += sum(1 for e in a.entries if b.top <= e <= b.bottom)
        return c

    def compare(a: _Track, b: _Track) -> int:
        ab, ba = crossings(a, b), crossings(b, a)
        if ab != ba:
            return -1 if ab < ba else 1
        return -1 if (a.top + a.bottom) < (b.top + b.bottom) else 1

    ordered = sorted(tracks, key=functools.cmp_to_key(compare)) if len(tracks) <= 400 else tracks
    # hard rule: on a row, a source's line must reach its track before any other track
    # that feeds the target on that row starts its incoming line
    feeding: dict[int, list[_Track]] = {}
    for t in ordered:
        for r in t.entries:
            feeding.setdefault(r, []).append(t)
    hard: dict[int, set[int]] = {id(t): set() for t in ordered}
    for t in ordered:
        for r in t.exits:
            for other in feeding.get(r, []):
                if other is not t:
                    hard[id(other)].add(id(t))
    # preference: a target's own collecting track right of the tracks of parents with
    # several children, so a line from the collecting track cannot turn into them
    soft: dict[int, set[int]] = {id(t): set() for t in ordered}
    collecting = {t.targets[0]: t for t in ordered if t.key[0] == "t"}
    for t in ordered:
        if t.key[0] == "s" and len(t.targets) > 1:
            for v in t.targets:
                if v in collecting:
                    soft[id(collecting[v])].add(id(t))
    placed: list[_Track] = []
    done: set[int] = set()
    remaining = list(ordered)
    while remaining:
        # the first track whose predecessors are placed; on a cycle the preference
        # gives way first, then the rule
        pick = next(
            (k for k, t in enumerate(remaining) if (hard[id(t)] | soft[id(t)]) <= done),
            None,
        )
        if pick is None:
            pick = next((k for k, t in enumerate(remaining) if hard[id(t)] <= done), 0)
        t = remaining.pop(pick)
        placed.append(t)
        done.add(id(t))
    return placed


class LayoutCache:
    """Layouts by definition fingerprint, least recently used dropped first."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._items: OrderedDict[Hashable, DagLayout] = OrderedDict()
        self.misses = 0

    def get(
        self, key: Hashable, widths: Sequence[int], edges: Sequence[tuple[int, int]]
    ) -> DagLayout:
        """The layout for ``key``, computed from ``widths`` and ``edges`` on a miss."""
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
            return found
        self.misses += 1
        result = layout(widths, edges)
        self._items[key] = result
        while len(self._items) > self.size:
            self._items.popitem(last=False)
        return result

    def peek(self, key: Hashable) -> DagLayout | None:
        """The cached layout for ``key`` without computing one."""
        return self._items.get(key)


def to_text(lay: DagLayout, chip: Callable[[int], str]) -> list[str]:
    """The layout as plain text lines, ``chip(node)`` giving each chip's text."""
    lines = []
    for spans in lay.rows:
        line = [" "] * lay.width
        for span in spans:
            text = chip(span.ref) if span.chip and isinstance(span.ref, int) else span.text
            line[span.x : span.x + len(text)] = list(text)
        lines.append("".join(line).rstrip())
    return lines
