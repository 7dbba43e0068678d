"""Completes file paths in the push dialog."""

from __future__ import annotations

import glob
import os

from textual.suggester import Suggester


class PathSuggester(Suggester):
    """Suggests the first file or directory whose path starts with what was typed."""

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)

    async def get_suggestion(self, value: str) -> str | None:
        if not value:
            return None
        pattern = os.path.expanduser(value) + "*"
        for match in sorted(glob.glob(pattern))[:50]:
            if os.path.isdir(match):
                match += os.sep
            if match.endswith((".yaml", ".yml", ".json", os.sep)):
                return value + match[len(os.path.expanduser(value)) :]
        return None
