"""A workflow's timeline (a Gantt chart): one row per task, one bar per attempt on a
shared time axis, coloured by how it ended; retries, lost leases and queueing visible."""

from __future__ import annotations

from collections.abc import Callable

from rich.style import Style
from rich.text import Text

from engine import ATTEMPT_LOST, ATTEMPT_RETRIED, Timeline

from ..data.clock import format_duration

NAME_W = 18
# an attempt's outcome -> the look (state colour) its bar takes
OUTCOME_LOOK = {
    "running": "running",
    "succeeded": "succeeded",
    "failed": "failed",
    ATTEMPT_RETRIED: "retrying",
    ATTEMPT_LOST: "paused",
    "cancelled": "cancelled",
}
LEGEND = (
    ("succeeded", "succeeded"), ("failed", "failed"), (ATTEMPT_RETRIED, "failed, retried"),
    (ATTEMPT_LOST, "agent lost"), ("running", "running"),
)  # fmt: skip


def render_timeline(
    tl: Timeline, width: int, now: float, style_of: Callable[[str], Style]
) -> list[Text]:
    """The chart as lines of ``width`` cells: an axis, then a row per task, then a legend.
    ``style_of(look)`` colours a state."""
    end = tl.end if tl.end is not None else max(now, tl.begin + 0.001)
    span = max(end - tl.begin, 0.001)
    cols = max(10, width - NAME_W - 2)

    def col(ts: float) -> int:
        return min(cols - 1, max(0, int((ts - tl.begin) / span * cols)))

    dim = Style(dim=True)
    axis = Text(" " * NAME_W + " ")
    label_end = format_duration(span)
    axis.append("0s", dim)
    axis.append(" " * max(1, cols - 2 - len(label_end)))
    axis.append(label_end, dim)
    lines = [axis]
    ruler = Text(" " * NAME_W + " ")
    ruler.append("┬" + "─" * (cols - 2) + "┬", dim)
    lines.append(ruler)
    for t in tl.status.tasks:
        cells: list[tuple[str, Style | None]] = [(" ", None)] * cols
        attempts = tl.attempts.get(t.index, [])
        if t.ready_at is not None and attempts:  # queued before its first attempt
            for c in range(col(t.ready_at), col(attempts[0].start)):
                cells[c] = ("·", dim)
        for n, a in enumerate(attempts):
            style = style_of(OUTCOME_LOOK.get(a.outcome, "running"))
            first, last = col(a.start), col(a.end if a.end is not None else end)
            for c in range(first, last + 1):
                cells[c] = ("█", style)
            if n + 1 < len(attempts):  # waiting out a backoff, or requeued
                for c in range(last + 1, col(attempts[n + 1].start)):
                    cells[c] = ("·", dim)
            if a.outcome in (ATTEMPT_RETRIED, ATTEMPT_LOST, "failed") and last + 1 < cols:
                cells[min(last, cols - 1)] = ("▌", style)
        aged = tl.aged_out.get(t.index, 0)
        if aged and attempts:  # earlier attempts the capped event stream no longer tells
            cells[0] = ("⋯", dim)
        row = Text(_name(t.name, len(attempts) + aged), style="bold" if attempts else "dim")
        row.append(" ")
        for ch, st in cells:
            row.append(ch, st)
        lines.append(row)
    legend = Text(" " * NAME_W + " ")
    for outcome, label in LEGEND:
        legend.append("█ ", style_of(OUTCOME_LOOK[outcome]))
        legend.append(f"{label}  ", dim)
    if tl.aged_out:
        legend.append("⋯ ", dim)
        legend.append("earlier attempts aged out", dim)
    lines.append(Text())
    lines.append(legend)
    return lines


def _name(name: str, attempts: int) -> str:
    """The row's label: the task's name, with ``×n`` for several attempts."""
    tag = f" ×{attempts}" if attempts > 1 else ""
    room = NAME_W - len(tag)
    shown = name if len(name) <= room else name[: room - 1] + "…"
    return f"{shown}{tag}".ljust(NAME_W)
