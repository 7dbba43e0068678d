"""Completes workflow names as the operator types (names read through the engine)."""

from __future__ import annotations

import asyncio

from textual.suggester import Suggester

from engine import Engine


class NameSuggester(Suggester):
    """Suggests the most common workflow name starting with what was typed."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self._engine = engine

    async def get_suggestion(self, value: str) -> str | None:
        if not value:
            return None
        try:
            names = await asyncio.to_thread(self._engine.names, value, 1)
        except Exception:  # noqa: BLE001 - a suggestion is optional
            return None
        return names[0][0] if names else None
