"""Example task handlers for the demo workflows.

Run with ``redisflow-agent --handler demos.handlers:<name> ...`` from the project root.
A handler takes an :class:`engine.Task` and returns the task's output (any JSON value);
raising fails the attempt.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from engine import Task

BOOK = {
    "title": "The Tale of Two Shards",
    "sections": [
        "It was the best of times, it was the worst of times.",
        "It was the age of wisdom, it was the age of foolishness.",
        "It was the epoch of belief, it was the epoch of incredulity.",
    ],
}


def noop(task: Task) -> None:
    """Does nothing: the benchmark's task body."""


def echo(task: Task) -> Any:
    """Returns the payload, and what the parents returned."""
    return {"payload": task.payload, "parents": task.parents}


def _words(text: str) -> Counter[str]:
    return Counter(w.strip(".,;").lower() for w in text.split())


def book_word_counts(task: Task) -> Any:
    """The steps of seed 002's book-word-counts workflow (demos/seed002-book-word-counts.yaml)."""
    if task.name == "book-split":
        return {"title": BOOK["title"], "sections": list(range(len(BOOK["sections"])))}
    if task.name == "section-counts":
        # The step's `task:` runs once per item of the parent's itemListKey list.
        key = task.payload["itemListKey"]
        items = task.parents["book-split"][key]
        return [dict(_words(BOOK["sections"][i])) for i in items]
    if task.name == "sum-splits":
        total: Counter[str] = Counter()
        for part in task.parents["section-counts"]:
            total.update(part)
        return dict(total.most_common(5))
    if task.name == "store-title":
        return BOOK["title"]
    raise ValueError(f"no step called {task.name!r}")
