"""When a schedule's ticks fall, and what a scheduler does about the ones that are due.

Ticks are epoch milliseconds. A cron schedule's follow Debian cron in the schedule's time
zone (:mod:`.cron`): a job at a fixed local time that does not exist that day (clocks jump
forward) fires just after the jump, each skipped time its own tick a millisecond after the
one before; one in the hour that happens twice (clocks go back) fires once, the first
time. Jobs with a wildcard minute or hour fire by the real clock, in both copies of a
repeated hour and not in a skipped one. An ``every`` schedule ticks at
``offset + k * every`` from the Unix epoch: time zones do not move it.

A tick's *due* time is the tick plus its jitter, ``H(name, tick) mod jitter``: the same
in every scheduler, so they agree on it to the millisecond.

Everything here is pure: the scheduler passes Redis's clock in as ``now``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from .cron import MINUTE_MS, expand, fired_at_jump, is_wildcard, jump_at, wildcard_next
from .spec import ScheduleSpec

# A due tick is late (subject to the catch-up policy) when the tick after it is due too,
# or when it is more than this behind.
LATE_AFTER_MS = 60_000
# Ticks enumerated one by one when a schedule is far behind; past that the gap is
# skipped (and counted by arithmetic, or estimated for cron).
ENUM_LIMIT = 5000
MISSED_SHOWN = 10  # missed ticks listed in a schedule.missed event


def to_ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def local(ms: int, zone: ZoneInfo) -> datetime:
    """The aware local time of epoch ``ms`` in ``zone``."""
    return datetime.fromtimestamp(ms / 1000, UTC).astimezone(zone)


def jitter_of(name: str, tick_ms: int, jitter_ms: int) -> int:
    """``H(name, tick) mod jitter``: a tick's delay, the same in every process."""
    if jitter_ms <= 0:
        return 0
    digest = hashlib.blake2b(f"{name}\0{tick_ms}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % jitter_ms


class Cadence:
    """The ticks of one schedule: :meth:`next_after`, :meth:`due`, within its
    ``start_at`` / ``end_at``."""

    def __init__(self, spec: ScheduleSpec) -> None:
        self.spec = spec
        self.zone = ZoneInfo(spec.timezone)
        self.name = spec.name
        self.expr = None if spec.cron is None else expand(spec.cron)
        self.wild = self.expr is not None and is_wildcard(self.expr)

    def _raw_next(self, ms: int) -> int:
        """The first tick strictly after ``ms``, ignoring start and end."""
        every = self.spec.every_ms
        if every is not None:
            off = self.spec.offset_ms
            return ((ms - off) // every + 1) * every + off
        from cronsim import CronSim

        expr = self.expr
        assert expr is not None
        if self.wild:
            return wildcard_next(expr, self.zone, ms)
        jump = ms - ms % MINUTE_MS
        if ms + 1 < jump + len(fired_at_jump(expr, self.zone, jump)):
            return ms + 1  # the next of the runs fired together at a forward jump
        it = CronSim(expr, local(ms, self.zone))
        while True:
            # cronsim counts from the whole second, and a fixed-time job in the second copy
            # of a repeated hour can come back at the first copy: ticks only move forward
            t = to_ms(next(it))
            if t <= ms:
                continue
            if jump_at(t, self.zone) and not fired_at_jump(expr, self.zone, t):
                continue  # cronsim fires at a jump where Debian cron runs nothing
            return t

    def next_after(self, ms: int) -> int | None:
        """The first tick after ``ms`` within start_at/end_at; None when none is left."""
        start = self.spec.start_at_ms
        if start is not None and ms < start:
            ms = start - 1
        try:
            t = self._raw_next(ms)
        except StopIteration:
            return None
        end = self.spec.end_at_ms
        if end is not None and t > end:
            return None
        return t

    def due(self, tick: int) -> int:
        """When ``tick`` is due: the tick plus its jitter."""
        return tick + jitter_of(self.name, tick, self.spec.jitter_ms)

    def ticks(self, after_ms: int, count: int) -> list[int]:
        """The next ``count`` ticks after ``after_ms`` (fewer past end_at)."""
        out: list[int] = []
        t = self.next_after(after_ms)
        while t is not None and len(out) < count:
            out.append(t)
            t = self.next_after(t)
        return out

    def between(self, first: int, last: int) -> int:
        """How many ticks lie in ``[first, last)``, ``first`` a tick: exact for ``every``,
        estimated for cron from the ticks just after ``first``."""
        if last <= first:
            return 0
        every = self.spec.every_ms
        if every is not None:
            return (last - 1 - first) // every + 1
        sample = self.ticks(first, 50)
        if not sample:
            return 1
        gap = (sample[-1] - first) / len(sample)
        return max(1, round((last - first) / gap))

    def iso(self, tick: int) -> str:
        """A tick as ISO 8601 in the schedule's time zone (what a run's input carries)."""
        return local(tick, self.zone).isoformat(
            timespec="milliseconds" if tick % 1000 else "seconds"
        )


@dataclass
class Plan:
    """What to do about the ticks due at ``now``: the runs to push (each the ticks it
    carries, oldest first: one tick, or several for ``coalesce``), the ticks counted as
    missed, and the tick and due time that come next (None: the schedule has ended)."""

    runs: list[list[int]]
    missed: int
    missed_shown: list[int]
    next_tick: int | None
    next_due: int | None
    due: int = 0  # how many ticks were due
    late: int = 0  # how many of them were late
    first: int | None = None  # the oldest due tick (coalesce: the interval's start)


def plan(cadence: Cadence, first_tick: int, now: int) -> Plan:
    """The catch-up plan for a schedule whose next tick is ``first_tick``, at Redis time
    ``now`` (ms). A due tick is *late* when the one after it is due too, or it is more
    than a minute behind; the newest due tick is on time otherwise, and so are the ticks
    a clock jump fired with it (a cron schedule's ticks in the same minute). Then, by
    ``catchup``:

    * ``none``: the on-time ticks run, late ones are missed;
    * ``latest``: one run, the newest due tick (with those of its clock jump), if within
      ``catchup_window``;
    * ``all``: the late ticks run oldest first, at most ``max_catchup`` of them, then
      the on-time one; late ticks past the cap are missed;
    * ``coalesce``: one run carrying every due tick (the list capped at ``max_catchup``).
    """
    spec = cadence.spec
    keep = spec.max_catchup + 1
    head: list[int] = []  # the oldest due ticks
    group: list[int] = []  # the newest due tick and those fired with it at a clock jump
    together = spec.cron is not None
    count = 0
    t: int | None = first_tick
    steps = 0
    while t is not None and cadence.due(t) <= now:
        if len(head) < keep:
            head.append(t)
        if together and group and group[-1] // MINUTE_MS == t // MINUTE_MS:
            group.append(t)
        else:
            group = [t]
        count += 1
        steps += 1
        if steps == ENUM_LIMIT:
            # Far behind: skip to shortly before now (the latest catch-up window at most)
            tail = max(LATE_AFTER_MS, spec.catchup_window_ms) + spec.jitter_ms
            jump = cadence.next_after(now - tail)
            nt = cadence.next_after(t)
            if jump is not None and nt is not None and jump > nt:
                count += cadence.between(nt, jump)
                t = jump
                continue
        t = cadence.next_after(t)
    next_due = None if t is None else cadence.due(t)
    if count == 0:
        return Plan([], 0, [], t, next_due)
    newest = group[-1]
    on_time = now - cadence.due(newest) <= LATE_AFTER_MS
    late = count - len(group) if on_time else count
    newest_runs = [[x] for x in group]
    runs: list[list[int]] = []
    missed = late
    mode = spec.catchup
    if mode == "none":
        if on_time:
            runs = newest_runs
    elif mode == "latest":
        if on_time or now - cadence.due(newest) <= spec.catchup_window_ms:
            runs = newest_runs
            missed = count - len(group)
    elif mode == "all":
        caught = [x for x in head[: spec.max_catchup] if x not in group or not on_time]
        runs = [[x] for x in caught]
        if on_time:
            runs += newest_runs
        missed = late - len(caught)
    else:  # coalesce
        if late == 0:
            runs = newest_runs
        else:
            carried = head[: spec.max_catchup]
            if carried[-1] != newest:
                carried = carried[: spec.max_catchup - 1] + [newest]
            runs = [carried]
        missed = 0
    fired = {x for r in runs for x in r}
    shown = [x for x in head if x not in fired][:MISSED_SHOWN] if missed else []
    return Plan(runs, missed, shown, t, next_due, count, late, head[0])


def run_input(
    cadence: Cadence, ticks: list[int], *, first: int | None = None, count: int = 0
) -> dict[str, Any]:
    """The input of a run carrying ``ticks`` (oldest first): the schedule's own input plus
    ``schedule`` and ``tick`` (the newest, ISO 8601 in its time zone); a run that catches
    up several ticks (``coalesce``) also gets ``ticks``, ``interval`` (the first and last
    tick covered) and ``missed`` (how many it covers, the list capped)."""
    spec = cadence.spec
    out: dict[str, Any] = dict(spec.input or {})
    out["schedule"] = spec.name
    out["tick"] = cadence.iso(ticks[-1])
    if len(ticks) > 1:
        out["ticks"] = [cadence.iso(x) for x in ticks]
        out["interval"] = [cadence.iso(first if first is not None else ticks[0]), out["tick"]]
        out["missed"] = max(count, len(ticks))
    return out


# -- preview -------------------------------------------------------------------------------


@dataclass
class PreviewTick:
    """One upcoming tick as ``redisflow schedule preview`` shows it."""

    tick_ms: int
    due_ms: int
    local: datetime
    note: str = ""  # what daylight saving does to it, if anything


def _twice(at: datetime) -> bool:
    """Whether ``at``'s wall time happens twice (the hour clocks go back over)."""
    other = at.replace(fold=1 - at.fold)
    return other.utcoffset() != at.utcoffset()


def _jump_between(lo: int, hi: int, zone: ZoneInfo) -> int | None:
    """The ms of a forward clock change in ``(lo, hi]`` (whole minutes), if the offset at
    ``hi`` is ahead of the one at ``lo``."""
    if local(hi, zone).utcoffset() <= local(lo, zone).utcoffset():  # type: ignore[operator]
        return None
    lo -= lo % MINUTE_MS
    hi -= hi % MINUTE_MS
    while hi - lo > MINUTE_MS:  # the offset at lo is behind, at hi ahead
        mid = lo + (hi - lo) // MINUTE_MS // 2 * MINUTE_MS
        if jump_at(mid, zone) or local(mid, zone).utcoffset() == local(hi, zone).utcoffset():
            hi = mid
        else:
            lo = mid
    return hi


def _skipped_wildcard(expr: str, zone: ZoneInfo, jump: int) -> list[datetime]:
    """The wall times of a wildcard job that the forward jump at ``jump`` skips."""
    from cronsim import CronSim

    after = local(jump, zone).replace(tzinfo=None)
    out: list[datetime] = []
    for at in CronSim(expr, after - timedelta(minutes=jump_at(jump, zone) + 1)):
        if at >= after:
            break
        out.append(at)
    return out


def _times(ats: list[datetime]) -> str:
    names = [f"{a:%H:%M}" for a in ats]
    return ", ".join(names) if len(names) <= 4 else f"{names[0]}, {names[1]}, … {names[-1]}"


def dst_note(cadence: Cadence, at: datetime, before: datetime | None) -> str:
    """What daylight saving does to the tick at local time ``at`` ("" for nothing);
    ``before`` is the previous tick's local time."""
    spec = cadence.spec
    hm = f"{at:%H:%M}"
    if spec.cron is not None:
        expr = expand(spec.cron)
        tick = to_ms(at)
        jump = tick - tick % MINUTE_MS
        fired = fired_at_jump(expr, cadence.zone, jump)
        if fired and tick - jump < len(fired):
            stands = fired[tick - jump]
            if stands.hour != at.hour or stands.minute != at.minute:
                return f"{stands:%H:%M} does not exist (clocks jump forward) → fires {hm}"
            if tick > jump:
                return f"{hm}, after the skipped {_times(list(fired[:-1]))} (clocks jump forward)"
        if is_wildcard(expr):
            lo = to_ms(before) if before is not None else tick - 86_400_000
            change = _jump_between(lo, tick, cadence.zone)
            skipped = [] if change is None else _skipped_wildcard(expr, cadence.zone, change)
            if skipped:
                day = "" if skipped[0].date() == at.date() else f"{skipped[0]:%Y-%m-%d} "
                return (
                    f"{day}{_times(skipped)} did not exist (clocks jumped forward): not run, "
                    "a wildcard minute or hour runs by the real clock"
                )
        if _twice(at):
            if not is_wildcard(expr):
                return f"{hm} happens twice (clocks go back) → fires once, the first ({at:%Z})"
            which = "second" if at.fold else "first"
            return f"{which} {hm} ({at:%Z}): the repeated hour runs twice by the real clock"
    elif before is not None and before.utcoffset() != at.utcoffset():
        # an interval runs by the real clock: its local times shift by the change
        return f"clocks changed since the tick before ({before:%Z} → {at:%Z})"
    return ""


def preview(cadence: Cadence, after_ms: int, count: int = 10) -> list[PreviewTick]:
    """The next ``count`` ticks after ``after_ms``, each with its due time and what
    daylight saving does to it ("02:30 does not exist (clocks jump forward) → fires 03:00")."""
    out: list[PreviewTick] = []
    before: datetime | None = None
    for t in cadence.ticks(after_ms, count):
        at = local(t, cadence.zone)
        out.append(PreviewTick(t, cadence.due(t), at, dst_note(cadence, at, before)))
        before = at
    return out
