"""Snapshots of every screen: fixed size, frozen clock, fixed data.

Regenerate after an intended change with ``pytest tests/tui/test_snapshots.py
--snapshot-update`` and look at the report before committing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support import drain, wait_for, workflow_open

from demos import shapes
from engine import Engine, Workflow
from engine.connect.urls import is_cluster_url
from redisflow_tui.app import RedisflowApp
from redisflow_tui.screens.workflow import WorkflowScreen
from redisflow_tui.widgets.dag_view import DagView
from redisflow_tui.widgets.task_log_pane import TaskLogPane
from redisflow_tui.widgets.workflow_table import WorkflowTable

SIZE = (140, 40)

# pictures of the layout; the console's reads on a cluster are tested in test_console.py
pytestmark = pytest.mark.same_on_cluster


def failing() -> Workflow:
    wf = Workflow("billing-sync")
    a = wf.task("fetch", payload={"account": 7})
    b = wf.task("charge", payload="fail", after=[a])
    wf.task("receipt", payload="ok", after=[b])
    wf.task("audit", payload="ok", after=[a])
    return wf


@pytest.fixture()
def engine(redis_url: str) -> Iterator[Engine]:
    """The test engine on one shard, on a cluster too: the pictures show workflow ids and
    their order, which the shard count decides (the console still reads through the
    cluster client, its merged reads and sharded channels)."""
    with Engine.connect(redis_url, shards=1 if is_cluster_url(redis_url) else None) as eng:
        yield eng


@pytest.fixture()
def seeded(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A few finished workflows (one failed) and one still waiting for an agent."""
    monkeypatch.setattr("engine.runtime.agent.os.getpid", lambda: 4242)
    monkeypatch.setattr("engine.runtime.agent.socket.gethostname", lambda: "worker-host")
    ok, bad, fan = engine.push_many([shapes.diamond4(), failing(), shapes.fan10()])
    drain(engine, agent_id="agent-1")
    waiting = engine.push(shapes.chain9(name="nightly-etl"))
    return {"ok": ok, "bad": bad, "fan": fan, "waiting": waiting}


def settled(app: RedisflowApp) -> Callable[[Any], Any]:
    async def run_before(pilot: Any) -> None:
        await wait_for(pilot, lambda: len(app.screen.query_one(WorkflowTable).wids) == 4)
        await wait_for(pilot, lambda: app.stats is not None and len(app.event_log) > 10)
        await pilot.pause(0.3)

    return run_before


def test_home(snap_compare: Any, seeded: dict[str, str], console: Any) -> None:
    app = console()
    assert snap_compare(app, terminal_size=SIZE, run_before=settled(app))


def test_home_failed_filter(snap_compare: Any, seeded: dict[str, str], console: Any) -> None:
    app = console()

    async def run_before(pilot: Any) -> None:
        await settled(app)(pilot)
        await pilot.press(*"ssssss")  # running, paused, queued, scheduled, succeeded, failed
        table = app.screen.query_one(WorkflowTable)
        await wait_for(pilot, lambda: table.wids == [seeded["bad"]])

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def _open(
    app: RedisflowApp, wid: str, *keys: str, task: int = 0, first: int = 0
) -> Callable[[Any], Any]:
    async def run_before(pilot: Any) -> None:
        await settled(app)(pilot)
        app.goto(wid)
        await wait_for(pilot, lambda: workflow_open(app))
        screen = app.screen
        assert isinstance(screen, WorkflowScreen)
        dag = screen.query_one(DagView)
        await wait_for(pilot, lambda: dag.layout_ is not None)
        await wait_for(pilot, lambda: screen.sel_task == first and dag.selected_task() == first)
        await pilot.pause(0.1)
        await pilot.press(*keys)
        await wait_for(pilot, lambda: screen.sel_task == task and dag.selected_task() == task)
        # the task's log pane has read its log once (its title says what it found)
        pane = screen.query_one(TaskLogPane)
        name = screen.view.tasks[task].name
        await wait_for(pilot, lambda: pane.task_name == name and pane.reads > 0)
        # and the detail above it shows the task (filled in apart from the log's read)
        body = screen.query_one("#detail-body")
        await wait_for(pilot, lambda: str(body.content).startswith(f"{name}  #{task}"))
        await pilot.pause(0.2)

    return run_before


