"""Task logs and progress: what a handler writes while it runs, kept per attempt.

Inside a task, Python ``logging`` records (through a handler on the root logger),
``print`` and anything else written to ``sys.stdout`` / ``sys.stderr`` (through proxies
that route by context), and an ``--exec`` command's stderr go to the attempt's
:class:`Capture`. The current attempt is a :class:`contextvars.ContextVar`, so thread-pool
and async handlers running side by side each keep their own lines. Each attempt keeps at
most :data:`MAX_LINES` lines and :data:`MAX_BYTES` bytes (a last line says how many more
were dropped); every shard keeps at most its share of a deployment-wide budget.

An agent sends an attempt's lines in the same round trip as its outcome (nothing at all
for a task that wrote nothing); a task still running has them sent about every
:data:`FLUSH_S` seconds by a thread of the agent's own, with its progress
(:meth:`engine.runtime.handlers.Task.progress`, at most one write per :data:`PROGRESS_S`). They
live beside the workflow (``P:w:<wid>:log``, ``P:w:<wid>:p``) and go with it.

Reading: :func:`read_logs`, :func:`follow_logs`, :func:`read_progress`.
"""

from __future__ import annotations

import contextvars
import io
import json
import logging
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from engine.errors import NotFoundError, no_such_task
from engine.runtime.rollups import Rollups

if TYPE_CHECKING:
    from engine.core.task import Task
    from engine.runtime.deployment import Deployment
    from engine.store.logs import LogEntry, StreamEntry
    from engine.store.scripts import ScriptBatch

MAX_LINES = 1000  # lines kept per attempt
MAX_BYTES = 64 * 1024  # bytes of text kept per attempt
MAX_LINE = 4096  # a longer line is cut to this many characters
BUDGET = 256 * 1024 * 1024  # bytes of task logs a deployment keeps (its shards share it)
FLUSH_S = 1.0  # how often a running task's new lines (and progress) are sent
PROGRESS_S = 1.0  # at most one progress write per task this often
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"
_clock = time.perf_counter  # run times (history): a monotonic clock

# The task running in this context (None: outside a task). Its `_log` is the TaskLogs
# of the agent running it until it first writes, then its Capture, made then.
_current: contextvars.ContextVar[Task | None] = contextvars.ContextVar(
    "redisflow_task_log", default=None
)


def capture_of(task: Task) -> Capture | None:
    """The capture of ``task``'s attempt, made at its first write (``None``: the task
    is not running under an agent)."""
    log = task._log
    if log is None or isinstance(log, Capture):
        return log
    with _LOCK:  # a thread of the handler's may write first too
        if not isinstance(task._log, Capture):
            task._log = Capture(task, log._running)
        return task._log


def current() -> Capture | None:
    """The capture of the attempt running in this context (``None``: outside a task)."""
    task = _current.get()
    return None if task is None else capture_of(task)


_LOCK = threading.Lock()  # every capture's lines (written rarely, by few at once)


