"""Schedules on a real Redis: put / pause / unpause / rm, the tick's compare-and-set and
dedup, each overlap policy, each catch-up mode, trigger, backfill, pause_on_failure."""

from __future__ import annotations

import json
from typing import Any

import pytest
from engine_helpers import Hand, assert_stats_agree, snapshot

from engine import Engine
from engine.errors import NotFoundError
from engine.schedules import parse_schedule
from engine.schedules.scheduler import Scheduler, Ticker
from engine.store.schedules import ScheduleTick

HOUR = 3_600_000
TEMPLATE = "name: job\ntasks:\n  - name: work\n"


@pytest.fixture()
def eng(engine: Engine) -> Engine:
    engine.put_template(TEMPLATE, name="job")
    return engine


def put(engine: Engine, name: str = "s", **settings: Any) -> None:
    if "cron" not in settings:
        settings.setdefault("every", "1h")
    engine.put_schedule(parse_schedule({"name": name, "template": "job", **settings}))


def set_due(engine: Engine, name: str, tick: int) -> None:
    """Make the schedule's next tick ``tick`` (no jitter: due then too)."""
    shard = engine.keys.shard_of_schedule(name)
    engine.redis.hset(shard.schedule(name), mapping={"nt": tick, "nx": tick})
    engine.redis.zadd(shard.schedules_due, {name: tick})


def runs_of(engine: Engine, name: str = "s") -> list[Any]:
    """The schedule's runs, oldest first, with their status."""
    out = [engine.status(w.id) for w in engine.list(limit=1000)]
    return sorted((s for s in out if s.input and s.input.get("schedule") == name),
                  key=lambda s: int(s.id))  # fmt: skip


def states(engine: Engine, name: str = "s") -> list[str]:
    return [r.state.value for r in runs_of(engine, name)]


# -- storing -------------------------------------------------------------------------------


def test_put_list_update_remove(eng: Engine) -> None:
    put(eng, "a", cron="0 2 * * *", timezone="Europe/Paris")
    put(eng, "b", every="15m")
    infos = eng.schedules()
    assert [i.name for i in infos] == ["a", "b"]
    now = eng.server_time()
    a = eng.schedule("a")
    assert a.when == "cron 0 2 * * *" and a.timezone == "Europe/Paris"
    assert a.next_due is not None and now < a.next_due <= now + 86400
    assert (a.runs, a.skipped, a.missed, a.paused, a.last_run) == (0, 0, 0, False, None)
    assert a.description.endswith("(Europe/Paris)")
    before = eng.schedule("b").next_due
    put(eng, "b", every="1m")  # an update: the next due time is computed again
    b = eng.schedule("b")
    assert b.when == "every 1m" and b.next_due is not None and b.next_due <= (before or 0)
    row = eng.store.schedules.schedule_row("b")
    assert row is not None and row["v"] == "2"
    eng.remove_schedule("a")
    assert [i.name for i in eng.schedules()] == ["b"]
    with pytest.raises(NotFoundError):
        eng.schedule("a")
    with pytest.raises(NotFoundError):
        eng.pause_schedule("a")


def test_unknown_template_writes_nothing(engine: Engine) -> None:
    before = snapshot(engine.redis)  # empty but for a cluster's stored layout
    with pytest.raises(NotFoundError, match="nope"):
        engine.put_schedule(parse_schedule({"name": "s", "template": "nope", "every": "1h"}))
    assert engine.schedules() == []
    assert snapshot(engine.redis) == before


