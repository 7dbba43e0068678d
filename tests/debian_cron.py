"""A model of Debian cron (vixie cron 3.0pl1 with Debian's patches), written from its
source, to compare schedules' ticks with.

What it follows (``entry.c``, ``cron.c``; the tests state it as assumptions, since they
do not run the daemon):

* **Fields** (``entry.c`` ``get_list``/``get_range``): ``*``, ``N``, ``N-M``, ``*/S``,
  ``N-M/S``, comma lists, three-letter month and day names; day of week 0-7, both 0
  and 7 Sunday. A field whose text *starts with* ``*`` sets its STAR flag (``*/2``
  too). Macros: ``@yearly``/``@annually`` (0 0 1 1, DOW_STAR), ``@monthly`` (0 0 1,
  DOW_STAR), ``@weekly`` (0 0, dow 0, DOM_STAR), ``@daily``/``@midnight`` (0 0, all
  days), ``@hourly`` (minute 0, HR_STAR).
* **Matching a minute** (``cron.c`` ``find_jobs``): minute, hour and month bits, and the
  day ``(DOM_STAR || DOW_STAR) ? (dom && dow) : (dom || dow)``. A job is *wildcard* when
  MIN_STAR or HR_STAR is set, else *fixed-time*; ``find_jobs(vtime, doWild, doNonWild)``
  adds only the kinds asked for.
* **The main loop** (``cron.c`` ``main``): the clock is local wall minutes since the epoch
  (``(now + GMToff) / 60``); cron wakes at each real minute, with ``virtualTime`` the
  wall minute it last handled, and ``timeDiff = timeRunning - virtualTime``:
  ``1``: normal, run everything at ``timeRunning``;
  ``2..5`` (woke late): every job of each wall minute up to ``timeRunning``;
  ``6..180`` (a jump forward, e.g. daylight saving starting): the wildcard jobs of
  ``timeRunning``, then the fixed-time jobs of each wall minute after ``virtualTime`` up
  to ``timeRunning``, all at once just after the jump;
  ``-179..0`` (clocks went back): only the wildcard jobs of ``timeRunning``, and
  ``virtualTime`` stays until the clock catches up (fixed-time jobs do not run twice);
  otherwise (over 3 hours either way): every job of ``timeRunning``, virtual time reset.
* Jobs take no time (cron.c's ``sleep(10)`` between catch-up minutes that ran a job, and a
  catch-up loop outlasting its minute, are left out): the runs of one wake-up share its
  real minute, in the order cron adds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
EPOCH = datetime(1970, 1, 1)


def _number(text: str, low: int, names: tuple[str, ...]) -> int:
    if text.lower() in names:
        return names.index(text.lower()) + low
    return int(text)


def _field(text: str, low: int, high: int, names: tuple[str, ...] = ()) -> set[int]:
    out: set[int] = set()
    for item in text.split(","):
        rng, _, step = item.partition("/")
        if rng == "*":
            first, last = low, high
        elif "-" in rng:
            a, b = rng.split("-")
            first, last = _number(a, low, names), _number(b, low, names)
        else:
            if step:
                raise ValueError(f"{item}: a step needs a range (entry.c)")
            first = last = _number(rng, low, names)
        if not (low <= first <= last <= high):
            raise ValueError(f"{item}: out of range {low}-{high}")
        out.update(range(first, last + 1, int(step) if step else 1))
    return out


@dataclass(frozen=True)
class Entry:
    """One crontab line's times, as entry.c stores them."""

    minute: frozenset[int]
    hour: frozenset[int]
    dom: frozenset[int]
    month: frozenset[int]
    dow: frozenset[int]  # 0-6, Sunday 0 (a 7 is folded onto 0)
    min_star: bool = False
    hr_star: bool = False
    dom_star: bool = False
    dow_star: bool = False

    @classmethod
    def parse(cls, line: str) -> Entry:
        macro = line.strip().lower()
        every = frozenset
        alls = {
            "minute": every(range(60)),
            "hour": every(range(24)),
            "dom": every(range(1, 32)),
            "month": every(range(1, 13)),
            "dow": every(range(7)),
        }
        zero, one = every({0}), every({1})
        if macro in ("@yearly", "@annually"):
            return cls(zero, zero, one, one, alls["dow"], dow_star=True)
        if macro == "@monthly":
            return cls(zero, zero, one, alls["month"], alls["dow"], dow_star=True)
        if macro == "@weekly":
            return cls(zero, zero, alls["dom"], alls["month"], zero, dom_star=True)
        if macro in ("@daily", "@midnight"):
            return cls(zero, zero, alls["dom"], alls["month"], alls["dow"])
        if macro == "@hourly":
            return cls(zero, alls["hour"], alls["dom"], alls["month"], alls["dow"], hr_star=True)
        m, h, dom, mon, dow = line.split()
        days = _field(dow, 0, 7, DAYS)
        return cls(
            every(_field(m, 0, 59)),
            every(_field(h, 0, 23)),
            every(_field(dom, 1, 31)),
            every(_field(mon, 1, 12, MONTHS)),
            every({d % 7 for d in days}),
            min_star=m.startswith("*"),
            hr_star=h.startswith("*"),
            dom_star=dom.startswith("*"),
            dow_star=dow.startswith("*"),
        )

    @property
    def wild(self) -> bool:
        return self.min_star or self.hr_star

    def matches(self, wall: datetime) -> bool:
        """find_jobs' test for the wall minute ``wall``."""
        if wall.minute not in self.minute or wall.hour not in self.hour:
            return False
        if wall.month not in self.month:
            return False
        dom = wall.day in self.dom
        dow = (wall.isoweekday() % 7) in self.dow
        return (dom and dow) if (self.dom_star or self.dow_star) else (dom or dow)


@dataclass(frozen=True)
class Run:
    """A job run: the real minute (UTC epoch ms) and the wall minute it was run for."""

    real_ms: int
    wall: datetime


def _clock(ms: int, zone: ZoneInfo) -> int:
    """cron.c's clockTime: local wall minutes since the epoch."""
    at = datetime.fromtimestamp(ms / 1000, UTC).astimezone(zone).replace(tzinfo=None)
    return int((at - EPOCH).total_seconds()) // 60


def runs(line: str, zone: ZoneInfo, start_ms: int, end_ms: int) -> list[Run]:
    """The runs of ``line`` cron makes in ``zone`` at the real minutes in
    ``(start_ms, end_ms]`` (cron running since ``start_ms``, a whole minute)."""
    entry = Entry.parse(line)
    out: list[Run] = []
    virtual = _clock(start_ms, zone)
    t = start_ms

    def find(vtime: int, do_wild: bool, do_fixed: bool) -> None:
        wall = EPOCH + timedelta(minutes=vtime)
        if entry.matches(wall) and (do_wild if entry.wild else do_fixed):
            out.append(Run(t, wall))

    while t < end_ms:
        t += 60_000
        running = _clock(t, zone)
        diff = running - virtual
        if diff == 1:
            virtual = running
            find(virtual, True, True)
            continue
        kind = -1
        if diff > -180:
            kind = 0
        if diff > 0:
            kind = 1
        if diff > 5:
            kind = 2
        if diff > 180:
            kind = 3
        if kind == 1:
            while virtual < running:
                virtual += 1
                find(virtual, True, True)
        elif kind == 2:
            find(running, True, False)
            while virtual < running:
                virtual += 1
                find(virtual, False, True)
        elif kind == 0:
            find(running, True, False)
        else:
            find(running, True, True)
            virtual = running
    return out
