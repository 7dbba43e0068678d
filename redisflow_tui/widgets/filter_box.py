"""A search or filter box on a tab's screen: while it is empty, 1–4 still switch tabs."""

from __future__ import annotations

from textual.widgets import Input

TAB_KEYS = frozenset("1234")


class FilterBox(Input):
    """An :class:`Input` that leaves the tab keys to the app until something is typed
    (a name or an id may have digits: once typing began, they are text)."""

    def check_consume_key(self, key: str, character: str | None) -> bool:
        if key in TAB_KEYS and not self.value:
            return False
        return super().check_consume_key(key, character)
