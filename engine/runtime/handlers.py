"""Task handlers: what an agent runs for a task, as a Python callable or a command."""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import IO, Any

# the Task value lives at the bottom (every layer uses it); named here too, its home before
from engine.core.task import Handler as Handler
from engine.core.task import Task as Task
from engine.core.task import TaskFailed as TaskFailed
from engine.errors import DefinitionError


def is_async(handler: Handler) -> bool:
    """True for an ``async def`` handler (also behind ``functools.partial`` or as an
    object whose ``__call__`` is ``async def``)."""
    while isinstance(handler, functools.partial):
        handler = handler.func
    if inspect.iscoroutinefunction(handler):
        return True
    call = getattr(handler, "__call__", None)  # noqa: B004 - the method, not callable()
    return inspect.iscoroutinefunction(call)


async def awaited(value: Awaitable[Any], timeout: float | None = None) -> Any:
    """Await any awaitable (``asyncio.run`` takes coroutines only), for at most
    ``timeout`` seconds (then :class:`TaskFailed`)."""
    try:
        return await asyncio.wait_for(value, timeout)
    except TimeoutError:
        raise TaskFailed(f"timed out after {timeout:g}s") from None


class EventLoop:
    """One asyncio event loop on a thread of its own, where async handlers run
    concurrently with each other."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        # The loop keeps weak references to its tasks only: a running one must be held.
        self._running: set[asyncio.Future[Any]] = set()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def start_all(self, coroutines: Iterable[Awaitable[Any]]) -> None:
        """Start every coroutine on the loop, in one wake-up of its thread (its outcomes
        are the coroutines' business)."""
        batch = list(coroutines)
        self.loop.call_soon_threadsafe(self._spawn, batch)

    def _spawn(self, coroutines: list[Awaitable[Any]]) -> None:
        for c in coroutines:
            future = asyncio.ensure_future(c, loop=self.loop)
            self._running.add(future)
            future.add_done_callback(self._running.discard)

    def close(self) -> None:
        """Stop the loop (once nothing runs on it any more) and end its thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


def import_handler(spec: str) -> Handler:
    """Load ``module:function`` (the current directory is importable)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise DefinitionError(f"--handler {spec!r}: expected module:function")
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise DefinitionError(f"--handler {spec!r}: cannot import {module_name!r} ({e})") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise DefinitionError(f"--handler {spec!r}: {module_name} has no callable {attr!r}")
    return fn  # type: ignore[no-any-return]


# How often a running --exec child's task is checked for ``cancelled``, and how long a
# child told to stop (SIGTERM) has before it is killed.
EXEC_POLL_S = 0.2
EXEC_GRACE_S = 5.0
# How much of an --exec command's stderr is kept (its head): the attempt's error and log
# line keep no more. The rest is read as it comes and counted, never held.
EXEC_STDERR_KEEP = 63 * 1024  # with the note of what was dropped, under the 64 KiB an error keeps
_READ_CHUNK = 64 * 1024


class _Head:
    """What is kept of one of a child's output streams, read as it comes: its first
    ``cap`` bytes, and a count of the bytes past them (read and dropped). With
    ``stop_over``, reading ends at the first byte past ``cap`` (:attr:`over` is set)."""

    def __init__(self, cap: int, stop_over: bool = False) -> None:
        self.cap = cap
        self.stop_over = stop_over
        self.chunks: list[bytes] = []
        self.held = 0
        self.dropped = 0
        self.over = False

    def take(self, chunk: bytes) -> bool:
        """Keep what fits of ``chunk``; False once reading should end."""
        room = self.cap - self.held  # never negative
        if len(chunk) <= room:
            self.chunks.append(chunk)
            self.held += len(chunk)
            return True
        if room:
            self.chunks.append(chunk[:room])
            self.held = self.cap
        self.dropped += len(chunk) - room
        self.over = True
        return not self.stop_over

    def read(self, stream: IO[bytes]) -> None:
        """Read ``stream`` to its end (or past the cap, with ``stop_over``), then close it."""
        with stream:
            read = getattr(stream, "read1", stream.read)
            while chunk := read(_READ_CHUNK):
                if not self.take(chunk):
                    return

    def data(self) -> bytes:
        return b"".join(self.chunks)


def _feed(stream: IO[bytes], data: bytes) -> None:
    """Write the task to the child's stdin and close it (a child that exits without
    reading it all is no error)."""
    try:
        with stream:
            stream.write(data)
    except (BrokenPipeError, OSError):
        pass


def _stop_child(proc: subprocess.Popen[bytes], readers: list[threading.Thread], term: bool) -> None:
    """End ``proc`` (SIGTERM first with ``term``, SIGKILL after :data:`EXEC_GRACE_S`) and
    give its readers a moment to see the pipes close (a grandchild holding them open is
    left to them: they are daemon threads)."""
    if term:
        proc.terminate()
        try:
            proc.wait(EXEC_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
    else:
        proc.kill()
    proc.wait()
    for t in readers:
        t.join(EXEC_GRACE_S)


def _run_child(
    proc: subprocess.Popen[bytes],
    data: bytes,
    limit: float | None,
    cancelled: threading.Event,
    command: str,
    max_output: int,
) -> tuple[int, _Head, _Head]:
    """Feed ``data`` to ``proc`` and read its stdout and stderr as they come (threads),
    killing it past ``limit`` seconds or once its stdout passes ``max_output`` bytes;
    when ``cancelled`` is set (the attempt was taken from this agent, or timed out) it
    gets SIGTERM, then SIGKILL after :data:`EXEC_GRACE_S`. Returns its exit code and
    what was kept of stdout (all of it) and stderr (the head)."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out, err = _Head(max_output, stop_over=True), _Head(EXEC_STDERR_KEEP)
    threads = [
        threading.Thread(target=out.read, args=(proc.stdout,), name="rf-exec-out", daemon=True),
        threading.Thread(target=err.read, args=(proc.stderr,), name="rf-exec-err", daemon=True),
        threading.Thread(target=_feed, args=(proc.stdin, data), name="rf-exec-in", daemon=True),
    ]
    for t in threads:
        t.start()
    readers = threads[:2]
    deadline = None if limit is None else time.monotonic() + limit
    while True:
        step = EXEC_POLL_S
        if deadline is not None:
            step = max(0.0, min(step, deadline - time.monotonic()))
        if _settled(proc, readers, step):
            if not out.over:
                return proc.returncode, out, err
        if out.over:
            _stop_child(proc, readers, term=False)
            raise TaskFailed(
                f"command's output passed the {max_output}-byte limit (--max-payload); "
                f"it was stopped: {command}"
            )
        if deadline is not None and time.monotonic() >= deadline:
            _stop_child(proc, readers, term=False)
            raise TaskFailed(f"command timed out after {limit:g}s: {command}")
        if cancelled.is_set():
            _stop_child(proc, readers, term=True)
            raise TaskFailed(f"command stopped: its attempt was cancelled: {command}")


def _settled(proc: subprocess.Popen[bytes], readers: list[threading.Thread], step: float) -> bool:
    """Wait up to about ``step`` seconds for each stage: stdout read to its end (or past
    its cap), stderr read, the child ended. True once all are."""
    for t in readers:
        t.join(step)
        if t.is_alive():
            return False
    try:
        proc.wait(step)
    except subprocess.TimeoutExpired:
        return False
    return True


# What an --exec command's environment keeps of the agent's by default: no credentials
# (REDISFLOW_URL, HTTP tokens, webhook secrets, a cloud provider's keys...). A trailing *
# matches any rest of the name.
EXEC_ENV = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "LC_*", "TZ",
    "TMPDIR", "TEMP", "TMP", "PYTHON*", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "SSL_CERT_FILE",
    "SSL_CERT_DIR", "SYSTEMROOT",
)  # fmt: skip
EXEC_ENV_VAR = "REDISFLOW_EXEC_ENV"  # more names for it, separated by commas or spaces
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\*?|\*")


def exec_env_names(text: str) -> list[str]:
    """The names (or ``NAME*`` patterns) listed in ``text``: commas or spaces between."""
    names = [n for n in re.split(r"[\s,]+", text) if n]
    for name in names:
        if not _ENV_NAME.fullmatch(name):
            raise DefinitionError(
                f"--exec-env {name!r}: expected an environment variable's name, or a "
                "prefix ending in * (as LC_*)"
            )
    return names


def exec_environment(
    extra: Iterable[str] = (), source: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment an ``--exec`` command gets: the variables of ``source`` (default:
    this process's) that :data:`EXEC_ENV` or ``extra`` name (a name, or a prefix ending in
    ``*``). ``REDISFLOW_*`` variables pass only when named in full in ``extra``: a
    pattern, even ``*``, never passes them."""
    source = os.environ if source is None else source
    exact = {n for n in extra if not n.endswith("*")}
    prefixes = tuple(n[:-1] for n in (*EXEC_ENV, *extra) if n.endswith("*"))
    exact.update(n for n in EXEC_ENV if not n.endswith("*"))
    return {
        name: value
        for name, value in source.items()
        if name in exact or (name.startswith(prefixes) and not name.startswith("REDISFLOW_"))
    }


def exec_handler(
    command: str,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    exit_codes: Mapping[int, str] | None = None,
    max_output: int | None = None,
) -> Handler:
    """A handler that runs ``command`` (no shell) once per task.

    The task (payload, parents' outputs, ids) goes to the command's stdin as JSON; its
    stdout is the output (parsed as JSON when it is JSON, else kept as text); a non-zero
    exit fails the attempt with stderr as the error. A command running past the task's
    ``timeout`` (``timeout`` here when the task has none) is killed; one whose attempt is
    cancelled (its agent lost the lease: the task was handed on) gets SIGTERM, then
    SIGKILL after :data:`EXEC_GRACE_S`.

    Output is read as it comes, never held whole: stdout up to ``max_output`` bytes
    (default :data:`engine.spec.definition.DEFAULT_MAX_PAYLOAD`; ``redisflow-agent`` gives
    its ``--max-payload``): a command writing more is killed and its attempt fails,
    saying so. Of stderr the first :data:`EXEC_STDERR_KEEP` bytes are kept (the error, the
    task's log) and the rest counted.

    The command's environment is ``env``; by default :func:`exec_environment`'s, which
    leaves out the agent's credentials (``REDISFLOW_URL`` and the like).

    Error kinds (:mod:`engine.core.outcomes`): an exit code of ``exit_codes`` (default
    :data:`engine.core.outcomes.EXIT_CODES`: 100 non-retryable, 101 abort, 102 skip), or a
    last stdout line ``{"error": {"kind": ..., "message": ...}}`` on a non-zero exit.
    """
    from engine.core.outcomes import EXIT_CODES, exec_error

    codes = dict(EXIT_CODES if exit_codes is None else exit_codes)
    argv = shlex.split(command)
    if not argv:
        raise DefinitionError("--exec: empty command")
    child_env = dict(exec_environment() if env is None else env)
    from engine.spec.definition import DEFAULT_MAX_PAYLOAD

    cap = DEFAULT_MAX_PAYLOAD if max_output is None else max_output

    def run(task: Task) -> Any:
        limit = task.timeout if task.timeout is not None else timeout
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=child_env,
            )
        except FileNotFoundError:
            raise TaskFailed(f"command not found: {argv[0]}") from None
        code, out, err = _run_child(
            proc, json.dumps(task.to_dict()).encode(), limit, task.cancelled, command, cap
        )
        stdout = out.data()
        stderr = err.data().decode(errors="replace")
        if err.dropped:
            stderr += (
                f"\n... {err.dropped} more bytes of stderr not kept (the first "
                f"{EXEC_STDERR_KEEP} are)"
            )
        if stderr:
            from engine.runtime.tasklogs import current

            log = current()
            if log is not None:
                log.write("stderr", stderr)
        if code != 0:
            raise exec_error(
                code,
                stdout.decode(errors="replace"),
                stderr.strip() or f"{argv[0]} exited with code {code}",
                codes,
            )
        text = stdout.decode(errors="replace").strip()
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return text

    return run


def manager_message(task: Task) -> dict[str, Any]:
    """The message a steps manager (the ``workflows:`` / ``steps:`` / ``depends:`` format
    :mod:`engine.spec.loader` reads) sends a worker for ``task``, built as it builds it:
    a step with no parents gets the job's JSON (the run's input); a step with parents
    gets their outputs merged (those that are objects; the first parent listed in
    ``depends:`` wins a key). An item of a step with ``task:`` gets what its parent gave
    the step, less the list it runs over, with its element under the element key
    (``sections`` -> ``section``). The step after a ``task:`` step gets that step's
    output: its items' values under the element key listed under the ``itemListKey``,
    their other keys merged in."""
    info = task.payload if isinstance(task.payload, dict) else {}
    if not task.parents and task.item_index is None:
        return dict(task.input) if isinstance(task.input, dict) else {}
    message: dict[str, Any] = {}
    lists = info.get("itemLists") or {}  # runs pushed before the manager's gather
    for name, output in task.parents.items():
        if isinstance(output, dict):
            for key, value in output.items():
                message.setdefault(key, value)
        elif name in lists and lists[name] not in message:
            message[lists[name]] = output
    first = task.step is None or not info.get("depends")  # not a later step of an item
    if task.item_index is not None and info.get("item") and first:
        message.pop(str(info.get("itemListKey")), None)
        message[info["item"]] = task.item
    return message


ManagerWorker = Callable[[str, dict[str, Any]], Any]


def manager_handler(workers: ManagerWorker | Mapping[str, ManagerWorker]) -> Handler:
    """A handler running workers written for a steps manager, as they are: each is
    called as ``worker(correlation_id, message)`` and returns its reply (the task's
    output). ``workers`` is one worker, or one per queue (the task's type). The message
    is :func:`manager_message`'s; the correlation id is ``"<job>:<step>"``, the job being
    the run's id, or ``"<run>.<item>"`` for an item of a ``task:`` step (a job of its own
    in the manager), the step the sub-task's step for an item."""

    def run(task: Task) -> Any:
        worker = workers.get(task.type) if isinstance(workers, Mapping) else workers
        if worker is None:
            raise TaskFailed(f"no steps-manager worker for queue {task.type!r}")
        job = task.workflow_id
        node = task.name
        if task.item_index is not None:
            job = f"{job}.{task.item_index}"
            info = task.payload if isinstance(task.payload, dict) else {}
            steps = info.get("steps") or []
            if task.step is None and len(steps) == 1:
                node = str(steps[0])
        return worker(f"{job}:{node}", manager_message(task))

    return run


# Their earlier names, kept for code written against them.
seed002_message = manager_message
seed002_handler = manager_handler
Seed002Worker = ManagerWorker
