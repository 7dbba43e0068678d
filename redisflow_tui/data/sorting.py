"""How the home list is sorted: by id or age, the order of the whole list (newest or
oldest first, read so from Redis); by any other column, the page shown."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine import WorkflowSummary

COLUMNS = ("id", "name", "state", "progress", "done", "failed", "age", "took")
WHOLE_LIST = frozenset({"id", "age"})  # sorted by Redis: every page in that order
_KEYS: dict[str, Callable[[WorkflowSummary], Any]] = {
    "name": lambda w: (w.name, int(w.id)),
    "state": lambda w: (str(w.state), int(w.id)),
    "progress": lambda w: (w.succeeded / w.total if w.total else 0.0, int(w.id)),
    "done": lambda w: (w.succeeded, int(w.id)),
    "failed": lambda w: (w.failed, int(w.id)),
    "took": lambda w: (
        (w.finished_at - w.created_at) if w.finished_at and w.created_at else -1.0,
        int(w.id),
    ),
}
_ASCENDING_FIRST = frozenset({"name", "state"})  # A→Z first; numbers: biggest first


@dataclass(frozen=True)
class Sort:
    """A column and a direction (``id`` descending: newest first, the default)."""

    column: str = "id"
    descending: bool = True

    @property
    def oldest_first(self) -> bool:
        """Whether Redis should list oldest first (id ascending, age descending)."""
        if self.column == "age":
            return self.descending
        return self.column == "id" and not self.descending

    @property
    def whole_list(self) -> bool:
        return self.column in WHOLE_LIST

    def by(self, column: str) -> Sort:
        """Sorted by ``column``: the same column again flips the direction."""
        if column == self.column:
            return Sort(column, not self.descending)
        return Sort(column, column not in _ASCENDING_FIRST and column != "age")

    def next(self) -> Sort:
        """Sorted by the next column (the ``S`` key)."""
        at = COLUMNS.index(self.column) if self.column in COLUMNS else -1
        return self.by(COLUMNS[(at + 1) % len(COLUMNS)])

    def arrow(self) -> str:
        return "↓" if self.descending else "↑"

    def describe(self, label: str) -> str:
        """``newest first`` / ``oldest first``, or ``this page by Failed ↓``."""
        if self.whole_list:
            return "oldest first" if self.oldest_first else "newest first"
        return f"this page by {label} {self.arrow()}"

    def apply(self, rows: list[WorkflowSummary]) -> list[WorkflowSummary]:
        """``rows`` in this order (the page as read, for id and age)."""
        key = _KEYS.get(self.column)
        if key is None:
            return rows
        return sorted(rows, key=key, reverse=self.descending)