class Capture:
    """What one attempt wrote and has not been sent yet, under its caps. Made for every
    attempt, so it costs next to nothing until the handler writes."""

    __slots__ = (
        "task", "ended", "dirty", "_live", "_lines", "_partial", "lines", "bytes",
        "dropped", "_progress", "_progress_at",
    )  # fmt: skip

    def capture_of(self, task: Task) -> Capture:
        """Itself: the capture a task's progress writes to once it has written."""
        return self

    def __init__(self, task: Task, live: dict[int, Capture] | None = None) -> None:
        self.task = task
        self.ended = self.dirty = False
        self._live = live  # where a capture that has lines to send is found while it runs

    def _open(self) -> None:
        """The first write: the buffers and counters (under the lock)."""
        if not self.dirty:
            self._lines: list[list[Any]] = []
            self._partial: dict[str, str] = {}
            self.lines = self.bytes = self.dropped = 0
            self._progress = ""
            self._progress_at = -PROGRESS_S
            self.dirty = True
            if self._live is not None and not self.ended:
                self._live[id(self)] = self

    def write(self, source: str, text: str) -> None:
        """Add ``text`` (any number of lines; a last part without a newline waits for
        the rest of its line) from ``source`` (``log``, ``stdout``, ``stderr``)."""
        with _LOCK:
            self._open()
            text = self._partial.pop(source, "") + text
            parts = text.split("\n")
            if parts[-1]:
                # a line is kept cut to MAX_LINE: a handler writing without a newline
                # grows nothing past that (one character more keeps a trailing \r apart)
                self._partial[source] = parts[-1][: MAX_LINE + 1]
            for line in parts[:-1]:
                self._add(source, line)

    def _add(self, source: str, line: str) -> None:
        line = line.rstrip("\r")[:MAX_LINE]
        size = len(line.encode("utf-8", "replace"))
        if self.lines >= MAX_LINES or self.bytes + size > MAX_BYTES:
            self.dropped += 1
            return
        self.lines += 1
        self.bytes += size
        self._lines.append([round(time.time(), 3), source, line])

    def progress(self, fraction: float, message: str) -> None:
        """Record the attempt's progress; kept at most once per :data:`PROGRESS_S` (the
        last one always)."""
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"progress {fraction!r}: expected a fraction from 0 to 1")
        text = json.dumps(
            {"f": round(fraction, 4), "m": str(message)[:200], "a": self.task.attempt,
             "t": round(time.time(), 3)},
            separators=(",", ":"),
        )  # fmt: skip
        with _LOCK:
            self._open()
            self._progress = text

    def pending(self) -> bool:
        return self.dirty and bool(self._lines or self._progress)

    def take(self, final: bool = False) -> LogEntry | None:
        """The lines and progress not sent yet, as one entry (``None``: nothing). With
        ``final`` (the attempt ended) a cut last line and the count of dropped lines
        are added."""
        if not self.dirty:
            return None
        with _LOCK:
            if final:
                for source, rest in self._partial.items():
                    self._add(source, rest)
                self._partial.clear()
                if self.dropped:
                    self._lines.append(
                        [round(time.time(), 3), "log",
                         f"... {self.dropped} more line(s) dropped: an attempt keeps "
                         f"{MAX_LINES} lines, {MAX_BYTES} bytes"]
                    )  # fmt: skip
                    self.dropped = 0
            now = time.monotonic()
            prog = ""
            if self._progress and (final or now - self._progress_at >= PROGRESS_S):
                prog, self._progress, self._progress_at = self._progress, "", now
            if not self._lines and not prog:
                return None
            lines = json.dumps(self._lines, separators=(",", ":")) if self._lines else ""
            self._lines = []
        t = self.task
        return (t.workflow_id, t.key, t.attempt, t.name, lines, prog)


class _Router(io.TextIOBase):
    """``sys.stdout`` / ``sys.stderr`` while agents run: inside a task, what is written
    goes to its log; elsewhere to the stream it replaced."""

    def __init__(self, source: str, stream: TextIO) -> None:
        self.source = source
        self.stream = stream

    def write(self, text: str) -> int:
        cap = current()
        if cap is None:
            return self.stream.write(text)
        cap.write(self.source, text)
        return len(text)

    def flush(self) -> None:
        if _current.get() is None:
            self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", "utf-8")


