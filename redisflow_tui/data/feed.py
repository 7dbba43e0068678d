"""The live feed: one listener that turns pub/sub hints into coalesced changes.

:class:`Feed.run` runs in one background thread for the life of the console. It keeps
a :class:`engine.Watch` open (the event channel plus keyspace notifications),
folds every hint into a pending :class:`Changes`, and reports the connection's ups and
downs through a callback as :class:`Connected` / :class:`Lost` messages. The console
takes the pending changes with :meth:`Feed.drain` a few times a second, so a storm of
events costs a few reads and repaints, not one per event.

Hints are not the truth: pub/sub loses messages when Redis drops a slow subscriber, and
redis-py reconnects silently. Every (re)connect therefore sets ``Changes.resync`` and the
console re-reads everything it shows.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import redis

from engine import Engine, Event, EventBatch, Hint, KeyChange, Watch

EVENT_BUFFER = 500  # live events kept between two drains (the newest)
FINISHING_KINDS = frozenset({"task.succeeded", "task.failed"})


@dataclass
class Changes:
    """What changed since the last drain, coalesced.

    Attributes:
        resync: everything must be re-read (first connect, reconnect, lost messages).
        wids: workflows whose state, counts or tasks changed.
        pushed: how many workflows were pushed.
        cleaned: how many workflows were cleaned up.
        stats: the counters changed.
        agents: an agent came, went, or claimed work.
        events: the live events, oldest first (at most ``EVENT_BUFFER``).
        dropped: live events left out of ``events`` because the buffer was full.
        finished: tasks that finished (succeeded or failed) per epoch second.
    """

    resync: bool = False
    wids: set[str] = field(default_factory=set)
    pushed: int = 0
    cleaned: int = 0
    stats: bool = False
    agents: bool = False
    events: list[Event] = field(default_factory=list)
    dropped: int = 0
    finished: dict[int, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(
            self.resync
            or self.wids
            or self.pushed
            or self.cleaned
            or self.stats
            or self.agents
            or self.events
        )

    @property
    def workflows_changed(self) -> bool:
        """Whether any list of workflows may look different now."""
        return bool(self.resync or self.wids or self.pushed or self.cleaned)

    def add_event(self, event: Event) -> None:
        """Fold one lifecycle event in, and keep it for the event log."""
        if len(self.events) < EVENT_BUFFER:
            self.events.append(event)
        else:
            self.dropped += 1
        task = -1 if event.task is None else event.task
        self.add_brief(event.kind, event.wid, task, event.ts)

    def add_brief(self, kind: str, wid: str, task: int, ts: float) -> None:
        """Fold in what one event changed (without keeping the event itself)."""
        if kind.startswith("agent."):
            self.agents = True
            return
        self.stats = True
        if wid:  # a schedule's own event (put, paused, missed) names no workflow
            self.wids.add(wid)
        if task >= 0:
            if kind == "task.claimed":
                self.agents = True
            elif kind in FINISHING_KINDS:
                sec = int(ts)
                self.finished[sec] = self.finished.get(sec, 0) + 1
        elif kind == "workflow.pushed":
            self.pushed += 1
        elif kind == "workflow.cleaned":
            self.cleaned += 1

    def add_key(self, change: KeyChange) -> None:
        """Fold one keyspace notification in."""
        if change.kind == "stats":
            self.stats = True
        elif change.wid is not None:
            self.wids.add(change.wid)

    def merge(self, other: Changes) -> None:
        """Add ``other``'s changes to these (for changes not applied yet)."""
        self.resync = self.resync or other.resync
        self.wids |= other.wids
        self.pushed += other.pushed
        self.cleaned += other.cleaned
        self.stats = self.stats or other.stats
        self.agents = self.agents or other.agents
        room = EVENT_BUFFER - len(self.events)
        self.events.extend(other.events[:room])
        self.dropped += other.dropped + max(0, len(other.events) - room)
        for sec, n in other.finished.items():
            self.finished[sec] = self.finished.get(sec, 0) + n


@dataclass(frozen=True)
class Connected:
    """The feed is (again) connected; everything shown must be re-read.

    Attributes:
        keyspace: keyspace notifications are on (else the event channel alone).
        skew: the server's clock minus ours, in seconds.
        reconnect: this follows a loss of connection (or a silent reconnect).
    """

    keyspace: bool
    skew: float
    reconnect: bool


@dataclass(frozen=True)
class Lost:
    """Redis cannot be reached; the feed tries again in ``retry_in`` seconds."""

    error: str
    retry_in: float


FeedMessage = Connected | Lost
UNREACHABLE = (redis.ConnectionError, redis.TimeoutError, OSError)


