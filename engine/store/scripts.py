"""Loads the Lua state transitions in ``engine/store/lua`` and runs them.

Each script is the shared helpers it uses (``lua/lib/*.lua``, :data:`LIB`), a permission
guard and the script's own file, registered once per client with redis-py's
``register_script`` (EVALSHA; SCRIPT LOAD then EVALSHA again when the server does not know
the script yet, e.g. after a restart). Several calls in one round
trip go through :class:`ScriptBatch`: plain EVALSHA, reloading on NOSCRIPT. Nothing here
sends EVAL: ``redisflow acl`` allows each role EVALSHA of its own scripts' SHAs only
(:func:`script_sha`), and SCRIPT LOAD, which runs nothing.

Two guards keep a script from stopping half-way (Redis does not roll a script back):
before its own body, each script checks that its ACL user may run every command it may
use (:func:`script_commands`, Redis 7's ``redis.acl_check_cmd``), and on Redis 7 a
``#!lua`` first line makes the server refuse a script that would write while memory is
over ``maxmemory`` before it starts. Redis 6.2 knows neither: it gets the plain source.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Generic, TypeVar

import redis
from redis.exceptions import NoScriptError

from ..errors import (
    EarlierReleaseError,
    LeaseLostError,
    NotFoundError,
    NotReplicatedError,
    StateError,
)
from .codec import fields
from .durable import refresh_slots, send_waited
from .layout import is_cluster

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
    "expire",
    "expand",
    "schedule",
    "tick",
    "heads",
    "template",
    "signal",
    "waits",
    "child",
    "drain",
    "tasklog",
    "rollup",
)

T = TypeVar("T")

# Error replies of the scripts ("RFSTATE workflow 3 is failed; ...") and what they raise.
SCRIPT_ERRORS: dict[str, type[Exception]] = {
    "RFSTATE": StateError,
    "RFNOTFOUND": NotFoundError,
    "RFLEASE": LeaseLostError,
    "RFEARLIER": EarlierReleaseError,
}


# Scripts that may run while Redis is out of memory: cleanup frees what it touches.
ALLOW_OOM = frozenset({"cleanup"})
# Scripts that only read (``#!lua flags=no-writes``): Redis runs them while out of memory
# and on a read-only replica.
NO_WRITES = frozenset({"heads"})
# The shared helpers, one concept a file (``lua/lib/<name>.lua``), in the order they are
# joined: Lua's locals exist from their definition on, so a file uses only earlier ones.
# Each file's first paragraph (its title) is left out of the scripts.
LIB = (
    "keys",
    "guard",
    "counters",
    "history",
    "definition",
    "events",
    "lease",
    "record",
    "input",
    "rate_limits",
    "queues",
    "rules",
    "gates",
    "ends",
    "children",
    "maps",
    "conditions",
    "wait_tasks",
    "claim_row",
    "housekeeping",
    "operator",
    "retention",
    "outcomes",
    "push",
    "calls",
)
_CALL = re.compile(r"""(?:redis\.p?call|write_all)\(\s*'([A-Za-z]+)'""")
_FUNCTION = re.compile(r"^local function (\w+)\(", re.MULTILINE)
_CALLED = re.compile(r"\b(\w+)\(")
_WORD = re.compile(r"\b\w+\b")
_COMMENT = re.compile(r"--[^\n]*")  # no string of the Lua sources holds "--"


def _words(text: str) -> frozenset[str]:
    """The names ``text``'s code uses (its comments' words are no use)."""
    return frozenset(_WORD.findall(_COMMENT.sub("", text)))


@cache
def _lua(name: str) -> str:
    return (resources.files("engine.store") / "lua" / f"{name}.lua").read_text(encoding="utf-8")


# The field names of codec/fields.py, given to Lua under the same names: each name a
# script's code says is written as its value when the script is built (F_LEFT becomes
# 'left'), so a field is named in one place and a name Python does not declare is a Lua
# error the tests meet.
FIELD_NAMES: dict[str, str] = {
    name: value
    for name, value in vars(fields).items()
    if re.fullmatch(r"[FDMTI]_[A-Z_]+", name) and isinstance(value, str)
}


# A word shaped like a field name; those codec/fields.py declares are replaced.
_FIELD_WORD = re.compile(r"\b[FDMTI]_[A-Z_]+\b")


def with_fields(code: str, words: frozenset[str] | None = None) -> str:
    """``code`` with the field names it says written as their values: a constant, not a
    local (Lua allows 200 locals in a chunk, and every helper that named one would
    capture it as an upvalue on each call). Names only its comments say stay as they are
    (``words``: the names its code uses, when known). One pattern for every name: no
    regex compiled per script, so building them all costs an agent's start a few ms."""
    used = (_words(code) if words is None else words) & FIELD_NAMES.keys()
    if not used:
        return code
    quoted = {name: f"'{FIELD_NAMES[name]}'" for name in used}
    return _FIELD_WORD.sub(lambda m: quoted.get(m.group(), m.group()), code)