class _LogHandler(logging.Handler):
    """On the root logger while agents run: a record logged inside a task goes to its
    log. Outside tasks, when nothing else handles records, Python's last resort does."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.setFormatter(logging.Formatter(LOG_FORMAT))

    def emit(self, record: logging.LogRecord) -> None:
        cap = current()
        if cap is not None:
            try:
                cap.write("log", self.format(record) + "\n")
            except Exception:  # noqa: BLE001 - logging must never fail the task
                self.handleError(record)
            return
        root = logging.getLogger()
        last = logging.lastResort
        if last is not None and root.handlers == [self] and record.levelno >= last.level:
            last.handle(record)


_install_lock = threading.Lock()
_installed = 0
_handler: _LogHandler | None = None
_restore: list[tuple[logging.Logger | logging.Handler, int]] = []  # levels install changed


def install(level: int | None = logging.INFO) -> None:
    """Route logging and standard streams by task (once per process; counted). With
    ``level`` below the root logger's, the root logger is lowered to it for tasks'
    records while its other handlers keep the level they printed at."""
    global _installed, _handler
    with _install_lock:
        _installed += 1
        if _installed > 1:
            return
        _handler = _LogHandler()
        root = logging.getLogger()
        if level is not None and root.level > level:
            for h in root.handlers:
                if h.level == logging.NOTSET:
                    _restore.append((h, h.level))
                    h.setLevel(root.level)
            _restore.append((root, root.level))
            root.setLevel(level)
        root.addHandler(_handler)
        if not isinstance(sys.stdout, _Router):
            sys.stdout = _Router("stdout", sys.stdout)
        if not isinstance(sys.stderr, _Router):
            sys.stderr = _Router("stderr", sys.stderr)


def uninstall() -> None:
    """Undo :func:`install` once the last agent of the process stops."""
    global _installed, _handler
    with _install_lock:
        _installed -= 1
        if _installed > 0:
            return
        if _handler is not None:
            logging.getLogger().removeHandler(_handler)
            _handler = None
        for what, old in _restore:
            what.setLevel(old)
        _restore.clear()
        if isinstance(sys.stdout, _Router):
            sys.stdout = sys.stdout.stream
        if isinstance(sys.stderr, _Router):
            sys.stderr = sys.stderr.stream


class TaskLogs:
    """An agent's side: a capture per running attempt, their lines sent with outcomes
    (:meth:`queue`) or every :data:`FLUSH_S` while they run (:meth:`ship`, from a thread
    of its own), and the history of its tasks' run times
    (:class:`~engine.runtime.rollups.Rollups`)."""

    def capture_of(self, task: Task) -> Capture:
        """The capture of ``task``'s attempt (made at its first write): what
        :meth:`Task.progress <engine.core.task.Task.progress>` writes to."""
        cap = capture_of(task)
        assert cap is not None  # the task's _log is this TaskLogs or its capture
        return cap

    def __init__(self, engine: Deployment, budget: int = BUDGET) -> None:
        self.engine = engine
        self.store = engine.store
        shards = engine.keys.shards
        self.budget = budget // shards if budget > 0 else 0
        self._running: dict[int, Capture] = {}
        self._done: list[LogEntry] = []
        self._send_lock = threading.Lock()  # a running task's lines go out in order
        self.rollups = Rollups()
        self._sample = self.rollups.sample
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def begin(self, task: Task) -> tuple[contextvars.Token[Task | None], Task, float]:
        """The attempt starts here: what it writes in this context is its own (a capture
        is made at its first write: nothing for a task that writes nothing). A hot path:
        once per attempt, a task that writes nothing costs a few attribute writes."""
        task._log = self
        return _current.set(task), task, _clock()

    def end(self, mark: tuple[contextvars.Token[Task | None], Task, float], ok: bool) -> None:
        """The attempt ended (``ok``: succeeded): its lines wait for its outcome's report."""
        token, task, began = mark
        _current.reset(token)
        self._sample((task.type, ok, _clock() - began, -1, task._waited_ms))
        cap = task._log
        task._log = None  # no cycle: the capture goes when its last reference does
        if cap.__class__ is Capture:
            cap.ended = True
            self._running.pop(id(cap), None)
            entry = cap.take(final=True)
            if entry is not None:
                self._done.append(entry)

    def queue(self, pipe: ScriptBatch) -> None:
        """Put the ended attempts' lines in ``pipe``, ahead of their outcomes (no call
        when there are none)."""
        if not self._done:
            return
        with self._send_lock:
            done, self._done = self._done, []
        for shard, entries in self._by_shard(done).items():
            pipe.add_side(
                self.store.logs.tasklog_call(self.engine.keys.shard(shard), entries, self.budget)
            )

    def _by_shard(self, entries: list[LogEntry]) -> dict[int, list[LogEntry]]:
        keys = self.engine.keys
        if keys.shards == 1:
            return {0: entries}
        by: dict[int, list[LogEntry]] = {}
        for e in entries:
            by.setdefault(keys.shard_of(e[0]).shard, []).append(e)
        return by

    def ship(self, force: bool = False) -> None:
        """Send running attempts' new lines and progress, and the history when due (or
        ``force``), in one round trip."""
        with self._send_lock:
            entries = [
                e
                for cap in list(self._running.values())
                if not cap.ended and cap.pending()
                for e in [cap.take()]
                if e is not None
            ]
            minutes = self.rollups.take(force)
            if not entries and not minutes:
                return
            pipe, logs = self.store.scripts.batch(), self.store.logs
            for shard, group in self._by_shard(entries).items():
                pipe.add(logs.tasklog_call(self.engine.keys.shard(shard), group, self.budget))
            if minutes:
                pipe.add(logs.rollup_call(minutes))
            try:
                pipe.execute()
            except Exception as e:  # noqa: BLE001 - logs and history are best effort
                logging.getLogger("redisflow.agent").debug("task logs not sent: %s", e)

    def start(self) -> None:
        """Route output by task, and start the thread that sends running tasks' lines."""
        install()
        self._thread = threading.Thread(target=self._run, name="rf-tasklogs", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(FLUSH_S):
            self.ship()

    def close(self) -> None:
        """Stop the thread, send what is left, and give the process's streams back."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
            self.ship(force=True)
            uninstall()


# -- reading --------------------------------------------------------------------------


@dataclass
class LogLine:
    """One line a task's handler wrote."""

    task: str  # the task's name
    key: str  # its key in the workflow: "3", or "3.17" for an item of a map
    attempt: int
    ts: float  # epoch seconds
    source: str  # log, stdout or stderr
    text: str
    id: str = ""  # the stream entry it came in (a cursor for reading on)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _lines(entries: list[StreamEntry], task: str | None) -> list[LogLine]:
    out: list[LogLine] = []
    for entry_id, f in entries:
        name, key = f.get("n", ""), f.get("k", "")
        if task is not None and task not in (name, key, key.split(".")[0]):
            continue
        for ts, source, text in json.loads(f.get("x") or "[]"):
            out.append(LogLine(name, key, int(f.get("a", 0)), ts, source, text, entry_id))
    return out


def _task_filter(engine: Deployment, wid: str, task: str | None) -> str | None:
    """``task`` as the filter matches it: a name or index of the workflow's tasks."""
    if task is None:
        return None
    names = engine.store.reads.task_names(wid)
    if task in names:
        return task
    if task.isdigit() and int(task) < len(names):
        return task
    raise no_such_task(wid, task, names)


def read_logs(
    engine: Deployment, wid: str | int, task: str | None = None, after: str = "-", limit: int = 1000
) -> tuple[list[LogLine], str]:
    """Lines of workflow ``wid``'s tasks (``task``: one task's, by name or index; a map's
    items with it) after cursor ``after``, from at most ``limit`` stream entries; and the
    cursor to read on from. Raises :class:`~engine.NotFoundError` for a workflow that does
    not exist."""
    wid = str(wid)
    engine.store.reads.state(wid)  # NotFoundError for none
    want = _task_filter(engine, wid, task)
    entries = engine.store.logs.log_entries(wid, after, limit)
    cursor = entries[-1][0] if entries else (after if after not in ("", "0") else "-")
    return _lines(entries, want), cursor


def follow_logs(
    engine: Deployment,
    wid: str | int,
    task: str | None = None,
    after: str = "-",
    poll_s: float = 1.0,
) -> Iterator[LogLine]:
    """Every line of workflow ``wid``'s tasks, then each new one as it comes, until the
    workflow has finished and its last lines are read (or it is removed)."""
    wid = str(wid)
    want = _task_filter(engine, wid, task)
    cursor = "0" if after in ("-", "") else after
    block = max(1, int(poll_s * 1000))
    while True:
        try:
            finished = engine.store.reads.state(wid).finished
        except NotFoundError:
            return
        entries = engine.store.logs.log_entries(wid, cursor if cursor != "0" else "-")
        if not entries and not finished:
            entries = engine.store.logs.wait_log_entries(wid, cursor, block)
        if entries:
            cursor = entries[-1][0]
            yield from _lines(entries, want)
        elif finished:  # outcomes come after their lines: nothing more will come
            return


def read_progress(engine: Deployment, wid: str | int) -> dict[str, dict[str, Any]]:
    """Task key -> its latest progress: ``{"fraction", "message", "attempt", "ts"}``."""
    out: dict[str, dict[str, Any]] = {}
    for key, raw in engine.store.logs.progress_of(wid).items():
        try:
            p = json.loads(raw)
        except ValueError:
            continue
        out[key] = {"fraction": p.get("f"), "message": p.get("m", ""), "attempt": p.get("a"),
                    "ts": p.get("t")}  # fmt: skip
    return out
