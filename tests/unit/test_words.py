"""Counts in words: one of a thing is singular, everywhere a count is printed."""

from __future__ import annotations

import pytest

from engine import plural


@pytest.mark.parametrize(
    ("n", "word", "many", "said"),
    [
        (0, "task", None, "0 tasks"),
        (1, "task", None, "1 task"),
        (2, "run", None, "2 runs"),
        (30000, "task", None, "30,000 tasks"),
        (1, "body", "bodies", "1 body"),
        (3, "body", "bodies", "3 bodies"),
    ],
)
def test_plural(n: int, word: str, many: str | None, said: str) -> None:
    assert plural(n, word, many) == said
