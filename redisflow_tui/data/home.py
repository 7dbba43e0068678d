"""The Workflows screen's data: one page of a filtered list, and the totals."""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine import Engine, Stats, WorkflowSummary

# The order the totals line shows them and the state filter cycles through them: live
# ones, then those waiting to start (a concurrency slot, a start time), then the ended.
WORKFLOW_STATES = (
    "running", "paused", "queued", "scheduled", "succeeded", "failed", "cancelled",
)  # fmt: skip
PAGE_SIZE = 50


@dataclass(frozen=True)
class HomeQuery:
    """Which workflows the table lists: a state filter, a name, and a page."""

    state: str | None = None
    name: str | None = None
    page: int = 0
    size: int = PAGE_SIZE
    oldest: bool = False  # oldest first (the whole list; see data/sorting.py)

    def describe(self) -> str:
        """``failed workflows named "etl"``, in words."""
        what = f"{self.state} workflows" if self.state else "all workflows"
        if self.name:
            what += f' named "{self.name}"'
        return what

    def next_state(self) -> HomeQuery:
        """The same query with the next state filter (all → running → ... → all)."""
        order = (None, *WORKFLOW_STATES)
        at = order.index(self.state) if self.state in order else 0
        return replace(self, state=order[(at + 1) % len(order)], page=0)


@dataclass
class HomePage:
    """One page as read: its rows, how many match, and the totals if asked for."""

    query: HomeQuery
    rows: list[WorkflowSummary]
    matching: int
    stats: Stats | None = None

    @property
    def pages(self) -> int:
        return max(1, -(-self.matching // self.query.size))


def read_page(engine: Engine, query: HomeQuery, with_stats: bool = True) -> HomePage:
    """Read one page (a range of one index, then only the listed fields) and the totals.

    A page past the end (workflows were cleaned up meanwhile) falls back to the last.
    """
    matching = engine.count(query.state, query.name) if not (query.state and query.name) else -1
    rows = _rows(engine, query)
    if matching < 0:
        # both filters: no O(1) count; say how many we can see so far
        matching = query.page * query.size + len(rows)
    last = max(0, -(-matching // query.size) - 1)
    if query.page > last:
        query = replace(query, page=last)
        rows = _rows(engine, query)
    stats = engine.stats() if with_stats else None
    return HomePage(query, rows, matching, stats)


def _rows(engine: Engine, query: HomeQuery) -> list[WorkflowSummary]:
    offset = query.page * query.size
    return engine.list(query.state, query.name, offset, query.size, oldest_first=query.oldest)


def progress_bar(done: int, failed: int, total: int, width: int = 10) -> tuple[str, str, str]:
    """Three parts of a bar: succeeded, failed and not yet finished, in cells."""
    if total <= 0:
        return "", "", "·" * width
    ok = round(width * done / total)
    bad = min(width - ok, max(1 if failed else 0, round(width * failed / total)))
    return "█" * ok, "█" * bad, "·" * (width - ok - bad)


def finished_counts(stats: Stats) -> dict[str, int]:
    """Finished workflows by state, from the counters."""
    return {s: stats.workflows.get(s, 0) for s in ("succeeded", "failed", "cancelled")}
