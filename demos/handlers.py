"""Example task handlers for the demo workflows.

Run with ``redisflow-agent --handler demos.handlers:<name> ...`` from the project root.
A handler takes an :class:`engine.Task` and returns the task's output (any JSON value);
raising fails the attempt.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from engine import Task, manager_message

BOOK_FILE = Path(__file__).with_name("book.txt")


def read_book(path: Path = BOOK_FILE) -> dict[str, Any]:
    """The demo book: its title (first line) and its sections, one per paragraph of each
    chapter, as text."""
    text = path.read_text(encoding="utf-8")
    title, _, body = text.partition("\n")
    sections = []
    for chapter in re.split(r"^CHAPTER .*$", body, flags=re.MULTILINE)[1:]:
        sections += [p.strip() for p in chapter.split("\n\n") if p.strip()]
    return {"title": title.strip(), "sections": sections}


def count_words(text: str) -> Counter[str]:
    """Words of ``text``, lower case, without punctuation."""
    return Counter(re.findall(r"[a-z]+(?:'[a-z]+)?", text.lower()))


def noop(task: Task) -> None:
    """Does nothing: the benchmark's task body."""


def echo(task: Task) -> Any:
    """Returns the payload, and what the parents returned."""
    return {"payload": task.payload, "parents": task.parents}


def stepper(task: Task) -> Any:
    """The steps of demos/branch.yaml: each fails when the workflow's input lists its name
    under ``fail`` (``--input '{"fail": ["deploy"]}'``), else says what it did."""
    failing = (task.input or {}).get("fail", []) if isinstance(task.input, dict) else []
    if task.name in failing:
        raise RuntimeError(f"{task.name} failed (asked to by the input)")
    return f"{task.name} done"


def book_word_counts(task: Task) -> Any:
    """The steps of the steps manager's book-word-counts workflow
    (demos/steps-book-word-counts.yaml), written against the steps manager's message model
    (:func:`engine.manager_message`): a first step gets the job's JSON, a later one its
    parents' outputs merged; an item of ``section-counts`` gets its element as
    ``section`` and answers under ``section``; the step after the map gets those answers
    listed as ``sections``."""
    message = manager_message(task)
    if task.name == "book-split":
        book = read_book(Path(message["book"]) if "book" in message else BOOK_FILE)
        return {"title": book["title"], "sections": book["sections"]}
    if task.name == "section-counts":  # once per section: the sub-task's step
        return {"section": dict(count_words(message["section"]))}
    # demos/steps-book-steps.yaml: a sub-task of two steps per section
    if task.name == "segment-clean":
        return {"tokens": re.findall(r"[a-z]+(?:'[a-z]+)?", message["section"].lower())}
    if task.name == "segment-word-counts":
        return {"section": dict(Counter(message["tokens"]))}
    if task.name == "sum-splits":
        total: Counter[str] = Counter()
        for part in message["sections"]:
            total.update(part)
        return {"words": sum(total.values()), "top": dict(total.most_common(5))}
    if task.name == "store-title":
        return read_book()["title"]
    raise ValueError(f"no step called {task.name!r}")
