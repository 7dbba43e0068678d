"""The lifecycle log the Events screen shows: history from the stream, then live."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from engine import Event

CAPACITY = 2000


def event_key(e: Event) -> tuple[str, str, int, float]:
    """What identifies an event whether it came from the stream or from pub/sub."""
    return (e.kind, e.wid, -1 if e.task is None else e.task, round(e.ts, 3))


def detail(e: Event) -> str:
    """The event's extra data as short text."""
    d = e.data
    if not d:
        return ""
    if "error" in d:
        return str(d["error"]).splitlines()[-1][:120] if d["error"] else ""
    if "failures" in d:
        return f"failure {d['failures']}, retry in {d.get('delay_ms', 0) / 1000:.1f}s"
    if "attempt" in d:
        return f"attempt {d['attempt']} from {d.get('agent', '?')} rejected"
    if "signal" in d:  # workflow.signal: name, outcome, the task it reached, who sent it
        to = f" → {d['task']}" if d.get("task") else ""
        who = f" (as {d['identity']})" if d.get("identity") not in (None, d.get("by")) else ""
        return f"{d['signal']} {d['outcome']}{to} by {d.get('by', '?')}{who}"
    if "agent" in d:
        return str(d["agent"])
    if "name" in d:
        return str(d["name"])
    if "count" in d:
        return f"{d['count']} task(s)"
    if d.get("parent") is not None:  # upstream_failed / skipped: decided by that parent's end
        return f"decided when task #{d['parent']} ended"
    return ""


TASK_WIDTH = 24  # the task column of the event log: "#3 import-csv"


def task_label(e: Event) -> str:
    """``#3 import-csv`` (the name once known), fitted to the task column."""
    if e.task is None:
        return ""
    label = f"#{e.task} {e.task_name}" if e.task_name else f"#{e.task}"
    return label if len(label) < TASK_WIDTH else label[: TASK_WIDTH - 2] + "…"


def haystack(e: Event) -> str:
    """Lower-case text a filter matches against."""
    return f"{e.kind} {e.wid} {task_label(e)} {e.task_name or ''} {detail(e)}".lower()


class EventLog:
    """The most recent events, newest first, with a freeze and a text filter."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self._events: deque[Event] = deque(maxlen=capacity)
        self.frozen = False
        self._view: list[Event] | None = None  # what a frozen log shows
        self.missed = 0  # events that arrived while frozen
        self.dropped = 0  # events the live feed could not keep up with
        self.version = 0

    def __len__(self) -> int:
        return len(self._events)

    def load_history(self, newest_first: Iterable[Event]) -> None:
        """Replace the log with events read from the stream (newest first)."""
        history = list(newest_first)[: self.capacity]
        keys = {event_key(e) for e in history}
        live = [e for e in self._events if not e.id and event_key(e) not in keys]
        newest = history[0].ts if history else 0.0
        self._events = deque([e for e in live if e.ts >= newest] + history, maxlen=self.capacity)
        self.version += 1

    def add_live(self, oldest_first: Iterable[Event], dropped: int = 0) -> None:
        """Add events as they happen."""
        n = 0
        for e in oldest_first:
            self._events.appendleft(e)
            n += 1
        self.dropped += dropped
        if self.frozen:
            self.missed += n
        if n:
            self.version += 1

    def freeze(self, frozen: bool) -> None:
        """Stop (or resume) showing new events."""
        self.frozen = frozen
        self._view = list(self._events) if frozen else None
        self.missed = 0
        self.version += 1

    def view(self, text: str = "") -> list[Event]:
        """The events shown, newest first, those matching ``text`` (every word) only."""
        source = self._view if self._view is not None else list(self._events)
        words = text.lower().split()
        if not words:
            return source
        return [e for e in source if all(w in haystack(e) for w in words)]
