"""Workflows pushed to start later (push --at / --in): scheduled, visible, cancellable,
started by any agent when due, and kept across a Redis restart."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta

import pytest
from engine_helpers import Hand, assert_stats_agree, cli, one_line_error, run_agent, snapshot

from engine import DefinitionError, EmbeddedRedis, Engine, StateError, Task, Workflow
from engine.core.timing import parse_duration, parse_time


def two() -> Workflow:
    wf = Workflow("later")
    a = wf.task("a")
    wf.task("b", after=[a])
    return wf


def names(engine: Engine, wid: str) -> dict[str, str]:
    return {t.name: t.state.value for t in engine.status(wid).tasks}


def test_a_scheduled_workflow_waits_then_runs(engine: Engine) -> None:
    wid = engine.push(two(), start_in=1.0)
    st = engine.status(wid)
    assert st.state == "scheduled" and st.start_at is not None
    assert 0.5 < st.start_at - time.time() <= 1.2
    assert engine.redis.zcard(engine.keys.shard_of(wid).queue("")) == 0  # nothing to claim yet
    assert engine.count("scheduled") == 1
    ran: list[str] = []
    run_agent(engine, {"": lambda t: ran.append(t.name)})  # nothing now: it is not due
    assert ran == [] and engine.state(wid) == "scheduled"
    time.sleep(1.1)
    engine.maintain()  # any agent's housekeeping starts it once due
    run_agent(engine, {"": lambda t: ran.append(t.name)})
    assert ran == ["a", "b"]
    st = engine.status(wid)
    assert st.state == "succeeded" and st.start_at is None
    assert_stats_agree(engine)
    kinds = [e.kind for e in engine.events(50) if e.wid == wid]
    assert "workflow.started" in kinds


def test_release_starts_it_now_and_cancel_drops_it(engine: Engine) -> None:
    now = engine.push(two(), start_at=datetime.now().astimezone() + timedelta(hours=1))
    never = engine.push(two(), start_in=3600)
    with pytest.raises(StateError, match="only a running workflow can be paused"):
        engine.pause(now)
    assert engine.release(now) == 1
    assert engine.state(now) == "running"
    assert engine.cancel(never) == 2
    assert engine.state(never) == "cancelled"
    assert sum(engine.redis.zcard(s.scheduled) for s in engine.keys.all_shards()) == 0
    run_agent(engine, {"": lambda t: None})
    assert engine.state(now) == "succeeded"
    assert_stats_agree(engine)


def test_bad_start_times_are_refused_before_anything_is_written(engine: Engine) -> None:
    before = snapshot(engine.redis)
    for kwargs, says in (
        ({"start_in": -1}, "must not be negative"),
        ({"start_in": "10m"}, "start_in must be a number of seconds"),
        ({"start_at": datetime.now().astimezone() - timedelta(hours=2)}, "is in the past"),
        ({"start_in": 400 * 86400}, "more than a year away"),
        ({"start_in": 5, "start_at": datetime.now().astimezone()}, "not both"),
    ):
        with pytest.raises(DefinitionError, match=says):
            engine.push(two(), **kwargs)
    assert snapshot(engine.redis) == before


def test_times_and_durations_as_written() -> None:
    assert parse_duration("1h30m") == 5400 and parse_duration("90") == 90
    assert parse_duration("500ms") == 0.5 and parse_duration("2d") == 172800
    for bad in ("", "ten", "5x", "1h-3m", "-5"):
        with pytest.raises(DefinitionError):
            parse_duration(bad)
    now = datetime(2026, 11, 22, 21, 0).astimezone()
    assert parse_time("22:30", now) == now.replace(hour=22, minute=30)
    assert parse_time("20:30", now) == now.replace(hour=20, minute=30) + timedelta(days=1)
    assert parse_time("2026-12-01T06:00Z", now).isoformat() == "2026-12-01T06:00:00+00:00"
    with pytest.raises(DefinitionError, match="is not a time"):
        parse_time("next tuesday", now)


def test_push_at_and_in_through_the_cli(engine: Engine, cli_env: dict, tmp_path) -> None:
    f = tmp_path / "w.yaml"
    f.write_text("name: later\ntasks:\n  - name: a\n")
    wid = cli("push", str(f), "--in", "10m", env=cli_env).stdout.strip()
    status = cli("status", wid, env=cli_env).stdout
    assert "scheduled" in status and "starts " in status and "(in 10m)" in status
    shown = json.loads(cli("status", wid, "--json", env=cli_env).stdout)
    assert shown["state"] == "scheduled"
    bad = cli("push", str(f), "--at", "next tuesday", env=cli_env)
    assert bad.returncode == 2 and "is not a time" in one_line_error(bad)
    both = cli("push", str(f), "--at", "06:00", "--in", "5m", env=cli_env)
    assert both.returncode == 2 and "not allowed with" in both.stderr
    assert cli("cancel", wid, env=cli_env).returncode == 0
    assert engine.state(wid) == "cancelled"


def test_a_scheduled_workflow_survives_a_redis_restart(tmp_path) -> None:
    aof = ["--dir", str(tmp_path), "--appendonly", "yes", "--appendfsync", "always"]
    server = EmbeddedRedis(extra_args=aof).start()
    engine = Engine.connect(server.url)
    again = None
    try:
        wid = engine.push(two(), start_in=1.0)
        server.stop()
        again = EmbeddedRedis(port=server.port, extra_args=aof).start()
        assert engine.state(wid) == "scheduled"
        time.sleep(1.1)
        engine.maintain()
        done: list[Task] = []
        run_agent(engine, {"": done.append})
        assert engine.state(wid) == "succeeded" and len(done) == 2
    finally:
        engine.close()
        server.stop()
        if again is not None:
            again.stop()


def test_a_delayed_task_survives_a_redis_restart(tmp_path) -> None:
    aof = ["--dir", str(tmp_path), "--appendonly", "yes", "--appendfsync", "always"]
    server = EmbeddedRedis(extra_args=aof).start()
    engine = Engine.connect(server.url)
    again = None
    try:
        wf = Workflow("held")
        a = wf.task("a")
        wf.task("b", after=[a], delay=0.5)
        wid = engine.push(wf)
        hand = Hand(engine)
        [first] = hand.claim()
        hand.succeed(first)  # a ran; b is held for its delay
        assert names(engine, wid) == {"a": "succeeded", "b": "ready"}
        assert hand.claim() == []
        server.stop()
        again = EmbeddedRedis(port=server.port, extra_args=aof).start()
        time.sleep(0.55)
        done: list[Task] = []
        run_agent(engine, {"": done.append})
        assert [t.name for t in done] == ["b"] and engine.state(wid) == "succeeded"
    finally:
        engine.close()
        server.stop()
        if again is not None:
            again.stop()
