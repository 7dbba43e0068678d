"""A map's items on the Workflow screen: which page of which filter, read through the engine.

A map runs one item per element of a parent's output, up to 100,000 of them: the table
shows one page (:data:`ITEM_PAGE` items), read in Redis by item index, or of the failed
(or running) items only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine import Engine, ItemStatus, TaskStatus

ITEM_PAGE = 100
ITEM_FILTERS = ("all", "failed", "running")


@dataclass(frozen=True)
class ItemsQuery:
    """One page of one map's items: the map's task index and name, page (from 0), filter."""

    task: int
    name: str
    page: int = 0
    filter: str = "all"

    def read(self, engine: Engine, wid: str) -> list[ItemStatus]:
        """The page as stored now."""
        state = None if self.filter == "all" else self.filter
        return engine.items(wid, self.name, self.page * ITEM_PAGE, ITEM_PAGE, state)

    def count(self, task: TaskStatus) -> int:
        """How many items the filter passes, from the map's counts."""
        items = task.items or {}
        if self.filter != "all":
            return items.get(self.filter, 0)
        total = items.get("total")
        return sum(n for k, n in items.items() if k != "total") if total is None else total

    def pages(self, task: TaskStatus) -> int:
        return max(1, -(-self.count(task) // ITEM_PAGE))

    def turned(self, delta: int, task: TaskStatus) -> ItemsQuery:
        """The page ``delta`` pages on, kept within the pages there are."""
        page = min(max(0, self.page + delta), self.pages(task) - 1)
        return replace(self, page=page)

    def filtered(self, which: str) -> ItemsQuery:
        """Only ``which`` items from the first page; the same filter again: all of them."""
        return replace(self, page=0, filter="all" if self.filter == which else which)