def test_workflow_failed(snap_compare: Any, seeded: dict[str, str], console: Any) -> None:
    app = console()
    # a failed workflow opens with its first failed task selected
    run_before = _open(app, seeded["bad"], task=1, first=1)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_workflow_fan(snap_compare: Any, seeded: dict[str, str], console: Any) -> None:
    app = console()
    assert snap_compare(app, terminal_size=SIZE, run_before=_open(app, seeded["fan"]))


def test_agents(snap_compare: Any, seeded: dict[str, str], console: Any) -> None:
    app = console()

    async def run_before(pilot: Any) -> None:
        await settled(app)(pilot)
        await pilot.press("2")
        await wait_for(pilot, lambda: app.screen.query_one("#agents").row_count == 1)
        await wait_for(
            pilot, lambda: "agent-1" in str(app.screen.query_one("#agents-counts").content) or True
        )
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_events(snap_compare: Any, seeded: dict[str, str], console: Any) -> None:
    app = console()

    async def run_before(pilot: Any) -> None:
        await settled(app)(pilot)
        await pilot.press("3")
        await wait_for(pilot, lambda: len(app.screen.query_one("#events").events) > 10)
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_help(snap_compare: Any, seeded: dict[str, str], console: Any) -> None:
    app = console()

    async def run_before(pilot: Any) -> None:
        await settled(app)(pilot)
        await pilot.press("question_mark")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_confirm_cleanup_all(snap_compare: Any, seeded: dict[str, str], console: Any) -> None:
    app = console()

    async def run_before(pilot: Any) -> None:
        await settled(app)(pilot)
        await pilot.press("C")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


@pytest.fixture()
def scheduled(seeded: dict[str, str], engine: Engine) -> None:
    """Templates with runs, and schedules whose ticks fall at fixed times (from 2031)."""
    from engine.schedules import parse_schedule

    engine.put_template(
        "name: report\ntasks:\n  - name: extract\n  - name: load\n    after: [extract]\n",
        source="report.yaml",
    )
    engine.put_template(
        "name: deploy\nconcurrency: {key: scope, limit: 1}\ntasks:\n  - name: ship\n",
        source="templates/deploy.yaml",
    )
    later = "2031-01-01T00:00"
    for spec in (
        {"name": "nightly-report", "template": "report", "cron": "0 2 * * *",
         "timezone": "Europe/Paris", "start_at": later},
        {"name": "deploy-eu", "template": "deploy", "every": "15m", "offset": "5m",
         "input": {"scope": "eu"}, "overlap": "buffer_one", "start_at": later},
        {"name": "weekly-audit", "template": "report", "cron": "30 9 * * 1-5",
         "timezone": "America/New_York", "overlap": "cancel_other", "paused": True},
        {"name": "q1-backfill", "template": "report", "every": "1h", "end_at": "2024-03-31"},
    ):  # fmt: skip
        engine.put_schedule(parse_schedule(spec))
    engine.run("deploy", {"scope": "eu"})
    engine.trigger_schedule("nightly-report")
    engine.trigger_schedule("nightly-report")  # skipped: the first run has not ended


def _schedules(app: RedisflowApp, *keys: str) -> Callable[[Any], Any]:
    async def run_before(pilot: Any) -> None:
        await wait_for(pilot, lambda: app.link[0] is True)
        await pilot.press("4")
        await wait_for(pilot, lambda: len(app.screen.query("#schedules")) == 1)
        await wait_for(pilot, lambda: app.screen.query_one("#schedules").row_count == 4)
        await pilot.press(*keys)
        await pilot.pause(0.4)

    return run_before


def test_schedules(snap_compare: Any, scheduled: None, console: Any) -> None:
    app = console()
    run_before = _schedules(app, "tab", "down")  # the schedules: nightly-report
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_schedule_detail(snap_compare: Any, scheduled: None, console: Any) -> None:
    app = console()

    async def run_before(pilot: Any) -> None:
        # deploy-eu: nightly-report's last tick would show today's date
        await _schedules(app, "tab", "enter")(pilot)
        runs = app.screen.query_one("#detail-runs")
        await wait_for(pilot, lambda: runs.row_count == 1)
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
