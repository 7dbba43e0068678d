"""redisflow's operator console: watch and steer a live deployment from a terminal.

Run ``redisflow-tui`` (``--demo`` for a deployment that moves at once). The console
reads everything through :mod:`engine`'s public API.
"""

from __future__ import annotations

__all__ = ["RedisflowApp"]


def __getattr__(name: str) -> object:
    if name == "RedisflowApp":
        from .app import RedisflowApp

        return RedisflowApp
    raise AttributeError(name)
