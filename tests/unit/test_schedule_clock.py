"""When ticks fall (cron in a time zone, every from the epoch), daylight saving, jitter,
and the catch-up plan (pure, no Redis)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from engine.schedules import Cadence, parse_schedule, plan, preview
from engine.schedules.clock import LATE_AFTER_MS, jitter_of, local, run_input

HOUR = 3_600_000


def cadence(**settings: Any) -> Cadence:
    return Cadence(parse_schedule({"name": "s", "template": "t", **settings}))


def ms(*parts: int, zone: str = "UTC") -> int:
    return int(datetime(*parts, tzinfo=ZoneInfo(zone)).timestamp() * 1000)


def wall(c: Cadence, ticks: list[int]) -> list[str]:
    return [local(t, c.zone).strftime("%m-%d %H:%M %Z") for t in ticks]


def test_every_counts_from_the_epoch() -> None:
    c = cadence(every="15m", offset="5m", timezone="Europe/Paris")
    start = ms(2026, 1, 1, 10, 7)
    assert c.ticks(start, 3) == [ms(2026, 1, 1, 10, 20), ms(2026, 1, 1, 10, 35),
                                 ms(2026, 1, 1, 10, 50)]  # fmt: skip
    assert c.next_after(ms(2026, 1, 1, 10, 20)) == ms(2026, 1, 1, 10, 35)  # strictly after


@pytest.mark.parametrize(
    "expr",
    ["*/7 * * * *", "0 2 * * *", "15 9-17 * * 1-5", "0 0 1,15 * *", "30 4 1 * 0",
     "0 12 * 2 *", "5 */3 * * *", "0 0 29 2 *", "59 23 31 12 *", "0 6 * * SAT,SUN"],
)  # fmt: skip
def test_cron_in_utc_agrees_with_croniter(expr: str) -> None:
    c = cadence(cron=expr)
    start = datetime(2025, 12, 30, 13, 11, tzinfo=UTC)
    ours = c.ticks(int(start.timestamp() * 1000), 200)
    it = croniter(expr, start)
    theirs = [int(it.get_next(datetime).timestamp() * 1000) for _ in range(200)]
    assert ours == theirs


def test_start_and_end() -> None:
    c = cadence(every="1h", start_at="2026-01-01T05:30:00Z", end_at="2026-01-01T08:00:00Z")
    assert c.ticks(ms(2025, 12, 1), 10) == [ms(2026, 1, 1, h) for h in (6, 7, 8)]
    assert c.next_after(ms(2026, 1, 1, 8)) is None


# -- daylight saving: Debian cron's rules, as cronsim follows them --------------------------


def test_paris_spring_forward_fires_just_after_the_jump() -> None:
    c = cadence(cron="30 2 * * *", timezone="Europe/Paris")
    rows = preview(c, ms(2026, 3, 27, 12), 3)
    assert [r.local.strftime("%d %H:%M %Z") for r in rows] == [
        "28 02:30 CET", "29 03:00 CEST", "30 02:30 CEST",
    ]  # fmt: skip
    assert rows[1].note == "02:30 does not exist (clocks jump forward) → fires 03:00"
    assert rows[0].note == rows[2].note == ""


def test_paris_fall_back_fires_once() -> None:
    c = cadence(cron="30 2 * * *", timezone="Europe/Paris")
    rows = preview(c, ms(2026, 10, 24, 12), 3)
    assert [r.local.strftime("%d %H:%M %Z") for r in rows] == [
        "25 02:30 CEST", "26 02:30 CET", "27 02:30 CET",
    ]  # fmt: skip
    assert rows[0].note == "02:30 happens twice (clocks go back) → fires once, the first (CEST)"
    # croniter runs it twice that night: Debian cron (and cronsim) once
    it = croniter("30 2 * * *", datetime(2026, 10, 24, 12, tzinfo=ZoneInfo("Europe/Paris")))
    theirs = [it.get_next(datetime).strftime("%d %H:%M") for _ in range(3)]
    assert theirs == ["25 02:30", "25 02:30", "26 02:30"]


def test_new_york_spring_forward() -> None:
    c = cadence(cron="30 2 * * *", timezone="America/New_York")
    rows = preview(c, ms(2026, 3, 7, 12), 2)
    assert [r.local.strftime("%d %H:%M %Z") for r in rows] == ["08 03:00 EDT", "09 02:30 EDT"]
    assert rows[0].note == "02:30 does not exist (clocks jump forward) → fires 03:00"


def test_new_york_fall_back_fixed_and_wildcard() -> None:
    fixed = cadence(cron="30 1 * * *", timezone="America/New_York")
    rows = preview(fixed, ms(2026, 10, 31, 12), 2)
    assert [r.local.strftime("%d %H:%M %Z") for r in rows] == ["01 01:30 EDT", "02 01:30 EST"]
    assert "happens twice (clocks go back) → fires once" in rows[0].note
    # a job with a wildcard hour runs by the real clock: in both copies of the hour
    every = cadence(cron="*/30 * * * *", timezone="America/New_York")
    rows = preview(every, ms(2026, 11, 1, 4, 45), 5)  # 00:45 EDT
    assert [r.local.strftime("%H:%M %Z") for r in rows] == [
        "01:00 EDT", "01:30 EDT", "01:00 EST", "01:30 EST", "02:00 EST",
    ]  # fmt: skip
    assert rows[0].note.startswith("first 01:00 (EDT)")
    assert rows[2].note.startswith("second 01:00 (EST)")


def test_ticks_only_move_forward_through_a_repeated_hour() -> None:
    c = cadence(cron="20 1 * * *", timezone="America/New_York")
    second_copy = ms(2026, 11, 1, 6, 10)  # 01:10 EST, after the 01:20 EDT tick
    t = c.next_after(second_copy)
    assert t is not None and t > second_copy
    assert wall(c, [t]) == ["11-02 01:20 EST"]


def test_an_interval_notes_the_clock_change() -> None:
    c = cadence(every="1h", timezone="Europe/Paris")
    rows = preview(c, ms(2026, 3, 28, 23, 30), 3)
    assert [r.local.strftime("%H:%M") for r in rows] == ["01:00", "03:00", "04:00"]
    assert rows[1].note == "clocks changed since the tick before (CET → CEST)"


# -- jitter --------------------------------------------------------------------------------


def test_jitter_is_deterministic_and_within_bounds() -> None:
    c = cadence(every="1m", jitter="30s")
    ticks = c.ticks(0, 200)
    delays = [c.due(t) - t for t in ticks]
    assert all(0 <= d < 30_000 for d in delays)
    assert len(set(delays)) > 150  # spread, not one value
    assert delays == [jitter_of("s", t, 30_000) for t in ticks]  # any process: the same
    assert (
        jitter_of("other", ticks[0], 30_000) != delays[0]
        or jitter_of("other", ticks[1], 30_000) != delays[1]
    )


# -- the catch-up plan ---------------------------------------------------------------------


def overdue(catchup: str, **more: Any) -> tuple[Cadence, int, int]:
    """An hourly schedule whose next tick is 5 h 10 min before now: six ticks due, the
    newest 10 minutes late (so late: the next hour's is not due, but it is past a minute)."""
    c = cadence(every="1h", offset="10m", catchup=catchup, **more)
    now = ms(2026, 5, 1, 12, 20)
    return c, ms(2026, 5, 1, 7, 10), now


def test_none_misses_every_late_tick() -> None:
    c, first, now = overdue("none")
    p = plan(c, first, now)
    assert (p.runs, p.missed, p.due, p.late) == ([], 6, 6, 6)
    assert p.missed_shown == [first + k * HOUR for k in range(6)]
    assert p.next_tick == ms(2026, 5, 1, 13, 10)


def test_latest_runs_the_newest_within_its_window() -> None:
    c, first, now = overdue("latest")
    p = plan(c, first, now)
    assert (p.runs, p.missed) == ([[ms(2026, 5, 1, 12, 10)]], 5)
    c, first, now = overdue("latest", catchup_window="5m")
    assert plan(c, first, now).runs == []


def test_all_runs_them_in_order_up_to_the_cap() -> None:
    c, first, now = overdue("all")
    p = plan(c, first, now)
    assert p.runs == [[first + k * HOUR] for k in range(6)] and p.missed == 0
    c, first, now = overdue("all", max_catchup=4)
    p = plan(c, first, now)
    assert p.runs == [[first + k * HOUR] for k in range(4)] and p.missed == 2


def test_coalesce_carries_every_missed_tick_in_one_run() -> None:
    c, first, now = overdue("coalesce")
    p = plan(c, first, now)
    assert p.runs == [[first + k * HOUR for k in range(6)]] and p.missed == 0
    value = run_input(c, p.runs[0], first=p.first, count=p.due)
    assert value["tick"] == "2026-05-01T12:10:00+00:00"
    assert value["ticks"][0] == "2026-05-01T07:10:00+00:00" and len(value["ticks"]) == 6
    assert value["interval"] == ["2026-05-01T07:10:00+00:00", "2026-05-01T12:10:00+00:00"]
    assert value["missed"] == 6 and value["schedule"] == "s"


def test_on_time_tick_runs_alone_whatever_the_policy() -> None:
    for mode in ("none", "latest", "all", "coalesce"):
        c = cadence(every="1h", catchup=mode)
        tick = ms(2026, 5, 1, 12)
        p = plan(c, tick, tick + 1500)
        assert (p.runs, p.missed, p.next_tick) == ([[tick]], 0, tick + HOUR)


def test_a_tick_is_late_once_the_next_is_due_or_after_a_minute() -> None:
    c = cadence(every="1s", catchup="none")
    p = plan(c, 10_000, 11_200)  # 10 s and 11 s are due: 10 s is late
    assert (p.runs, p.missed) == ([[11_000]], 1)
    c = cadence(every="1h", catchup="none")
    assert plan(c, HOUR, HOUR + LATE_AFTER_MS).runs == [[HOUR]]
    assert plan(c, HOUR, HOUR + LATE_AFTER_MS + 1).runs == []


def test_nothing_due_moves_nothing() -> None:
    c = cadence(every="1h", jitter="10m")
    tick = ms(2026, 5, 1, 12)
    p = plan(c, tick, tick - 1)
    assert (p.runs, p.next_tick, p.next_due) == ([], tick, c.due(tick))


def test_far_behind_skips_ahead_and_counts() -> None:
    c = cadence(every="1s", catchup="latest")
    p = plan(c, 0, 10 * 86_400_000 + 500)  # ten days of one-second ticks
    assert p.runs == [[10 * 86_400_000]]
    assert p.missed == 10 * 86_400 and p.next_tick == 10 * 86_400_000 + 1000
    cron = cadence(cron="* * * * *", catchup="all", max_catchup=3)
    p = plan(cron, ms(2026, 1, 1), ms(2026, 3, 1))  # two months of minutes
    assert p.runs[:3] == [[ms(2026, 1, 1, 0, m)] for m in range(3)]
    assert p.missed == pytest.approx(59 * 1440 - 2, rel=0.01)
    assert p.next_tick == ms(2026, 3, 1, 0, 1)


def test_an_ended_schedule_has_no_next_tick() -> None:
    c = cadence(every="1h", end_at="2026-05-01T12:00:00Z")
    p = plan(c, ms(2026, 5, 1, 12), ms(2026, 5, 1, 12, 0, 1))
    assert p.runs == [[ms(2026, 5, 1, 12)]] and p.next_tick is None and p.next_due is None


def test_run_input_carries_the_tick_in_the_schedule_zone() -> None:
    c = cadence(cron="30 2 * * *", timezone="Europe/Paris", input={"region": "eu"})
    tick = ms(2026, 3, 29, 3, zone="Europe/Paris")
    assert run_input(c, [tick]) == {
        "region": "eu", "schedule": "s", "tick": "2026-03-29T03:00:00+02:00",
    }  # fmt: skip


# -- several skipped times, macros, the day rule ---------------------------------------------


def test_each_skipped_time_fires_after_the_jump() -> None:
    c = cadence(cron="15,45 2 * * *", timezone="Europe/Paris")
    jump = ms(2026, 3, 29, 3, zone="Europe/Paris")
    assert c.ticks(ms(2026, 3, 29, 0, zone="Europe/Paris"), 3) == [
        jump, jump + 1, ms(2026, 3, 30, 2, 15, zone="Europe/Paris"),
    ]  # fmt: skip
    rows = preview(c, ms(2026, 3, 29, 0, zone="Europe/Paris"), 3)
    assert [r.note for r in rows] == [
        "02:15 does not exist (clocks jump forward) → fires 03:00",
        "02:45 does not exist (clocks jump forward) → fires 03:00",
        "",
    ]
    assert [run_input(c, [t])["tick"] for t in (jump, jump + 1)] == [
        "2026-03-29T03:00:00+02:00", "2026-03-29T03:00:00.001+02:00",
    ]  # fmt: skip


def test_the_skipped_hour_and_the_next_both_fire_after_the_jump() -> None:
    c = cadence(cron="0 1-3 * * *", timezone="Europe/Paris")
    rows = preview(c, ms(2026, 3, 29, 0, zone="Europe/Paris"), 4)
    assert wall(c, [r.tick_ms for r in rows]) == [
        "03-29 01:00 CET", "03-29 03:00 CEST", "03-29 03:00 CEST", "03-30 01:00 CEST",
    ]  # fmt: skip
    assert rows[1].tick_ms + 1 == rows[2].tick_ms
    assert rows[1].note == "02:00 does not exist (clocks jump forward) → fires 03:00"
    assert rows[2].note == "03:00, after the skipped 02:00 (clocks jump forward)"


def test_a_wildcard_job_notes_the_times_it_skips() -> None:
    c = cadence(cron="*/30 * * * *", timezone="Europe/Paris")
    rows = preview(c, ms(2026, 3, 29, 1, 0, zone="Europe/Paris"), 2)
    assert wall(c, [r.tick_ms for r in rows]) == ["03-29 01:30 CET", "03-29 03:00 CEST"]
    assert rows[1].note.startswith("02:00, 02:30 did not exist (clocks jumped forward): not run")


def test_a_wildcard_hour_runs_by_the_real_clock_after_a_half_hour_fall_back() -> None:
    """Lord Howe goes back 30 minutes at 02:00 (+11 → +10:30): 02:00 +10:30 happens once."""
    c = cadence(cron="0 */2 * * *", timezone="Australia/Lord_Howe")
    start = ms(2026, 4, 4, 23, 0, zone="Australia/Lord_Howe")
    assert wall(c, c.ticks(start, 2)) == ["04-05 00:00 +11", "04-05 02:00 +1030"]


@pytest.mark.parametrize(
    ("macro", "fields"),
    [("@yearly", "0 0 1 1 *"), ("@annually", "0 0 1 1 *"), ("@monthly", "0 0 1 * *"),
     ("@weekly", "0 0 * * 0"), ("@daily", "0 0 * * *"), ("@midnight", "0 0 * * *"),
     ("@hourly", "0 * * * *")],
)  # fmt: skip
def test_macros_tick_as_their_fields(macro: str, fields: str) -> None:
    start = ms(2026, 3, 1, zone="Europe/Paris")
    ours = cadence(cron=macro, timezone="Europe/Paris").ticks(start, 30)
    assert ours == cadence(cron=fields, timezone="Europe/Paris").ticks(start, 30)


def test_both_day_fields_one_starting_with_a_star_is_their_intersection() -> None:
    """``0 0 */2 * 1``: odd-dated Mondays (Debian cron: AND when a field starts with *)."""
    c = cadence(cron="0 0 */2 * 1")
    days = [local(t, c.zone).date() for t in c.ticks(ms(2026, 1, 1), 6)]
    assert all(d.isoweekday() == 1 and d.day % 2 == 1 for d in days)
    assert [d.isoformat() for d in days[:3]] == ["2026-01-05", "2026-01-19", "2026-02-09"]


@pytest.mark.parametrize("mode", ["none", "latest", "all", "coalesce"])
def test_the_ticks_of_one_jump_are_all_on_time(mode: str) -> None:
    """At 03:00 the 02:15 and 02:45 ticks are due together: neither is late, both run."""
    c = cadence(cron="15,45 2 * * *", timezone="Europe/Paris", catchup=mode)
    jump = ms(2026, 3, 29, 3, zone="Europe/Paris")
    p = plan(c, jump, jump + 5000)
    assert p.runs == [[jump], [jump + 1]]
    assert (p.missed, p.due, p.late) == (0, 2, 0)
    assert p.next_tick == ms(2026, 3, 30, 2, 15, zone="Europe/Paris")


def test_late_ticks_of_a_jump_follow_the_catchup_policy() -> None:
    jump = ms(2026, 3, 29, 3, zone="Europe/Paris")
    later = jump + 2 * HOUR  # a scheduler back two hours later: both ticks late
    latest = plan(cadence(cron="15,45 2 * * *", timezone="Europe/Paris", catchup_window="3h"),
                  jump, later)  # fmt: skip
    assert latest.runs == [[jump], [jump + 1]] and latest.missed == 0
    none = plan(cadence(cron="15,45 2 * * *", timezone="Europe/Paris", catchup="none"),
                jump, later)  # fmt: skip
    assert none.runs == [] and none.missed == 2
    one = plan(cadence(cron="0 1-3 * * *", timezone="Europe/Paris", catchup="latest"),
               ms(2026, 3, 29, 1, zone="Europe/Paris"), jump + 1000)  # fmt: skip
    assert one.runs == [[jump], [jump + 1]] and one.missed == 1  # 01:00 is late
