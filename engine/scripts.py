"""Loads the Lua state transitions in ``engine/lua`` and binds them to a client.

Each script is ``_lib.lua`` followed by the script's own file, registered once per
client with redis-py's ``register_script`` (EVALSHA, falling back to EVAL when the
server does not know the script yet, e.g. after a restart).
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import redis

SCRIPT_NAMES = (
    "push",
    "claim",
    "complete",
    "register",
    "heartbeat",
    "reap",
    "stop",
    "pause",
    "release",
    "cancel",
    "retry",
    "cleanup",
)


@cache
def script_source(name: str) -> str:
    """The full source of script ``name``: the shared helpers, then its own body."""
    lua = resources.files("engine") / "lua"
    lib = (lua / "_lib.lua").read_text(encoding="utf-8")
    body = (lua / f"{name}.lua").read_text(encoding="utf-8")
    return f"{lib}\n{body}"


class Scripts:
    """Every engine script registered on one Redis client, as attributes."""

    def __init__(self, client: redis.Redis) -> None:
        self._scripts: dict[str, Any] = {
            name: client.register_script(script_source(name)) for name in SCRIPT_NAMES
        }

    def __getattr__(self, name: str) -> Any:
        try:
            return self._scripts[name]
        except KeyError:
            raise AttributeError(name) from None
