"""The timeline view: one bar per attempt on a time axis, live while the workflow runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from engine_helpers import Hand
from support import wait_for, workflow_open

from engine import Agent, Engine, Task, TaskFailed, Workflow
from redisflow_tui.app import RedisflowApp
from redisflow_tui.screens.timeline import TimelineScreen

# what the console shows and does with its keys: the same on a cluster, whose reads the
# engine's own tests check there
pytestmark = pytest.mark.same_on_cluster

SIZE = (120, 30)


def chart(app: RedisflowApp) -> str:
    return str(app.screen.query_one("#timeline-chart").render())


async def test_attempts_retries_and_lost_leases_show_as_bars(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wf = Workflow("etl", retry_backoff=0.01)
    ex = wf.task("extract")
    tr = wf.task("transform", after=[ex], max_attempts=3)
    wf.task("load", after=[tr])
    wid = engine.push(wf)
    lost = Hand(engine, "doomed")
    [first] = lost.claim()
    lost.expire()
    engine.maintain()  # its lease ran out: extract is handed on (a lost attempt)

    def run(task: Task) -> Any:
        if task.name == "transform" and task.attempt < 3:
            raise TaskFailed("flaky")
        return None

    Agent(engine, "agent-1", {"": run}).run(until_idle=True)
    tl = engine.timeline(wid)
    assert [a.outcome for a in tl.attempts[0]] == ["lost", "succeeded"]
    assert [a.outcome for a in tl.attempts[1]] == ["retried", "retried", "succeeded"]
    assert [a.number for a in tl.attempts[1]] == [1, 2, 3]
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        app.goto(wid)
        await wait_for(pilot, lambda: workflow_open(app))
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, TimelineScreen))
        await wait_for(pilot, lambda: "transform ×3" in chart(app), what="the chart")
        shown = chart(app)
        assert "extract ×2" in shown and "load" in shown and "█" in shown
        assert "failed, retried" in shown and "agent lost" in shown
        await pilot.press("escape")
        await wait_for(pilot, lambda: workflow_open(app))


async def test_a_running_attempt_grows_live(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wf = Workflow("one")
    wf.task("slow")
    wid = engine.push(wf)
    hand = Hand(engine)
    [task] = hand.claim()
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        app.goto(wid)
        await wait_for(pilot, lambda: workflow_open(app))
        await pilot.press("l")
        await wait_for(pilot, lambda: "slow" in chart(app), what="the chart")
        screen = app.screen
        assert isinstance(screen, TimelineScreen) and screen.timeline is not None
        assert [a.outcome for a in screen.timeline.attempts[0]] == ["running"]
        hand.succeed(task, 1)
        await wait_for(
            pilot,
            lambda: [a.outcome for a in screen.timeline.attempts[0]] == ["succeeded"],  # type: ignore[union-attr]
            what="the attempt's end",
        )


async def test_timeouts_delays_and_deadlines_show_the_time_left(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wf = Workflow("limits", deadline=3600)
    a = wf.task("fetch", timeout=30)
    wf.task("later", after=[a], delay=600)
    wid = engine.push(wf)
    hand = Hand(engine)
    [fetch] = hand.claim()
    st = engine.status(wid)
    assert st.deadline is not None and st.task("fetch").timeout == 30.0
    assert st.task("later").delay == 600.0
    app = console()
    async with app.run_test(size=(160, 45)) as pilot:
        app.goto(wid)
        await wait_for(pilot, lambda: workflow_open(app))
        screen = app.screen
        header = lambda: str(screen.query_one("#wf-header").render())  # noqa: E731
        await wait_for(pilot, lambda: "deadline in" in header(), what="the deadline")
        detail = lambda: str(screen.query_one("#detail-body").render())  # noqa: E731
        await wait_for(pilot, lambda: "timeout" in detail(), what="the timeout row")
        assert "30.0s" in detail() or "30s" in detail()
        hand.succeed(fetch, 1)
        await pilot.press("right")
        await wait_for(pilot, lambda: "ready in" in detail(), what="the delay left")
