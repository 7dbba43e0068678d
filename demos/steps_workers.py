"""Workers for the steps manager's book-word-counts example, in the manager's own worker model:
each takes ``(correlation_id, message)`` and returns its reply, and talks to the others
through files (book-split names each chapter's lines, segment-word-counts leaves its
counts in a pickle and answers with its path, sum-splits adds them up into a TSV).
:func:`engine.manager_handler` is their transport here in place of a message bus:

    redisflow push demos/steps-book-word-counts.yaml --input '{"filename": "book.txt"}'
    redisflow-agent --handler demos.steps_workers:handler --until-idle \\
        --type book-split --type segment-word-counts --type sum-splits --type store-title

The book is a plain text whose chapters start at lines ``CHAPTER <roman numeral>.`` and
whose title is on a line ``Title: ...`` (as Project Gutenberg's texts have them).
"""

from __future__ import annotations

import os
import pickle
import re
import tempfile
from typing import Any

from engine import manager_handler

CHAPTER = re.compile(r"^CHAPTER [XIV]+\.$")
TITLE = re.compile(r"^Title: (.*)$")


def _job(correlation_id: str) -> str:
    return correlation_id.split(":", maxsplit=1)[0]


def book_split(correlation_id: str, msg: dict[str, Any]) -> dict[str, Any]:
    """The book's chapters as sections: each its heading and its lines [start, end)."""
    filename = msg["filename"]
    sections: list[dict[str, Any]] = []
    with open(filename, encoding="utf-8") as fp:
        lines = fp.read().split("\n")
    starts = [n for n, line in enumerate(lines) if CHAPTER.match(line)]
    for at, start in enumerate(starts):
        end = starts[at + 1] if at + 1 < len(starts) else len(lines)
        sections.append({"section": lines[start].strip(), "start": start, "end": end})
    return {"filename": filename, "sections": sections}


def segment_word_counts(correlation_id: str, msg: dict[str, Any]) -> dict[str, Any]:
    """One section's word counts (words split on white space), left in a pickle named
    for the job; the reply is its path."""
    section = msg["section"]
    counts: dict[str, int] = {}
    with open(msg["filename"], encoding="utf-8") as fp:
        lines = fp.read().split("\n")[section["start"] : section["end"]]
    for line in lines:
        for word in line.split():
            counts[word] = counts.get(word, 0) + 1
    path = os.path.join(tempfile.gettempdir(), _job(correlation_id) + "_counts.bin")
    with open(path, "wb") as out:
        pickle.dump(counts, out)
    return {"section": path}


def sum_splits(correlation_id: str, msg: dict[str, Any]) -> dict[str, Any]:
    """The sections' counts added up, written as ``word<TAB>count`` lines; the reply is
    that file's path."""
    total: dict[str, int] = {}
    for path in msg["sections"]:
        with open(path, "rb") as fp:
            for word, n in pickle.load(fp).items():
                total[word] = total.get(word, 0) + n
    path = os.path.join(tempfile.gettempdir(), _job(correlation_id) + "_counts.tsv")
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(f"{word}\t{n}\n" for word, n in total.items())
    return {"sum_splits": path}


def store_title(correlation_id: str, msg: dict[str, Any]) -> dict[str, Any]:
    """The book's title, from its ``Title:`` line."""
    title = ""
    with open(msg["filename"], encoding="utf-8") as fp:
        for line in fp:
            m = TITLE.match(line.rstrip("\n"))
            if m:
                title = m.group(1)
                break
    return {"filename": msg["filename"], "title": title}


handler = manager_handler(
    {
        "book-split": book_split,
        "segment-word-counts": segment_word_counts,
        "sum-splits": sum_splits,
        "store-title": store_title,
    }
)
