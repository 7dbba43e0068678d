"""Cron schedules tick as Debian cron runs them: a table of expressions × zones over the
days clocks change, against the model of cron.c in ``tests/debian_cron.py`` (its
docstring lists what it assumes of Debian cron's source).

A run at a forward jump is one tick each (consecutive milliseconds from the jump), so the
comparison is the real minute of each tick, in order, against the real minute of each run
of the model; ``preview`` must note every tick a clock change touches.

Assumptions: the model follows cron.c's main loop and find_jobs and entry.c's field
flags as Debian's cron (3.0pl1 with its patches, which carry vixie cron's
daylight-saving handling) has them, written from that source's algorithm rather than
by running the daemon; jobs take no time; cron has been running since the start of
each window. The windows are the days around each 2026 change of Paris, New York and
Lord Howe (Kolkata and UTC, which do not change, over the same days).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from debian_cron import Entry, runs

from engine.schedules import Cadence, parse_schedule, preview
from engine.schedules.clock import local

EXPRESSIONS = [
    # fixed-time jobs, in and around the skipped and repeated times
    "30 2 * * *", "15,45 2 * * *", "0 1-3 * * *", "0 2 * * *", "0 3 * * *", "59 1 * * *",
    "0 1 * * *", "30 1 * * *", "15 2 * * 0", "45 1,2 * * *", "0,30 0-4 * * *",
    "5 2-3 * * *", "0-59/20 2 * * *", "10-50/10 1-2 * * *", "0 0 * * *", "0 12 * * *",
    "59 23 * * *", "0,15,30,45 1-2 * * *", "40 1 * * *",
    # wildcard jobs (minute or hour starting with *): by the real clock
    "* * * * *", "*/15 * * * *", "*/30 * * * *", "0 * * * *", "30 * * * *", "15 * * * *",
    "*/10 2 * * *", "* 2 * * *", "0 */2 * * *", "20 */3 * * *", "*/7 1-3 * * *",
    "*/45 * * * *",
    # day of month and day of week: AND when either starts with *, else OR
    "0 0 */2 * 1", "30 2 */2 * 0", "30 2 1-10 * 0", "0 2 * * 0", "0 2 * 3,4,10,11 0",
    "30 1 25-31 * 0", "30 2 29 3 *", "0 2 8 3 *", "30 2 * mar-apr sun", "0 2 * * 7",
    "15 2 4,5 * */3",
    # macros
    "@daily", "@midnight", "@hourly", "@weekly", "@monthly", "@yearly", "@annually",
]  # fmt: skip
ZONES = ["Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"]
YEAR = 2026


@cache
def changes(zone_name: str) -> tuple[datetime, ...]:
    """The instants (UTC) the zone's offset changes in YEAR."""
    zone = ZoneInfo(zone_name)
    out = []
    at = datetime(YEAR, 1, 1, tzinfo=UTC)
    while at.year == YEAR:
        nxt = at + timedelta(minutes=30)
        if at.astimezone(zone).utcoffset() != nxt.astimezone(zone).utcoffset():
            out.append(nxt)
        at = nxt
    return tuple(out)


def windows(zone_name: str) -> list[tuple[int, int]]:
    """From midnight (local) the day before each change to midnight two days after; a zone
    without changes (Kolkata, UTC) is checked over Paris's, New York's and Lord Howe's."""
    zone = ZoneInfo(zone_name)
    found = changes(zone_name) or tuple(
        c for z in ("Europe/Paris", "America/New_York", "Australia/Lord_Howe") for c in changes(z)
    )
    out = []
    for c in found:
        day = c.astimezone(zone).date() - timedelta(days=1)
        start = datetime(day.year, day.month, day.day, tzinfo=zone)
        end = start + timedelta(days=3)  # wall days: the aware arithmetic keeps the wall time
        out.append((int(start.timestamp() * 1000), int(end.timestamp() * 1000)))
    return out


def test_the_zones_change_as_the_table_expects() -> None:
    paris, new_york, lord_howe = (changes(z) for z in ZONES[:3])
    assert len(paris) == len(new_york) == len(lord_howe) == 2
    assert changes("Asia/Kolkata") == changes("UTC") == ()
    jump = lord_howe[1]  # 2026-10-04, 02:00 LHST → 02:30 LHDT: a 30-minute shift
    before = (jump - timedelta(minutes=1)).astimezone(ZoneInfo("Australia/Lord_Howe"))
    assert jump.astimezone(ZoneInfo("Australia/Lord_Howe")).utcoffset() - before.utcoffset() == (  # type: ignore[operator]
        timedelta(minutes=30)
    )


