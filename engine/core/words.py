"""Counts in words, as every tool prints them: ``1 task``, ``12 tasks``, ``1,200 runs``."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word``, in the plural unless ``n`` is 1 (``many``: an irregular
    plural), ``n`` with thousands separators."""
    return f"{n:,} " + (word if n == 1 else many or word + "s")
