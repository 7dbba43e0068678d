"""Cron expressions as Debian cron reads and runs them: the ``@daily`` macros, which jobs
are "wildcard" jobs, and what fires when the clocks jump forward.

Debian cron (vixie cron 3.0pl1, ``cron.c``) wakes each minute and compares the local
wall-clock minute with the one it ran last. When the clocks jump forward by more than 5
minutes and at most 3 hours, it runs the wildcard jobs (minute or hour field starting
with ``*``) of the new minute, then every *fixed-time* job of each wall minute it
skipped, one after another, just after the jump. The ticks fired at one jump are
consecutive milliseconds from the jump (``03:00:00.000``, ``03:00:00.001``, ...), in
the order of the local times they stand for: each is its own tick (one run each).
A jump of 5 minutes or less (no zone has one today) is treated the same, where cron.c
would also run that span's wildcard jobs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

# Debian cron's entry.c: each macro is the 5-field line with the same fields and flags.
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# cron.c: a jump of over 5 minutes and up to 3 hours runs the skipped fixed-time jobs;
# a longer one skips them.
MOST_CATCHUP_JUMP_MIN = 180
MINUTE_MS = 60_000


def expand(expr: str) -> str:
    """The 5 fields of ``expr``: a macro (``@daily``) as its fields, else ``expr``."""
    return MACROS.get(expr.strip().lower(), expr)


def is_wildcard(expr: str) -> bool:
    """Debian's MIN_STAR or HR_STAR: the minute or the hour field starts with ``*``. Such
    a job runs by the real clock (both copies of a repeated hour, none of a skipped one)."""
    minute, hour = expand(expr).split()[:2]
    return minute.startswith("*") or hour.startswith("*")


def _offset_ms(ms: int, zone: ZoneInfo) -> int:
    off = datetime.fromtimestamp(ms / 1000, UTC).astimezone(zone).utcoffset()
    return int(off.total_seconds() * 1000) if off is not None else 0


def jump_at(ms: int, zone: ZoneInfo) -> int:
    """How many minutes the clocks jump forward at the start of ``ms``'s minute (0: none)."""
    start = ms - ms % MINUTE_MS
    return max(0, (_offset_ms(start, zone) - _offset_ms(start - 1, zone)) // MINUTE_MS)


@lru_cache(maxsize=4096)
def fired_at_jump(expr: str, zone: ZoneInfo, jump_ms: int) -> tuple[datetime, ...]:
    """The local wall times (naive) whose runs fire at the forward jump at ``jump_ms``,
    in order; empty when it is no jump or nothing of ``expr`` fires there."""
    from cronsim import CronSim

    size = jump_at(jump_ms, zone)
    if size == 0 or jump_ms % MINUTE_MS:
        return ()
    after = datetime.fromtimestamp(jump_ms / 1000, UTC).astimezone(zone).replace(tzinfo=None)
    first = after - timedelta(minutes=size)  # the first wall minute that did not happen
    fields = expand(expr)
    if is_wildcard(fields) or size > MOST_CATCHUP_JUMP_MIN:
        first = after  # only the minute after the jump, by the real clock
    out: list[datetime] = []
    it = CronSim(fields, first - timedelta(minutes=1))  # naive: wall times, no zone
    for at in it:
        if at > after:
            break
        out.append(at)
    return tuple(out)


# A zone's offset is taken to change at most once in this span (changes are weeks apart).
CHANGE_STEP_MS = 7 * 86_400_000


def _first_change(start: int, end: int, zone: ZoneInfo) -> int | None:
    """The first whole minute in ``(start, end]`` whose offset differs from ``start``'s."""
    base = _offset_ms(start, zone)
    lo = start
    while lo < end:
        hi = min(end, lo + CHANGE_STEP_MS)
        if _offset_ms(hi, zone) != base:
            lo -= lo % MINUTE_MS  # the offset at lo is base, at hi not
            while hi - lo > MINUTE_MS:
                mid = lo + (hi - lo) // MINUTE_MS // 2 * MINUTE_MS
                if _offset_ms(mid, zone) == base:
                    lo = mid
                else:
                    hi = mid
            return hi
        lo = hi
    return None


def wildcard_next(expr: str, zone: ZoneInfo, ms: int) -> int:
    """The next tick after ``ms`` of a wildcard job (:func:`is_wildcard`): the first real
    minute whose local wall time matches, as cron.c runs such jobs by the real clock (both
    copies of a repeated time, none of a skipped one). Raises StopIteration if none."""
    from cronsim import CronSim

    x = ms - ms % MINUTE_MS + MINUTE_MS
    while True:
        wall = datetime.fromtimestamp(x / 1000, UTC).astimezone(zone).replace(tzinfo=None)
        match = next(CronSim(expr, wall - timedelta(seconds=1)))  # naive: wall times
        cand = x + int((match - wall).total_seconds() * 1000)
        change = _first_change(x, cand, zone)
        if change is None:
            return cand
        x = change  # the wall clock moved on the way: look again from the change