class Feed:
    """Listens to one deployment and coalesces what it hears.

    Args:
        engine: the deployment.
        keyspace: use keyspace notifications too (when the server allows).
        poll_s: the longest a poll blocks (bounds how fast subscriptions change).
        ping_s: how often an otherwise quiet connection is checked.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        keyspace: bool = True,
        poll_s: float = 0.2,
        ping_s: float = 1.0,
    ) -> None:
        self.engine = engine
        self.use_keyspace = keyspace
        self.poll_s = poll_s
        self.ping_s = ping_s
        self.connected = False
        self.keyspace = False
        self._lock = threading.Lock()
        self._pending = Changes()
        self._recent: deque[EventBatch] = deque()  # newest batches, for the event log
        self._recent_events = 0
        self._watched: tuple[str, ...] = ()

    def watch_workflows(self, wids: Iterable[str]) -> None:
        """Ask for keyspace notifications of these workflows (applied by the feed thread)."""
        self._watched = tuple(sorted(set(wids)))

    def drain(self) -> Changes:
        """Take everything that changed since the last drain.

        Only the newest :data:`EVENT_BUFFER` events are decoded in full (the event log
        shows no more); the others are counted in ``dropped``.
        """
        with self._lock:
            out, self._pending = self._pending, Changes()
            recent, self._recent = self._recent, deque()
            self._recent_events = 0
        events: list[Event] = []
        for batch in recent:
            events.extend(batch.events())
        out.events = events[-EVENT_BUFFER:]
        out.dropped += len(events) - len(out.events)
        return out

    def absorb(self, hints: Iterable[Hint]) -> None:
        """Fold hints into the pending changes (the feed thread calls this)."""
        briefs: list[tuple[float, list[tuple[str, str, int]]]] = []
        batches: list[EventBatch] = []
        keys: list[KeyChange] = []
        for hint in hints:
            if isinstance(hint, EventBatch):
                briefs.append((hint.ts, list(hint.brief())))
                batches.append(hint)
            else:
                keys.append(hint)
        with self._lock:
            pending = self._pending
            for ts, items in briefs:
                for kind, wid, task in items:
                    pending.add_brief(kind, wid, task, ts)
            for key in keys:
                pending.add_key(key)
            for batch in batches:
                self._recent.append(batch)
                self._recent_events += len(batch)
                while self._recent and self._recent_events - len(self._recent[0]) >= EVENT_BUFFER:
                    old = self._recent.popleft()
                    self._recent_events -= len(old)
                    pending.dropped += len(old)

    def _mark_resync(self) -> None:
        with self._lock:
            self._pending.resync = True

    def run(
        self,
        stop: threading.Event,
        post: Callable[[FeedMessage], None],
        cancelled: Callable[[], bool] = lambda: False,
    ) -> None:
        """Listen until ``stop`` is set (or ``cancelled()``), reconnecting with backoff.

        Blocks; run it in a thread.
        """
        backoff = 0.25
        first = True

        def done() -> bool:
            return stop.is_set() or cancelled()

        while not done():
            watch: Watch | None = None
            try:
                watch = Watch(self.engine, keyspace=self.use_keyspace)
                skew = self.engine.server_time() - time.time()
                self.connected, self.keyspace = True, watch.keyspace
                self._mark_resync()
                post(Connected(watch.keyspace, skew, reconnect=not first))
                first = False
                backoff = 0.25
                self._listen(watch, done, post)
            except UNREACHABLE as e:
                if self.connected or first:
                    self.connected = False
                    first = False
                post(Lost(_short(e), backoff))
                until = time.monotonic() + backoff
                while not done() and time.monotonic() < until:
                    stop.wait(0.1)
                backoff = min(backoff * 2, 4.0)
            finally:
                if watch is not None:
                    watch.close()

    def _listen(
        self, watch: Watch, done: Callable[[], bool], post: Callable[[FeedMessage], None]
    ) -> None:
        applied: tuple[str, ...] = ()
        connects = watch.connects
        next_ping = time.monotonic() + self.ping_s
        while not done():
            wanted = self._watched
            if wanted != applied:
                watch.watch_workflows(wanted)
                applied = wanted
            hints = watch.poll(timeout=self.poll_s)
            if hints:
                self.absorb(hints)
            if watch.connects != connects:
                # redis-py reconnected under us: messages may be lost in between
                connects = watch.connects
                self._mark_resync()
                post(Connected(watch.keyspace, self.engine.server_time() - time.time(), True))
            if time.monotonic() >= next_ping:
                self.engine.server_time()
                next_ping = time.monotonic() + self.ping_s


def _short(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return text.splitlines()[0][:160]