def test_pause_and_unpause_from_now_or_catching_up(eng: Engine) -> None:
    put(eng, every="1h", catchup="all", overlap="allow_all")
    assert eng.pause_schedule("s") and not eng.pause_schedule("s")
    shard = eng.keys.shard_of_schedule("s")
    assert eng.redis.zscore(shard.schedules_due, "s") is None
    assert eng.schedule("s").paused and eng.schedule("s").next_due is None
    now = eng.store.now_ms()
    old = (now // HOUR - 3) * HOUR
    eng.redis.hset(shard.schedule("s"), mapping={"nt": old, "nx": old})  # paused 3 h
    assert eng.unpause_schedule("s") and not eng.unpause_schedule("s")
    nxt = eng.schedule("s").next_due
    assert nxt is not None and nxt * 1000 > now  # from now: nothing to catch up
    assert Scheduler(eng).run_due() == 0
    eng.pause_schedule("s")
    eng.redis.hset(shard.schedule("s"), mapping={"nt": old, "nx": old})
    eng.unpause_schedule("s", catchup=True)
    assert Scheduler(eng).run_due() == 1
    assert len(runs_of(eng)) == 4  # the 3 missed hours and the current one


# -- exactly once --------------------------------------------------------------------------


def test_two_schedulers_planning_the_same_tick_fire_it_once(eng: Engine) -> None:
    put(eng, overlap="allow_all")
    tick = (eng.store.now_ms() // HOUR) * HOUR
    set_due(eng, "s", tick)
    shard = eng.keys.shard_of_schedule("s")
    now, due, _ = eng.store.schedules.due_schedules(shard, 10)
    [head] = eng.store.schedules.schedule_heads(shard, due)
    calls = []
    for who in ("one", "two"):
        ticker = Ticker(eng, who)
        part = ticker.due_part(head, now)
        assert part is not None
        calls.append(ticker.call(shard, "due", [part], {}))
    [first], [second] = (eng.store.scripts.run(c) for c in calls)
    assert first.status == "ok" and first.outcomes[0].what == "fired"
    assert second.status == "taken"
    assert len(runs_of(eng)) == 1
    assert eng.store.schedules.fired_ticks("s") == [tick]
    assert eng.schedule("s").next_due == (tick + HOUR) / 1000


def test_a_plan_from_an_old_version_is_refused(eng: Engine) -> None:
    put(eng, overlap="allow_all")
    set_due(eng, "s", (eng.store.now_ms() // HOUR) * HOUR)
    shard = eng.keys.shard_of_schedule("s")
    now, due, _ = eng.store.schedules.due_schedules(shard, 10)
    ticker = Ticker(eng, "one")
    part = ticker.due_part(eng.store.schedules.schedule_heads(shard, due)[0], now)
    assert part is not None
    call = ticker.call(shard, "due", [part], {})
    put(eng, overlap="allow_all", input={"changed": True})
    [result] = eng.store.scripts.run(call)
    assert result.status == "taken"
    assert runs_of(eng) == []


def test_a_call_before_its_due_time_is_refused(eng: Engine) -> None:
    put(eng, overlap="allow_all")
    future = eng.store.now_ms() + 10 * HOUR
    set_due(eng, "s", future)
    shard = eng.keys.shard_of_schedule("s")
    prefix = eng.store.calls.push_argv(shard, [], "x", 0)[:-1]
    tick = ScheduleTick("s", "1", "allow_all", expected_due=future, next_tick=future + HOUR,
                        next_due=future + HOUR)  # fmt: skip
    [result] = eng.store.scripts.run(eng.store.schedules.tick_call(shard, "due", prefix, [tick]))
    assert result.status == "early"
    assert eng.schedule("s").next_due == future / 1000


def test_a_tick_backfilled_first_is_not_run_again(eng: Engine) -> None:
    put(eng, overlap="allow_all", catchup="all")
    tick = (eng.store.now_ms() // HOUR) * HOUR - HOUR
    [o] = Ticker(eng, "me").fire("s", "backfill", [tick])
    assert o.what == "fired"
    set_due(eng, "s", tick)  # the schedule comes to the same tick later
    assert Scheduler(eng).run_due() == 1
    # the backfilled tick once, the current hour's once
    assert eng.store.schedules.fired_ticks("s") == [tick, tick + HOUR]
    assert len(runs_of(eng)) == 2
    assert eng.schedule("s").next_due == (tick + 2 * HOUR) / 1000


# -- overlap -------------------------------------------------------------------------------


def test_skip(eng: Engine) -> None:
    put(eng, overlap="skip")
    assert eng.trigger_schedule("s").what == "fired"
    assert eng.trigger_schedule("s").what == "skipped"
    assert (eng.schedule("s").runs, eng.schedule("s").skipped) == (1, 1)
    [first] = runs_of(eng)
    eng.cancel(first.id)
    assert eng.trigger_schedule("s").what == "fired"  # the gate is free again
    assert states(eng) == ["cancelled", "running"]
    kinds = [e.kind for e in eng.events(50) if e.kind.startswith("schedule.")]
    assert kinds.count("schedule.skipped") == 1 and kinds.count("schedule.fired") == 2


def test_buffer_one_starts_when_the_previous_run_ends(eng: Engine) -> None:
    put(eng, overlap="buffer_one")
    whats = [eng.trigger_schedule("s").what for _ in range(3)]
    assert whats == ["fired", "buffered", "skipped"]
    assert states(eng) == ["running", "queued"]
    hand = Hand(eng)
    hand.succeed(hand.claim_one())  # the first run ends: the buffered one starts at once
    assert states(eng) == ["succeeded", "running"]
    info = eng.schedule("s")
    assert (info.runs, info.buffered, info.skipped) == (2, 1, 1)
    assert_stats_agree(eng)


def test_buffer_all_queues_them_in_order(eng: Engine) -> None:
    put(eng, overlap="buffer_all")
    whats = [eng.trigger_schedule("s").what for _ in range(4)]
    assert whats == ["fired", "buffered", "buffered", "buffered"]
    hand = Hand(eng)
    for _ in range(3):
        hand.succeed(hand.claim_one())
        assert states(eng).count("running") == 1
    assert states(eng) == ["succeeded", "succeeded", "succeeded", "running"]


def test_cancel_other(eng: Engine) -> None:
    put(eng, overlap="cancel_other")
    assert [eng.trigger_schedule("s").what for _ in range(3)] == ["fired"] * 3
    assert states(eng) == ["cancelled", "cancelled", "running"]
    assert_stats_agree(eng)


def test_allow_all(eng: Engine) -> None:
    put(eng, overlap="allow_all")
    assert [eng.trigger_schedule("s").what for _ in range(3)] == ["fired"] * 3
    assert states(eng) == ["running"] * 3
    assert eng.schedule("s").last_run == runs_of(eng)[-1].id


def test_two_triggers_in_one_millisecond_are_two_runs(
    eng: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trigger is a request of its own: a clock that reads the same millisecond twice
    (fixed here) does not make the second one a dup."""
    put(eng, overlap="allow_all")
    at = eng.store.now_ms()
    monkeypatch.setattr(eng.store, "now_ms", lambda: at)
    outcomes = [eng.trigger_schedule("s") for _ in range(3)]
    assert [o.what for o in outcomes] == ["fired"] * 3
    assert len({o.run for o in outcomes}) == 3
    assert states(eng) == ["running"] * 3
    assert eng.schedule("s").runs == 3


# -- catch-up: a due time hours in the past -------------------------------------------------


def overdue(eng: Engine, catchup: str, overlap: str = "allow_all", **more: Any) -> int:
    """An hourly schedule whose newest due tick was 10 minutes ago, due 5 h 10 min ago
    (six ticks due). Returns the newest tick."""
    now = eng.store.now_ms()
    newest = now - 10 * 60_000
    put(eng, every="1h", offset=f"{newest % HOUR}ms", catchup=catchup, overlap=overlap, **more)
    set_due(eng, "s", newest - 5 * HOUR)
    Scheduler(eng).run_due()
    return newest


def test_catchup_none(eng: Engine) -> None:
    newest = overdue(eng, "none")
    assert runs_of(eng) == []
    info = eng.schedule("s")
    assert info.missed == 6 and info.next_due == (newest + HOUR) / 1000
    [missed] = [e for e in eng.events(20) if e.kind == "schedule.missed"]
    assert missed.data["count"] == 6 and len(missed.data["ticks"]) == 6


def test_catchup_latest(eng: Engine) -> None:
    newest = overdue(eng, "latest")
    [run] = runs_of(eng)
    assert "ticks" not in run.input
    assert eng.store.schedules.fired_ticks("s") == [newest]
    assert eng.schedule("s").missed == 5


def test_catchup_latest_outside_its_window(eng: Engine) -> None:
    overdue(eng, "latest", catchup_window="5m")
    assert runs_of(eng) == [] and eng.schedule("s").missed == 6


def test_catchup_all_with_allow_all_and_with_buffer_all(eng: Engine) -> None:
    newest = overdue(eng, "all")
    assert eng.store.schedules.fired_ticks("s") == [newest - k * HOUR for k in range(5, -1, -1)]
    assert len(runs_of(eng)) == 6 and eng.schedule("s").missed == 0


def test_catchup_all_buffered_run_one_after_another(eng: Engine) -> None:
    overdue(eng, "all", overlap="buffer_all", max_catchup=3)
    assert states(eng) == ["running", "queued", "queued"]
    info = eng.schedule("s")
    assert (info.runs, info.buffered, info.missed) == (3, 2, 3)


def test_catchup_coalesce(eng: Engine) -> None:
    newest = overdue(eng, "coalesce")
    [run] = runs_of(eng)
    assert len(run.input["ticks"]) == 6 and run.input["missed"] == 6
    assert run.input["interval"][1] == run.input["tick"]
    assert eng.store.schedules.fired_ticks("s") == [newest - k * HOUR for k in range(5, -1, -1)]
    assert eng.schedule("s").missed == 0


# -- trigger, backfill, failure ------------------------------------------------------------


def test_backfill_twice_adds_nothing(eng: Engine) -> None:
    from datetime import UTC, datetime

    put(eng, every="1h", overlap="skip")
    now = eng.store.now_ms()
    start = datetime.fromtimestamp((now // HOUR - 6) * HOUR / 1000, UTC)
    end = datetime.fromtimestamp((now // HOUR - 2) * HOUR / 1000, UTC)
    first = eng.backfill_schedule("s", start, end)
    assert [o.what for o in first] == ["fired", "buffered", "buffered", "buffered", "buffered"]
    again = eng.backfill_schedule("s", start, end)
    assert [o.what for o in again] == ["dup"] * 5
    assert len(runs_of(eng)) == 5
    assert states(eng) == ["running"] + ["queued"] * 4


def test_backfill_refuses_the_future(eng: Engine) -> None:
    from datetime import UTC, datetime, timedelta

    from engine.errors import DefinitionError

    put(eng)
    now = datetime.now(UTC)
    with pytest.raises(DefinitionError, match="in the future"):
        eng.backfill_schedule("s", now - timedelta(hours=3), now + timedelta(days=30))
    assert runs_of(eng) == []


def test_pause_on_failure(eng: Engine) -> None:
    put(eng, overlap="allow_all", pause_on_failure=True)
    eng.trigger_schedule("s")
    hand = Hand(eng)
    hand.fail(hand.claim_one())
    info = eng.schedule("s")
    assert info.paused and info.last_state == "failed" and info.last_ended is not None
    shard = eng.keys.shard_of_schedule("s")
    assert eng.redis.zscore(shard.schedules_due, "s") is None
    paused = [e for e in eng.events(20) if e.kind == "schedule.paused"]
    assert paused and paused[0].data["schedule"] == "s"


def test_removing_a_schedule_leaves_its_runs_alone(eng: Engine) -> None:
    put(eng, overlap="skip")
    eng.trigger_schedule("s")
    eng.remove_schedule("s")
    assert states(eng) == ["running"]
    hand = Hand(eng)
    hand.succeed(hand.claim_one())  # its end finds no schedule: nothing breaks
    assert states(eng) == ["succeeded"]
    assert_stats_agree(eng)
    shard = eng.keys.shard_of_schedule("s")
    assert not eng.redis.exists(shard.schedule("s"), shard.schedule_ticks("s"))


def test_events_name_the_schedule_and_tick(eng: Engine) -> None:
    put(eng, overlap="allow_all")
    o = eng.trigger_schedule("s")
    [fired] = [e for e in eng.events(20) if e.kind == "schedule.fired"]
    assert fired.wid == o.run and fired.data == {"schedule": "s", "tick": o.tick}
    assert [e.kind for e in eng.events(20) if e.kind == "schedule.put"] == ["schedule.put"]


def test_the_console_demo_schedules(engine: Engine) -> None:
    from demos.console_demo import put_demo_schedules

    put_demo_schedules(engine)
    infos = {i.name: i for i in engine.schedules()}
    assert set(infos) == {"report-each-minute", "report-every-20s"}
    assert all(i.template == "nightly-report" and i.next_due for i in infos.values())
    o = engine.trigger_schedule("report-every-20s")
    assert o.what == "fired" and engine.status(o.run or "").name == "nightly-report"


def test_a_removed_template_misses_ticks_and_the_schedule_goes_on(eng: Engine) -> None:
    put(eng, overlap="allow_all")
    eng.remove_template("job")
    with pytest.raises(NotFoundError, match="job"):
        eng.trigger_schedule("s")
    tick = (eng.store.now_ms() // HOUR) * HOUR
    set_due(eng, "s", tick)
    assert Scheduler(eng).run_due() == 1
    info = eng.schedule("s")
    assert (info.runs, info.missed, info.next_due) == (0, 1, (tick + HOUR) / 1000)
    eng.put_template(TEMPLATE, name="job")
    assert eng.trigger_schedule("s").what == "fired"


def test_brief_events_of_a_schedule_name_no_workflow(eng: Engine) -> None:
    from engine.store.codec import brief_batch

    put(eng)
    body = eng.redis.xrevrange(eng.keys.shard_of_schedule("s").events, count=1)[0][1]["e"]
    assert list(brief_batch(json.loads(body))) == [("schedule.put", "", -1)]


def test_a_scheduler_reads_a_spec_once_per_version(eng: Engine) -> None:
    # each pass starts an hour earlier: one new tick, the later ones ran (dup)
    put(eng, overlap="allow_all", catchup="all")
    scheduler = Scheduler(eng)
    tick = (eng.store.now_ms() // HOUR) * HOUR
    shard = eng.keys.shard_of_schedule("s")
    for k in range(3):
        set_due(eng, "s", tick - k * HOUR)
        if k == 2:
            put(eng, overlap="allow_all", catchup="all", input={"v": 2})  # read again
            set_due(eng, "s", tick - k * HOUR)
        due = [("s", tick - k * HOUR)]
        [head] = eng.store.schedules.schedule_heads(shard, due, scheduler.ticker.version_of)
        assert (head.spec is None) == (k == 1)
        assert scheduler.run_due() == 1
    inputs = [r.input for r in runs_of(eng)]
    assert [i.get("v") for i in inputs] == [None, None, 2]
    assert eng.store.schedules.fired_ticks("s") == [tick - 2 * HOUR, tick - HOUR, tick]


# -- daylight saving, as Debian cron runs it -----------------------------------------------


def paris_ms(*parts: int) -> int:
    from datetime import datetime
    from zoneinfo import ZoneInfo

    return int(datetime(*parts, tzinfo=ZoneInfo("Europe/Paris")).timestamp() * 1000)


def test_each_time_skipped_by_the_jump_forward_is_its_own_run(eng: Engine) -> None:
    """``15,45 2 * * *`` in Paris on 2026-03-29: 02:15 and 02:45 do not exist; Debian cron
    runs both just after the jump, so two runs at 03:00 (two ticks a millisecond apart)."""
    put(eng, cron="15,45 2 * * *", timezone="Europe/Paris", catchup="all",
        overlap="allow_all", start_at="2026-03-29T00:00", end_at="2026-03-29T12:00")  # fmt: skip
    jump = paris_ms(2026, 3, 29, 3)
    set_due(eng, "s", jump)
    assert Scheduler(eng).run_due() == 1
    assert eng.store.schedules.fired_ticks("s") == [jump, jump + 1]
    assert [r.input["tick"] for r in runs_of(eng)] == [
        "2026-03-29T03:00:00+02:00", "2026-03-29T03:00:00.001+02:00",
    ]  # fmt: skip
    assert eng.schedule("s").runs == 2 and eng.schedule("s").next_due is None


def test_a_backfill_over_the_jump_runs_the_skipped_hour_and_the_next(eng: Engine) -> None:
    """``0 1-3 * * *``: the 02:00 job (skipped) and the 03:00 job both run at 03:00."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    put(eng, cron="0 1-3 * * *", timezone="Europe/Paris")
    paris = ZoneInfo("Europe/Paris")
    start, end = datetime(2026, 3, 29, 0, tzinfo=paris), datetime(2026, 3, 29, 4, tzinfo=paris)
    done = eng.backfill_schedule("s", start, end, "allow_all")
    jump = paris_ms(2026, 3, 29, 3)
    assert [o.tick for o in done] == [paris_ms(2026, 3, 29, 1), jump, jump + 1]
    assert [o.what for o in done] == ["fired"] * 3
    assert [o.what for o in eng.backfill_schedule("s", start, end, "allow_all")] == ["dup"] * 3
    assert len(runs_of(eng)) == 3