def ours(c: Cadence, start: int, end: int) -> list[int]:
    out: list[int] = []
    t = c.next_after(start)
    while t is not None and t <= end:
        out.append(t)
        t = c.next_after(t)
    return out


@pytest.mark.parametrize("zone_name", ZONES)
@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_ticks_are_debian_crons_runs(expr: str, zone_name: str) -> None:
    zone = ZoneInfo(zone_name)
    c = Cadence(parse_schedule({"name": "s", "template": "t", "cron": expr, "timezone": zone_name}))
    for start, end in windows(zone_name):
        theirs = runs(expr, zone, start, end)
        ticks = ours(c, start, end)
        assert [t - t % 60_000 for t in ticks] == [r.real_ms for r in theirs], (
            f"{expr} in {zone_name} from {local(start, zone)}: "
            f"ours {[f'{local(t, zone):%d %H:%M:%S.%f %Z}' for t in ticks]} "
            f"theirs {[f'{local(r.real_ms, zone):%d %H:%M %Z} for {r.wall:%H:%M}' for r in theirs]}"
        )
        assert len(set(ticks)) == len(ticks)  # each run its own tick
        # preview notes every tick a clock change touches
        shown = preview(c, start, len(ticks)) if ticks else []
        for row, run in zip(shown, theirs, strict=True):
            at = row.local
            if (at.hour, at.minute) != (run.wall.hour, run.wall.minute):
                assert row.note.startswith(f"{run.wall:%H:%M} does not exist"), (expr, row)
            elif at.replace(fold=1 - at.fold).utcoffset() != at.utcoffset():
                assert "happens twice" in row.note or "repeated" in row.note, (expr, row)


def test_the_model_reads_fields_as_entry_c() -> None:
    e = Entry.parse("0 0 */2 * 1")
    assert e.dom_star and not e.dow_star and not e.wild
    assert Entry.parse("*/5 3 * * *").wild and Entry.parse("0 */2 * * *").wild
    assert Entry.parse("@hourly").wild and not Entry.parse("@daily").wild
    assert Entry.parse("0 2 * * 7").dow == {0}


@pytest.mark.parametrize("expr", ["0 0 */2 * 1", "0 0 1,15 * 5", "0 0 1-7 * */2", "@weekly"])
def test_day_rule_over_months(expr: str) -> None:
    """The day-of-month/day-of-week rule over two months (UTC, no clock change)."""
    c = Cadence(parse_schedule({"name": "s", "template": "t", "cron": expr}))
    start = int(datetime(YEAR, 1, 1, tzinfo=UTC).timestamp() * 1000)
    end = int(datetime(YEAR, 3, 1, tzinfo=UTC).timestamp() * 1000)
    theirs = [r.real_ms for r in runs(expr, ZoneInfo("UTC"), start, end)]
    assert ours(c, start, end) == theirs and theirs


def test_the_model_runs_skipped_times_after_the_jump_and_repeated_ones_once() -> None:
    """The model itself, on the cases docs/schedules.md states."""
    paris, new_york = ZoneInfo("Europe/Paris"), ZoneInfo("America/New_York")
    day = int(datetime(2026, 3, 29, tzinfo=paris).timestamp() * 1000)

    def at(line: str, zone: ZoneInfo, start: int) -> list[str]:
        return [
            f"{local(r.real_ms, zone):%H:%M %Z} for {r.wall:%H:%M}"
            for r in runs(line, zone, start, start + 20 * 3_600_000)
        ]

    assert at("15,45 2 * * *", paris, day) == ["03:00 CEST for 02:15", "03:00 CEST for 02:45"]
    assert at("0 1-3 * * *", paris, day) == [
        "01:00 CET for 01:00", "03:00 CEST for 02:00", "03:00 CEST for 03:00",
    ]  # fmt: skip
    assert at("*/30 2 * * *", paris, day) == []  # a wildcard job: not in the skipped hour
    fall = int(datetime(2026, 11, 1, tzinfo=new_york).timestamp() * 1000)
    assert at("30 1 * * *", new_york, fall) == ["01:30 EDT for 01:30"]
    assert at("30 * * * *", new_york, fall)[:3] == [
        "00:30 EDT for 00:30", "01:30 EDT for 01:30", "01:30 EST for 01:30",
    ]  # fmt: skip
