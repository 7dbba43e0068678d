"""Loads the Lua state transitions in ``engine/lua`` and binds them to a client.

Each script is ``_lib.lua`` followed by the script's own file, registered once per
client with redis-py's ``register_script`` (EVALSHA, falling back to EVAL when the
server does not know the script yet, e.g. after a restart). The agent's per-turn round
trips go through :class:`ScriptBatch`, plain EVALSHA with a reload on NOSCRIPT.

Two guards keep a script from stopping half-way (Redis does not roll a script back):
before its own body, each script checks that its ACL user may run every command it may
use (:func:`script_commands`, Redis 7's ``redis.acl_check_cmd``), and on Redis 7 a
``#!lua`` first line makes the server refuse a script that would write while memory is
over ``maxmemory`` before it starts. Redis 6.2 knows neither: it gets the plain source.
"""

from __future__ import annotations

import re
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


# Scripts that may run while Redis is out of memory: cleanup frees what it touches.
ALLOW_OOM = frozenset({"cleanup"})
_CALL = re.compile(r"""(?:redis\.p?call|write_all)\(\s*'([A-Za-z]+)'""")
_FUNCTION = re.compile(r"^local function (\w+)\(", re.MULTILINE)


def _lua(name: str) -> str:
    return (resources.files("engine") / "lua" / f"{name}.lua").read_text(encoding="utf-8")


@cache
def _lib_commands() -> tuple[frozenset[str], dict[str, frozenset[str]], dict[str, str]]:
    """``_lib.lua`` read once: the commands its top level runs, each helper's own
    commands, and each helper's text (to find the helpers it calls)."""
    lib = _lua("_lib")
    starts = list(_FUNCTION.finditer(lib))
    top = frozenset(_CALL.findall(lib[: starts[0].start()])) if starts else frozenset()
    texts: dict[str, str] = {}
    for k, m in enumerate(starts):
        end = starts[k + 1].start() if k + 1 < len(starts) else len(lib)
        texts[m.group(1)] = lib[m.end() : end]
    return top, {f: frozenset(_CALL.findall(t)) for f, t in texts.items()}, texts


@cache
def script_commands(name: str) -> frozenset[str]:
    """Every Redis command script ``name`` may call, its helpers' included (upper case)."""
    top, own, texts = _lib_commands()
    found, todo, seen = set(top), [_lua(name)], set()
    while todo:
        text = todo.pop()
        found.update(_CALL.findall(text))
        for helper in own:
            if helper not in seen and re.search(rf"\b{helper}\(", text):
                seen.add(helper)
                todo.append(texts[helper])
    return frozenset(c.upper() for c in found)


@cache
def script_source(name: str, shebang: bool = False) -> str:
    """The full source of script ``name``: the shared helpers, the permission guard, then
    its own body; with ``shebang`` (Redis 7.0+) a ``#!lua`` line first."""
    need = ",".join(f"'{c}'" for c in sorted(script_commands(name)))
    guard = f"do local no = denied({{{need}}}) if no then return redis.error_reply(no) end end"
    source = f"{_lua('_lib')}\n{guard}\n{_lua(name)}"
    if not shebang:
        return source
    return ("#!lua flags=allow-oom" if name in ALLOW_OOM else "#!lua") + f"\n{source}"


def supports_shebang(client: redis.Redis) -> bool:
    """Whether the server reads ``#!lua`` script flags (Redis 7.0+), asked in Lua so it
    needs no INFO permission: 6.2 has no ``redis.REDIS_VERSION_NUM``."""
    return int(client.eval("return redis.REDIS_VERSION_NUM or 0", 0) or 0) >= 0x070000


class Scripts:
    """Every engine script registered on one Redis client, as attributes."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._registered: dict[str, Any] | None = None

    @property
    def _scripts(self) -> dict[str, Any]:
        # Registered on first use, as the server's version picks the source: a handle that
        # only reads never runs a script (nor needs the permission to).
        if self._registered is None:
            shebang = supports_shebang(self.client)
            self._registered = {
                name: self.client.register_script(script_source(name, shebang))
                for name in SCRIPT_NAMES
            }
        return self._registered

    def batch(self) -> ScriptBatch:
        """A round trip of several script calls (see :class:`ScriptBatch`)."""
        return ScriptBatch(self)

    def load_all(self) -> None:
        """Load every script into the server (after a restart or SCRIPT FLUSH)."""
        for script in self._scripts.values():
            self.client.script_load(script.script)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
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
