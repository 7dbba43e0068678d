"""The data layer without an app: rates, the event log, pages and action plans."""

from __future__ import annotations

import pytest
from support import drain

from demos import shapes
from engine import Engine, Event, WorkflowState
from redisflow_tui.data import actions
from redisflow_tui.data.clock import Clock, format_age, format_duration
from redisflow_tui.data.events import EventLog, detail
from redisflow_tui.data.home import WORKFLOW_STATES, HomeQuery, progress_bar, read_page
from redisflow_tui.data.rates import Rates


def test_rates_per_second_and_queue() -> None:
    r = Rates(window_s=10)
    r.add_finished({100: 4, 101: 6, 50: 9})
    r.sample_queue(100.2, 30)
    r.sample_queue(103.9, 10)
    series = r.throughput(now=105.5)
    assert series == [0, 0, 0, 0, 0, 4, 6, 0, 0, 0]
    assert r.queue(now=105.5)[-6:] == [30, 30, 30, 10, 10, 10]
    assert r.rate(105.5, seconds=5) == pytest.approx(2.0)
    r.load_history([Event("task.succeeded", "1", 104.2, 0), Event("task.failed", "1", 104.7, 1)])
    assert r.throughput(105.5)[-1] == 2


def test_event_log_history_live_freeze_filter() -> None:
    log = EventLog(capacity=5)
    live = Event("task.claimed", "3", 12.0, 1, {"agent": "a"})
    log.add_live([live])
    history = [
        Event("task.claimed", "3", 12.0, 1, {"agent": "a"}, id="2-0"),
        Event("workflow.pushed", "3", 11.0, None, {"name": "etl"}, id="1-0"),
    ]
    log.load_history(history)
    assert [e.id for e in log.view()] == ["2-0", "1-0"]  # the live copy is dropped
    log.freeze(True)
    log.add_live([Event("task.failed", "3", 13.0, 1, {"error": "Boom\nValueError: bad"})])
    assert len(log.view()) == 2 and log.missed == 1
    log.freeze(False)
    assert log.view()[0].kind == "task.failed"
    assert [e.kind for e in log.view("etl")] == ["workflow.pushed"]
    assert [e.kind for e in log.view("failed 3")] == ["task.failed"]
    assert detail(log.view()[0]) == "ValueError: bad"


def test_a_signal_event_shows_what_reached_what_and_who_sent_it() -> None:
    sent = {"signal": "approve", "outcome": "delivered", "task": "gate", "by": "alice"}
    assert detail(Event("workflow.signal", "3", 1.0, None, {**sent, "identity": "alice"})) == (
        "approve delivered → gate by alice"
    )
    kept = {"signal": "paid", "outcome": "kept", "by": "bob", "identity": "token ci"}
    assert (
        detail(Event("workflow.signal", "3", 1.0, None, kept)) == "paid kept by bob (as token ci)"
    )


def test_formatting() -> None:
    assert [format_age(s) for s in (3, 75, 7300, 200000, None)] == ["3s", "1m", "2h", "2d", "-"]
    assert format_duration(0.0456) == "46ms" and format_duration(125) == "2m05s"
    assert Clock().since(10.0, 11.5) == "1.5s"
    assert progress_bar(5, 1, 10, 10) == ("█████", "█", "····")
    assert progress_bar(0, 0, 0, 4) == ("", "", "····")


def test_home_query_cycles_states() -> None:
    q = HomeQuery()
    seen = []
    for _ in range(8):
        q = q.next_state()
        seen.append(q.state)
    # the totals line's order: live, waiting to start, ended; every state once
    assert sorted(WORKFLOW_STATES) == sorted(s.value for s in WorkflowState)
    assert seen == [
        "running", "paused", "queued", "scheduled", "succeeded", "failed", "cancelled", None,
    ]  # fmt: skip
    assert HomeQuery(state="failed", name="etl").describe() == 'failed workflows named "etl"'


def test_read_page_clamps_and_counts(engine: Engine) -> None:
    ids = engine.push_many([shapes.diamond4() for _ in range(7)])
    page = read_page(engine, HomeQuery(page=3, size=3))
    assert page.query.page == 2 and [w.id for w in page.rows] == [ids[0]]
    assert page.matching == 7 and page.pages == 3 and page.stats is not None


def test_action_plans_say_what_and_how_many(engine: Engine) -> None:
    wid = engine.push(shapes.fan10())
    plan = actions.plan_cancel(engine, wid)
    assert "10 tasks not yet started will be cancelled" in plan.body
    assert plan.run(engine) == f"Cancelled workflow {wid}: 10 tasks cancelled"
    assert "Clean up 1 finished workflow?" == actions.plan_cleanup_finished(engine).title
    assert actions.pause(engine, engine.push(shapes.chain9())).endswith("1 ready task held back")
    drain(engine)
    done = actions.plan_cleanup_finished(engine)
    assert "(0 succeeded, 0 failed, 1 cancelled)" in done.body
    assert done.run(engine) == "Cleaned up 1 finished workflow"