@cache
def library() -> str:
    """Every shared helper, the files of :data:`LIB` joined in order (less their titles)."""
    parts = []
    for name in LIB:
        text = _lua(f"lib/{name}")
        parts.append(text.split("\n\n", 1)[1])
    return "\n".join(parts)


@cache
def _lib_commands() -> tuple[frozenset[str], dict[str, tuple[frozenset[str], frozenset[str]]]]:
    """The library read once: the commands its top level runs, and each helper's own
    commands and the helpers it calls."""
    lib = library()
    starts = list(_FUNCTION.finditer(lib))
    top = frozenset(_CALL.findall(lib[: starts[0].start()])) if starts else frozenset()
    texts: dict[str, str] = {}
    for k, m in enumerate(starts):
        end = starts[k + 1].start() if k + 1 < len(starts) else len(lib)
        texts[m.group(1)] = lib[m.end() : end]
    helpers = {
        f: (frozenset(_CALL.findall(t)), frozenset(_CALLED.findall(t)) & texts.keys())
        for f, t in texts.items()
    }
    return top, helpers


@cache
def script_commands(name: str) -> frozenset[str]:
    """Every Redis command script ``name`` may call, its helpers' included (upper case)."""
    top, helpers = _lib_commands()
    text = _lua(name)
    found = set(top) | set(_CALL.findall(text))
    todo = list(frozenset(_CALLED.findall(text)) & helpers.keys())
    seen = set(todo)
    while todo:
        own, calls = helpers[todo.pop()]
        found |= own
        for helper in calls - seen:
            seen.add(helper)
            todo.append(helper)
    return frozenset(c.upper() for c in found)


# A top-level definition of the library: `local function name(` or `local a, b = ...`.
_TOP = re.compile(r"^local (?:function (\w+)\(|([\w, ]+?)\s*=)", re.MULTILINE)


@cache
def _lib_blocks() -> tuple[list[tuple[frozenset[str], str, frozenset[str]]], dict[str, int]]:
    """The library cut into its top-level definitions: the names each defines (the
    leading comment defines none), its text and the words it uses; and where each name
    is defined."""
    lib = library()
    starts = list(_TOP.finditer(lib))
    blocks = [(frozenset[str](), lib[: starts[0].start()], frozenset[str]())]
    for k, m in enumerate(starts):
        end = starts[k + 1].start() if k + 1 < len(starts) else len(lib)
        names = [m.group(1)] if m.group(1) else [n.strip() for n in m.group(2).split(",")]
        text = lib[m.start() : end]
        blocks.append((frozenset(names), text, _words(text)))
    where = {n: i for i, (names, _, _) in enumerate(blocks) for n in names}
    return blocks, where


def lib_for(text: str) -> str:
    """The part of the library that ``text`` uses: the definitions it names, and theirs,
    in the library's order. Every call of a script runs its helpers' definitions again (a
    closure each), so a script carries only its own: the whole library costs tens of µs
    per call."""
    return _lib_with_words(_words(text))[0]


def _lib_with_words(words: frozenset[str]) -> tuple[str, frozenset[str]]:
    """lib_for of a text using ``words``, and the words its code uses."""
    blocks, where = _lib_blocks()
    need: set[int] = {0}
    todo = [words]
    while todo:
        for n in todo.pop() & where.keys():
            i = where[n]
            if i not in need:
                need.add(i)
                todo.append(blocks[i][2])
    used = [blocks[i] for i in sorted(need)]
    return "".join(b for _, b, _ in used), frozenset().union(*(w for _, _, w in used))


