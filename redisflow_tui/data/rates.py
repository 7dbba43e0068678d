"""Throughput and queue depth over the last minutes, one value per second."""

from __future__ import annotations

from collections.abc import Iterable

from engine import Event

WINDOW_S = 120
FINISHING = frozenset({"task.succeeded", "task.failed"})


class Rates:
    """Tasks finished per second and ready tasks queued, over a sliding window.

    Finished tasks are counted from lifecycle events (history from the stream at start,
    live events after), so the curve survives a console restart; queue depth is sampled
    from the counters once a second.
    """

    def __init__(self, window_s: int = WINDOW_S) -> None:
        self.window_s = window_s
        self._finished: dict[int, int] = {}
        self._queued: dict[int, int] = {}

    def add_finished(self, per_second: dict[int, int]) -> None:
        """Count finished tasks, ``{epoch second: n}``."""
        for sec, n in per_second.items():
            self._finished[sec] = self._finished.get(sec, 0) + n

    def load_history(self, events: Iterable[Event]) -> None:
        """Replace the finished counts with those of stored events."""
        self._finished.clear()
        counts: dict[int, int] = {}
        for e in events:
            if e.kind in FINISHING:
                counts[int(e.ts)] = counts.get(int(e.ts), 0) + 1
        self.add_finished(counts)

    def sample_queue(self, now: float, depth: int) -> None:
        """Record the queue depth at ``now``."""
        self._queued[int(now)] = depth

    def _trim(self, now: float) -> None:
        cutoff = int(now) - self.window_s - 1
        for series in (self._finished, self._queued):
            for sec in [s for s in series if s < cutoff]:
                del series[sec]

    def throughput(self, now: float) -> list[float]:
        """Tasks finished in each of the last complete seconds, oldest first."""
        self._trim(now)
        last = int(now) - 1
        return [float(self._finished.get(s, 0)) for s in range(last - self.window_s + 1, last + 1)]

    def queue(self, now: float) -> list[float]:
        """Queue depth of each of the last seconds (carried forward), oldest first."""
        self._trim(now)
        out: list[float] = []
        value = 0.0
        for s in range(int(now) - self.window_s + 1, int(now) + 1):
            value = float(self._queued.get(s, value))
            out.append(value)
        return out

    def rate(self, now: float, seconds: int = 5) -> float:
        """Mean tasks per second over the last ``seconds`` complete seconds."""
        series = self.throughput(now)[-seconds:]
        return sum(series) / max(1, len(series))
