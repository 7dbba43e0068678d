"""Time as the console shows it: ages, durations and timestamps.

Everything that prints a time goes through a :class:`Clock`, so a test can freeze what
the screen shows with :class:`FrozenClock`.
"""

from __future__ import annotations

import time


def format_age(seconds: float | None) -> str:
    """``12s``, ``4m``, ``3h``, ``2d``; ``-`` for unknown."""
    if seconds is None:
        return "-"
    s = max(0.0, seconds)
    if s < 60:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{s // 60:.0f}m"
    if s < 86400:
        return f"{s // 3600:.0f}h"
    return f"{s // 86400:.0f}d"


def format_duration(seconds: float | None) -> str:
    """``45ms``, ``1.2s``, ``3m04s``; ``-`` for unknown."""
    if seconds is None:
        return "-"
    s = max(0.0, seconds)
    if s < 1:
        return f"{s * 1000:.0f}ms"
    if s < 60:
        return f"{s:.1f}s"
    m, sec = divmod(int(s), 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


class Clock:
    """The wall clock, corrected to the Redis server's clock when known."""

    def __init__(self) -> None:
        self.skew = 0.0  # server time minus local time

    def now(self) -> float:
        """Server time now, in epoch seconds."""
        return time.time() + self.skew

    def age(self, ts: float | None) -> str:
        """How long ago ``ts`` was."""
        return "-" if ts is None else format_age(self.now() - ts)

    def ago(self, seconds: float | None) -> str:
        """An age already measured in seconds (e.g. a heartbeat's)."""
        return format_age(seconds)

    def since(self, ts: float | None, until: float | None = None) -> str:
        """The duration from ``ts`` until ``until`` (or now)."""
        if ts is None:
            return "-"
        return format_duration((until if until is not None else self.now()) - ts)

    def stamp(self, ts: float | None) -> str:
        """Local time of day of ``ts`` with milliseconds."""
        if ts is None:
            return "-"
        lt = time.localtime(ts)
        return time.strftime("%H:%M:%S", lt) + f".{int(ts * 1000) % 1000:03d}"


class FrozenClock(Clock):
    """A clock whose every rendering is fixed, for deterministic screenshots and tests."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        super().__init__()
        self._now = now

    def now(self) -> float:
        return self._now

    def age(self, ts: float | None) -> str:
        return "-" if ts is None else "5s"

    def ago(self, seconds: float | None) -> str:
        return "-" if seconds is None else "1s"

    def since(self, ts: float | None, until: float | None = None) -> str:
        return "-" if ts is None else "1.0s"

    def stamp(self, ts: float | None) -> str:
        return "-" if ts is None else "12:00:00.000"
