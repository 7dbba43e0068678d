"""Loads the Lua state transitions in ``engine/lua`` and binds them to a client.

Each script is ``_lib.lua`` followed by the script's own file, registered once per
client with redis-py's ``register_script`` (EVALSHA, falling back to EVAL when the
server does not know the script yet, e.g. after a restart). The agent's per-turn round
trips go through :class:`ScriptBatch`, plain EVALSHA with a reload on NOSCRIPT.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import redis
from redis.exceptions import NoScriptError

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
    lua = resources.files("engine.store") / "lua"
    lib = (lua / "_lib.lua").read_text(encoding="utf-8")
    body = (lua / f"{name}.lua").read_text(encoding="utf-8")
    return f"{lib}\n{body}"


class Scripts:
    """Every engine script registered on one Redis client, as attributes."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._scripts: dict[str, Any] = {
            name: client.register_script(script_source(name)) for name in SCRIPT_NAMES
        }

    def batch(self) -> ScriptBatch:
        """A round trip of several script calls (see :class:`ScriptBatch`)."""
        return ScriptBatch(self)

    def load_all(self) -> None:
        """Load every script into the server (after a restart or SCRIPT FLUSH)."""
        for script in self._scripts.values():
            self.client.script_load(script.script)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._scripts[name]
        except KeyError:
            raise AttributeError(name) from None


class ScriptBatch:
    """Script calls sent in one pipelined round trip as plain EVALSHA.

    redis-py's registered scripts ask SCRIPT EXISTS before every pipeline that uses them;
    agents send one pipeline per turn, so that was a second round trip per turn. Here a
    call whose script the server lacks (it restarted, or SCRIPT FLUSH) comes back as
    NOSCRIPT: the scripts are loaded and only those calls are sent again, so no call ever
    runs twice.
    """

    def __init__(self, scripts: Scripts) -> None:
        self.scripts = scripts
        self.calls: list[tuple[str, list[Any], list[Any]]] = []

    def add(self, name: str, keys: list[Any], args: list[Any]) -> None:
        """Queue a call of script ``name``."""
        self.calls.append((name, keys, args))

    def __len__(self) -> int:
        return len(self.calls)

    def _send(self, calls: list[tuple[str, list[Any], list[Any]]]) -> list[Any]:
        pipe = self.scripts.client.pipeline(transaction=False)
        for name, keys, args in calls:
            sha = getattr(self.scripts, name).sha
            pipe.execute_command("EVALSHA", sha, len(keys), *keys, *args)
        return list(pipe.execute(raise_on_error=False))

    def execute(self) -> list[Any]:
        """Send every call; replies in order, errors as exception objects."""
        replies = self._send(self.calls)
        missing = [k for k, r in enumerate(replies) if isinstance(r, NoScriptError)]
        if missing:
            self.scripts.load_all()
            again = self._send([self.calls[k] for k in missing])
            for k, reply in zip(missing, again, strict=True):
                replies[k] = reply
        return replies
