"""Times and durations as users write them: ``--in 10m``, ``--at 2026-12-01T06:00``."""

from __future__ import annotations

import math
import re
from datetime import datetime, time, timedelta
from typing import Any

from engine.errors import DefinitionError

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
MAX_DELAY_S = 366 * 86400.0  # a start more than a year away is a mistake


class TooLong(DefinitionError):
    """A duration past any finite number of seconds (``1e400``, ``inf``)."""


def parse_duration(text: str, what: str = "a duration") -> float:
    """Seconds in ``"90"``, ``"90s"``, ``"10m"``, ``"1h30m"``, ``"2d"``, ``"500ms"``;
    :class:`DefinitionError` naming ``what`` otherwise (:class:`TooLong` for an
    infinite one)."""
    s = text.strip().lower().replace(" ", "")
    try:
        value = float(s)
    except ValueError:
        pos, value = 0, 0.0
        for m in _PART.finditer(s):
            if m.start() != pos:
                break
            value += float(m.group(1)) * _UNITS[m.group(2)]
            pos = m.end()
        if pos != len(s) or not s:
            raise DefinitionError(
                f"{what} {text!r} is not a duration (like 90s, 10m, 1h30m, 2d)"
            ) from None
    if value < 0 or value != value:
        raise DefinitionError(f"{what} {text!r} must not be negative")
    if math.isinf(value):
        raise TooLong(f"{what} {text!r} is too long (not a finite number of seconds)")
    return value


def parse_time(text: str, now: datetime | None = None) -> datetime:
    """An aware datetime from ISO 8601 (``2026-12-01T06:00``, ``...+01:00``, ``...Z``;
    without a zone: this machine's local time) or a time of day (``06:00``: its next
    occurrence)."""
    now = now or datetime.now().astimezone()
    s = text.strip()
    try:
        if re.fullmatch(r"\d{1,2}:\d{2}(:\d{2})?", s):
            at = datetime.combine(now.date(), time.fromisoformat(s.zfill(5)), now.tzinfo)
            return at if at > now else at + timedelta(days=1)
        at = datetime.fromisoformat(s)
    except ValueError:
        raise DefinitionError(
            f"--at {text!r} is not a time (like 2026-12-01T06:00, 2026-12-01 06:00+01:00 or 06:00)"
        ) from None
    if at.tzinfo is not None:
        return at
    try:
        return at.astimezone()  # the local zone's offset can carry it past year 1 or 9999
    except (ValueError, OverflowError):
        raise DefinitionError(
            f"--at {text!r} is out of range: this machine's time zone cannot place it"
        ) from None


def start_delay_ms(start_in: Any = None, start_at: datetime | None = None) -> int:
    """Milliseconds from now to start a pushed workflow (0: now), from ``start_in``
    seconds or an aware ``start_at``; refuses both at once, a start in the past (more
    than a minute ago: a typo, not "now") and one more than a year away."""
    if start_in is not None and start_at is not None:
        raise DefinitionError("give a start time or a delay, not both")
    if start_at is not None:
        if not isinstance(start_at, datetime):
            raise DefinitionError(f"start_at must be a datetime, not {start_at!r}")
        if start_at.tzinfo is None:
            start_at = start_at.astimezone()
        delay = (start_at - datetime.now().astimezone()).total_seconds()
        if delay < -60:
            raise DefinitionError(f"start time {start_at.isoformat()} is in the past")
    elif start_in is not None:
        if isinstance(start_in, bool) or not isinstance(start_in, int | float):
            raise DefinitionError(f"start_in must be a number of seconds, not {start_in!r}")
        if start_in < 0 or start_in != start_in:
            raise DefinitionError(f"start_in must not be negative, not {start_in!r}")
        delay = float(start_in)
    else:
        return 0
    if delay > MAX_DELAY_S:
        raise DefinitionError("a start more than a year away is refused (a typo?)")
    return max(0, round(delay * 1000))
