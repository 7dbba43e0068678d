"""The Templates & Schedules screen driven like an operator would, against a real Redis."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import pytest
from support import wait_for, workflow_open
from textual.pilot import Pilot
from textual.widgets import Input, Static

from engine import DefinitionError, Engine
from engine.schedules import parse_schedule
from redisflow_tui.app import RedisflowApp
from redisflow_tui.data import schedules as sd
from redisflow_tui.screens.catalog_detail import ScheduleDetailScreen
from redisflow_tui.screens.confirm import ConfirmScreen
from redisflow_tui.screens.run_dialogs import RunInputScreen, RunPushedScreen
from redisflow_tui.screens.schedules import SchedulesScreen
from redisflow_tui.widgets.live_table import LiveTable

# what the console shows and does with its keys: the same on a cluster, whose reads the
# engine's own tests check there
pytestmark = pytest.mark.same_on_cluster

SIZE = (160, 45)
REPORT = """\
name: report
tasks:
  - name: extract
  - name: load
    after: [extract]
"""
DEPLOY = """\
name: deploy
concurrency: {key: scope, limit: 1}
tasks:
  - name: ship
"""


def seed(engine: Engine) -> None:
    """Two templates, one run of report by hand, and three schedules (one paused)."""
    engine.put_template(REPORT, source="report.yaml")
    engine.put_template(DEPLOY, source="deploy.yaml")
    engine.run("report", {"by": "hand"})
    for spec in (
        {"name": "nightly", "template": "report", "cron": "0 2 * * *", "timezone": "Europe/Paris"},
        {"name": "deploy-eu", "template": "deploy", "every": "15m", "input": {"scope": "eu"},
         "overlap": "buffer_one"},
        {"name": "weekly", "template": "report", "cron": "30 9 * * 1", "paused": True},
    ):  # fmt: skip
        engine.put_schedule(parse_schedule(spec))


def tables(app: RedisflowApp) -> tuple[LiveTable, LiveTable]:
    screen = app.screen
    return screen.query_one("#templates", LiveTable), screen.query_one("#schedules", LiveTable)


async def open_screen(app: RedisflowApp, pilot: Pilot[None], schedules: int = 3) -> None:
    await pilot.press("4")
    await wait_for(pilot, lambda: isinstance(app.screen, SchedulesScreen))
    await wait_for(
        pilot,
        lambda: tables(app)[0].row_count == 2 and tables(app)[1].row_count == schedules,
        what="both tables",
    )


async def test_lists_templates_and_schedules(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    seed(engine)
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await open_screen(app, pilot)
        templates, schedules = tables(app)
        assert templates.keys == ["deploy", "report"]
        assert [templates.text(1, c) for c in ("version", "runs", "source")] == [
            "v1", "1", "report.yaml",
        ]  # fmt: skip
        assert schedules.keys == ["deploy-eu", "nightly", "weekly"]
        row = {c: schedules.text(1, c) for c, _, _ in schedules.columns}
        assert row["template"] == "report" and row["zone"] == "Europe/Paris"
        assert row["when"].startswith("At 02:00") and "Europe/Paris" not in row["when"]
        assert row["next"].startswith("in ") and row["overlap"] == "skip"
        assert schedules.text(0, "overlap") == "buffer one"
        assert schedules.text(2, "next") == "‖ paused"
        title = str(app.screen.query_one("#schedules-title", Static).content)
        assert "3" in title and "2 active" in title and "1 paused" in title


async def test_run_a_template_with_an_input(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    seed(engine)
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await open_screen(app, pilot)
        await pilot.press("down", "r")  # the templates table has the focus: report
        await wait_for(pilot, lambda: isinstance(app.screen, RunInputScreen))
        await pilot.press(*'{"day": 1,}', "enter")
        error = app.screen.query_one("#dialog-error", Static)
        await wait_for(pilot, lambda: error.has_class("-shown"))
        assert "column 11" in str(error.content)
        assert isinstance(app.screen, RunInputScreen) and engine.count(template="report") == 1
        app.screen.query_one(Input).value = '{"day": 1}'
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunPushedScreen), what="offer")
        offer = app.screen
        assert isinstance(offer, RunPushedScreen)
        wid = offer.wid
        assert engine.status(wid).input == {"day": 1}
        assert engine.count(template="report") == 2
        await pilot.press("o")
        await wait_for(pilot, lambda: workflow_open(app))
        assert app.screen.wid == wid


@pytest.mark.same_on_cluster
async def test_an_empty_input_runs_without_one(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    seed(engine)
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await open_screen(app, pilot)
        await pilot.press("r")  # deploy needs an input field "scope": the engine refuses
        await wait_for(pilot, lambda: isinstance(app.screen, RunInputScreen))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SchedulesScreen))
        await wait_for(pilot, lambda: any("scope" in n.message for n in app._notifications))
        assert engine.count(template="deploy") == 0
        await pilot.press("down", "r", "enter")  # report takes none
        await wait_for(pilot, lambda: isinstance(app.screen, RunPushedScreen))
        assert engine.status(app.screen.wid).input is None
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, SchedulesScreen))


async def test_pause_unpause_and_trigger_ask_first(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    seed(engine)
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await open_screen(app, pilot)
        await pilot.press("tab", "down")  # the schedules table: nightly
        schedules = tables(app)[1]
        assert schedules.cursor_key == "nightly"
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "nightly" in app.screen.title_
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, SchedulesScreen))
        assert not engine.schedule("nightly").paused
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: engine.schedule("nightly").paused, what="paused")
        await wait_for(pilot, lambda: schedules.text(1, "next") == "‖ paused")
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert app.screen.title_.startswith("Unpause")
        await pilot.press("y")
        await wait_for(pilot, lambda: not engine.schedule("nightly").paused, what="unpaused")

        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        body = str(app.screen.body)
        assert "nightly" in body and "skip" in body
        await pilot.press("y")
        await wait_for(pilot, lambda: engine.schedule("nightly").runs == 1, what="triggered")
        run = engine.schedule("nightly").last_run
        await wait_for(pilot, lambda: schedules.text(1, "last").startswith(f"#{run} "))
        assert engine.count(template="report") == 2


async def test_schedule_detail_shows_ticks_and_runs(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    seed(engine)
    engine.trigger_schedule("nightly")
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await open_screen(app, pilot)
        await pilot.press("tab", "down", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ScheduleDetailScreen))
        screen = app.screen
        runs = screen.query_one("#detail-runs", LiveTable)
        await wait_for(pilot, lambda: runs.row_count == 2, what="the template's runs")
        ticks = str(screen.query_one("#detail-ticks", Static).content)
        assert ticks.count("02:00 CE") == sd.TICKS_SHOWN  # CET or CEST, every day at two
        engine.remove_schedule("nightly")
        title = screen.query_one("#detail-title", Static)
        await wait_for(pilot, lambda: "no longer exists" in str(title.content), what="gone")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, SchedulesScreen))


@pytest.mark.same_on_cluster
async def test_read_only_hides_run_pause_and_trigger(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    seed(engine)
    app = console(read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await open_screen(app, pilot)
        await pilot.press("r")
        await pilot.press("tab", "down", "p", "t")
        await pilot.pause(0.3)
        assert isinstance(app.screen, SchedulesScreen)
        shown = {key for key, b in app.screen.active_bindings.items() if b.enabled}
        assert not shown & {"r", "p", "t"}
        assert engine.count(template="report") == 1
        assert not engine.schedule("nightly").paused and engine.schedule("nightly").runs == 0


@pytest.mark.same_on_cluster
async def test_keys_follow_the_focused_table(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    seed(engine)
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await open_screen(app, pilot)

        def keys() -> set[str]:
            return {key for key, b in app.screen.active_bindings.items() if b.enabled}

        assert "r" in keys() and not {"p", "t"} & keys()
        await pilot.press("tab")
        await wait_for(pilot, lambda: {"p", "t"} <= keys() and "r" not in keys())


def test_run_input_parses_json_or_nothing() -> None:
    assert sd.parse_input("  ") is None
    assert sd.parse_input('{"a": [1, 2]}') == {"a": [1, 2]}
    assert sd.parse_input("42") == 42
    with pytest.raises(DefinitionError, match=r"input is not JSON: .* at column 8"):
        sd.parse_input('{"a": 1')


def test_cells_in_words() -> None:
    now = 1_700_000_000.0  # Tue 2023-11-14 22:13:20 UTC
    info = SimpleNamespace(
        description="At 02:00 (Europe/Paris)", timezone="Europe/Paris", paused=False,
        next_due=now + 3 * 3600, last_run="42", last_state="failed", overlap="cancel_other",
    )  # fmt: skip
    assert sd.cadence_words(info) == "At 02:00"
    assert sd.next_due_text(info, now) == "in 3h · Wed 02:13"
    assert sd.last_run_parts(info) == ("#42", "failed")
    assert sd.overlap_text(info) == "cancel other"
    assert sd.schedule_state(info) == "active"
    assert sd.local_time(now + 40 * 86400, "UTC", now) == "24 Dec 22:13"
    assert sd.local_time(now + 400 * 86400, "UTC", now) == "2024-12-18 22:13"
    info.next_due = None
    assert sd.schedule_state(info) == "ended"
    assert sd.trigger_outcome("n", "skipped", None).startswith("Triggered schedule n: skipped")
