"""Read edges back from a drawn DAG, the way a person follows lines with a finger."""

from __future__ import annotations

import re

CONNECTS = {
    "─": "LR",
    "│": "UD",
    "╭": "DR",
    "╮": "DL",
    "╰": "UR",
    "╯": "UL",
    "├": "UDR",
    "┤": "UDL",
    "┬": "DLR",
    "┴": "ULR",
    "┼": "UDLR",
}
STEP = {"U": (0, -1), "D": (0, 1), "L": (-1, 0), "R": (1, 0)}
BACK = {"U": "D", "D": "U", "L": "R", "R": "L"}
CHIP = re.compile(r"\[[^\[\]]*?(\w[\w.-]*)[^\[\]]*\]")


def chips(lines: list[str]) -> dict[tuple[int, int], tuple[str, int]]:
    """(row, start column) -> (name, end column) of every ``[x name]`` chip."""
    out = {}
    for y, line in enumerate(lines):
        for m in CHIP.finditer(line):
            name = m.group(0)[1:-1].split()[-1]
            out[(y, m.start())] = (name, m.end())
    return out


def trace(lines: list[str]) -> set[tuple[str, str]]:
    """Every (source, target) pair a reader would see connected, moving only rightwards
    on horizontal lines (edges point right) and either way on vertical ones."""
    grid = [list(line) for line in lines]
    width = max((len(r) for r in grid), default=0)
    for r in grid:
        r.extend(" " * (width - len(r)))
    found = chips(lines)
    starts = {(y, x): name for (y, x), (name, _) in found.items()}
    edges: set[tuple[str, str]] = set()
    for (y, _), (name, end) in found.items():
        stack = [(end, y, "R")]
        seen = set()
        while stack:
            x, yy, d = stack.pop()
            if (x, yy, d) in seen or not (0 <= yy < len(grid) and 0 <= x < width):
                continue
            seen.add((x, yy, d))
            if (yy, x) in starts and d == "R":
                edges.add((name, starts[(yy, x)]))
                continue
            ch = grid[yy][x]
            conn = CONNECTS.get(ch)
            if conn is None:
                continue
            came = BACK[d]
            if came not in conn:
                if ch == "│" and d in "LR":
                    conn = "LR"  # a crossing: keep going straight
                    came = BACK[d]
                else:
                    continue
            for out in conn:
                if out == came or out == "L":
                    continue
                dx, dy = STEP[out]
                stack.append((x + dx, yy + dy, out))
    return edges