@cache
def script_source(name: str, shebang: bool = False, sharded: bool = False) -> str:
    """The full source of script ``name``: the field names and the shared helpers
    it uses, the permission guard, then its own body; with ``shebang`` (Redis 7.0+) a
    ``#!lua`` line first. With ``sharded`` (a Redis 7 cluster) its channels are sharded
    ones: SPUBLISH reaches the subscribers of the shard's own master, where PUBLISH goes
    to every node."""
    if sharded:
        return script_source(name, shebang).replace("'PUBLISH'", "'SPUBLISH'")
    need = ",".join(f"'{c}'" for c in sorted(script_commands(name)))
    guard = f"do local no = denied({{{need}}}) if no then return redis.error_reply(no) end end"
    own = f"{guard}\n{_lua(name)}"
    own_words = _words(own)
    lib, lib_words = _lib_with_words(own_words | {"flush"})
    source = with_fields(f"{lib}\n{own}", lib_words | own_words)
    if not shebang:
        return source
    flags = " flags=allow-oom" if name in ALLOW_OOM else ""
    if name in NO_WRITES:
        flags = " flags=no-writes"
    return f"#!lua{flags}\n{source}"


def script_sha(source: str) -> str:
    """The SHA1 Redis names ``source`` by (what EVALSHA sends, and ACLs allow)."""
    return hashlib.sha1(source.encode()).hexdigest()  # noqa: S324 (Redis's own name)


# Loads on Redis 7.0+ only: 6.2 reads "#!lua" as Lua, a syntax error. Loading runs nothing.
_SHEBANG_PROBE = "#!lua\nreturn 1"


def supports_shebang(client: redis.Redis) -> bool:
    """Whether the server reads ``#!lua`` script flags (Redis 7.0+), asked with SCRIPT
    LOAD of a script that starts with one: it needs neither INFO nor EVAL (which runs
    any code), and a NOPERM still raises."""
    try:
        client.script_load(_SHEBANG_PROBE)
    except redis.exceptions.NoPermissionError:
        raise
    except redis.ResponseError:
        return False
    return True


def script_error(e: redis.ResponseError, name: str = "") -> Exception:
    """The engine's exception for a script's error reply (the reply itself if not ours);
    an EVALSHA refused by the user's ACL names the script ``name``."""
    text = str(e)
    if name and isinstance(e, redis.exceptions.NoPermissionError) and "'evalsha'" in text:
        return redis.exceptions.NoPermissionError(
            f"this user may not run EVALSHA of script {name} ({text})"
        )
    for code, cls in SCRIPT_ERRORS.items():
        at = text.find(code + " ")
        if at >= 0:
            # an operator reads a refusal (no code); an agent's lost lease keeps its code
            start = at if cls is LeaseLostError else at + len(code) + 1
            return cls(text[start:].split(" script:")[0].strip())
    return e


@dataclass
class Call(Generic[T]):
    """One script call, ready to run: its name, KEYS, ARGV and how to read its reply."""

    name: str
    keys: list[Any]
    args: list[Any]
    decode: Callable[[Any], T]


class Scripts:
    """The engine's scripts, each registered on one Redis client at its first use.

    With ``wait_replicas`` above 0 every call and batch is followed by ``WAIT
    wait_replicas wait_timeout_ms`` on its own connection (:mod:`.durable`), and fewer
    acknowledgements raise :class:`NotReplicatedError` once every reply is in.
    """

    def __init__(
        self, client: redis.Redis, wait_replicas: int = 0, wait_timeout_ms: int = 1000
    ) -> None:
        self.client = client
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = wait_timeout_ms
        self._registered: dict[str, Any] = {}
        self._flavour: tuple[bool, bool] | None = None  # (shebang, sharded), asked once

    def _script(self, name: str) -> Any:
        """Script ``name`` registered on the client, built at its first use: the server's
        version picks the source, a handle that only reads never runs a script (nor
        needs the permission to), and an agent builds only the scripts it runs."""
        script = self._registered.get(name)
        if script is None:
            if self._flavour is None:
                shebang = supports_shebang(self.client)
                self._flavour = shebang, shebang and is_cluster(self.client)  # SPUBLISH
            source = script_source(name, *self._flavour)
            script = self._registered[name] = self.client.register_script(source)
        return script

    def sha(self, name: str) -> str:
        return str(self._script(name).sha)

    def run(self, call: Call[T], short: list[NotReplicatedError] | None = None) -> T:
        """Run one call (EVALSHA, loading the script if the server lacks it).

        With ``short`` (a list), a :class:`NotReplicatedError` is appended to it and the
        reply returned, for a caller that goes on with further calls and raises after."""
        if self.wait_replicas:
            batch = self.batch()
            batch.add(call)
            try:
                reply = batch.execute()[0]
            except NotReplicatedError as e:
                if short is None:
                    raise
                short.append(e)
                reply = e.results[0]
            if isinstance(reply, Exception):
                raise reply
            return reply  # type: ignore[no-any-return]
        try:
            reply = self._script(call.name)(keys=call.keys, args=call.args)
        except redis.ResponseError as e:
            raise script_error(e, call.name) from None
        return call.decode(reply)

    def batch(self) -> ScriptBatch:
        """A round trip of several script calls (see :class:`ScriptBatch`)."""
        return ScriptBatch(self)

    def load_all(self) -> None:
        """Load every script into the server (after a restart or SCRIPT FLUSH): those
        not run here yet too, so no other client meets NOSCRIPT on its first call."""
        for name in SCRIPT_NAMES:
            self.client.script_load(self._script(name).script)


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
        self.calls: list[Call[Any]] = []
        self.side: list[Call[Any]] = []

    def add(self, call: Call[Any]) -> None:
        """Queue a call."""
        self.calls.append(call)

    def add_side(self, call: Call[Any]) -> None:
        """Queue a call sent ahead of every :meth:`add`-ed one, whose reply :meth:`execute`
        leaves out (an agent's task logs, ahead of the outcomes they go with)."""
        self.side.append(call)

    def __len__(self) -> int:
        return len(self.calls)

    def _send(self, calls: list[Call[Any]], short: set[int]) -> list[Any]:
        """Send ``calls``; with ``wait_replicas``, WAIT after them and add to ``short``
        the indexes of those that ran with fewer acknowledgements than asked."""
        scripts = self.scripts
        if scripts.wait_replicas:
            commands = [
                (c.keys[0], ("EVALSHA", scripts.sha(c.name), len(c.keys), *c.keys, *c.args))
                for c in calls
            ]
            replies, fell = send_waited(
                scripts.client, commands, scripts.wait_replicas, scripts.wait_timeout_ms
            )
            short.update(fell)
            return replies
        pipe = scripts.client.pipeline(transaction=False)
        for c in calls:
            pipe.execute_command(  # type: ignore[no-untyped-call]
                "EVALSHA", scripts.sha(c.name), len(c.keys), *c.keys, *c.args
            )
        try:
            return list(pipe.execute(raise_on_error=False))
        except (redis.ConnectionError, redis.TimeoutError):
            if is_cluster(scripts.client):
                refresh_slots(scripts.client)
            raise

    def execute(self) -> list[Any]:
        """Send every call; decoded replies in order, errors as exception objects (the
        engine's own for script refusals). With ``wait_replicas``, calls that ran without
        enough replicas' acknowledgements raise :class:`NotReplicatedError` carrying
        every reply (``results``) and which fell short (``unconfirmed``)."""
        short: set[int] = set()
        side = len(self.side)
        if side:  # sent first; their replies are left out
            self.calls[:0], self.side = self.side, []
        replies = self._send(self.calls, short)
        missing = [k for k, r in enumerate(replies) if isinstance(r, NoScriptError)]
        if missing:
            self.scripts.load_all()
            again_short: set[int] = set()
            again = self._send([self.calls[k] for k in missing], again_short)
            for j, (k, reply) in enumerate(zip(missing, again, strict=True)):
                replies[k] = reply
                if j in again_short:
                    short.add(k)
        out: list[Any] = []
        for call, reply in zip(self.calls, replies, strict=True):
            if isinstance(reply, redis.ResponseError):
                out.append(script_error(reply, call.name))
            elif isinstance(reply, Exception):
                out.append(reply)
            else:
                out.append(call.decode(reply))
        if side:
            del self.calls[:side], out[:side]
            short = {k - side for k in short if k >= side}
        if short:
            raise NotReplicatedError(
                f"{len(short)} of {len(self.calls)} write(s) were made on the master but "
                f"acknowledged by fewer than {self.scripts.wait_replicas} replica(s) within "
                f"{self.scripts.wait_timeout_ms} ms: a failover now could lose them",
                out,
                sorted(short),
            )
        return out
