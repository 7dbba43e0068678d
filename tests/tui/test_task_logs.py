"""The task detail's log pane: the selected task's lines and progress, live."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from engine_helpers import agent_thread, run_agent
from support import wait_for, workflow_open
from textual.widgets import Input, Log

from engine import Engine, Task, Workflow
from redisflow_tui.app import RedisflowApp
from redisflow_tui.widgets.task_log_pane import TaskLogPane

# what the console shows and does with its keys: the same on a cluster, whose reads the
# engine's own tests check there
pytestmark = pytest.mark.same_on_cluster

SIZE = (160, 45)


def pane_text(app: RedisflowApp) -> str:
    return "\n".join(app.screen.query_one(TaskLogPane).query_one(Log).lines)


def pane_title(app: RedisflowApp) -> str:
    return str(app.screen.query_one(TaskLogPane).query_one("#log-title").content)


async def open_workflow(app: RedisflowApp, pilot: object, wid: str) -> None:
    await pilot.press("g")  # type: ignore[attr-defined]
    await wait_for(pilot, lambda: isinstance(app.screen.focused, Input))  # type: ignore[arg-type]
    await pilot.press(*wid, "enter")  # type: ignore[attr-defined]
    await wait_for(pilot, lambda: workflow_open(app))  # type: ignore[arg-type]


async def test_the_selected_tasks_log_is_shown(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wf = Workflow("logged")
    first = wf.task("extract")
    wf.task("load", after=[first])
    wid = engine.push(wf)
    run_agent(engine, {"": lambda t: print(f"{t.name}: 42 rows")})
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await open_workflow(app, pilot, wid)
        await wait_for(pilot, lambda: "extract: 42 rows" in pane_text(app), what="extract")
        assert "load" not in pane_text(app)
        assert "log of extract · 1 line" in pane_title(app)
        app.screen.query_one(TaskLogPane).follow(wid, "load")  # as selecting it does
        await wait_for(pilot, lambda: "load: 42 rows" in pane_text(app), what="load")
        assert "extract" not in pane_text(app)


async def test_a_running_tasks_lines_and_progress_come_live(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wf = Workflow("slow")
    wf.task("crunch")
    wid = engine.push(wf)
    release = threading.Event()

    def handle(task: Task) -> None:
        print("step one")
        task.progress(0.25, "rows 2,500/10,000")
        release.wait(30)
        print("step two")

    app = console()
    async with app.run_test(size=SIZE) as pilot:
        # started inside the app: Textual takes sys.stdout while it runs, and an agent
        # routes what is there when it starts
        with agent_thread(engine, {"": handle}):
            await open_workflow(app, pilot, wid)
            await wait_for(pilot, lambda: "step one" in pane_text(app), what="first line")
            await wait_for(pilot, lambda: "25% rows 2,500/10,000" in pane_title(app))
            release.set()
            await wait_for(pilot, lambda: "step two" in pane_text(app), what="last line")
            await wait_for(pilot, lambda: app.screen.query_one(TaskLogPane).done)


async def test_history_screen_per_type_and_template(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    from engine.runtime.rollups import sparkline
    from redisflow_tui.screens.history import HistoryScreen

    engine.put_template('{"name": "nightly", "tasks": [{"name": "a", "type": "etl"}]}')
    engine.run("nightly")
    run_agent(engine, {"etl": lambda t: None})
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("H")
        await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen))
        screen = app.screen
        await wait_for(pilot, lambda: screen.data is not None and "etl" in screen.data["day"])
        assert screen.data["hour"]["etl"].succeeded == 1
        await pilot.press("b")
        await wait_for(pilot, lambda: screen.data is not None and "nightly" in screen.data["day"])
        assert sum(screen.data["day"]["nightly"].hourly) == 1
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HistoryScreen))
    assert sparkline([0, 1, 8]) == "·▁█"


async def test_the_timeline_counts_attempts_aged_out_of_the_stream(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    from rich.style import Style

    from redisflow_tui.screens.timeline import TimelineScreen
    from redisflow_tui.widgets.timeline import render_timeline

    wf = Workflow("flaky", retry_backoff=0.001)
    wf.task("shaky", max_attempts=3)
    wid = engine.push(wf)

    def handle(task: Task) -> None:
        if task.attempt < 3:
            raise ValueError("not yet")

    run_agent(engine, {"": handle}, idle_check_s=0.05)
    for shard in engine.keys.all_shards():  # the capped stream has dropped them all
        engine.redis.xtrim(shard.events, maxlen=0)
    tl = engine.timeline(wid)
    assert tl.status.tasks[0].attempts == 3
    assert tl.aged_out == {0: 2} and tl.attempt_count == 3
    assert [a.number for a in tl.attempts[0]] == [3]
    lines = [str(x) for x in render_timeline(tl, 100, 0.0, lambda _: Style())]
    assert any(line.startswith("shaky ×3") for line in lines)
    assert "earlier attempts aged out" in lines[-1]
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await open_workflow(app, pilot, wid)
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, TimelineScreen))
        title = app.screen.query_one("#timeline-title")
        await wait_for(pilot, lambda: "aged out" in str(title.content), what="the title")
        assert "3 attempts of 1 task" in str(title.content)


async def test_escapes_and_markup_in_a_tasks_text_are_shown_as_text(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    """What a handler wrote, its progress message and its error hold terminal escapes
    and rich markup: the console shows both as text (nothing reaches the terminal raw,
    no markup is applied)."""
    bad = "a\x1b]52;c;SGVsbG8=\x07b\x1b[2Jc\x9b1Ad"
    shown = "a␛]52;c;SGVsbG8=\\x07b␛[2Jc\\x9b1Ad"
    wf = Workflow("loud")
    wf.task("crunch")
    wid = engine.push(wf)
    release = threading.Event()

    def handle(task: Task) -> None:
        print("printed", bad)
        task.progress(0.5, "[b]rows[/b] [/] " + bad)
        release.wait(30)

    app = console()
    async with app.run_test(size=SIZE) as pilot:
        with agent_thread(engine, {"": handle}):
            await open_workflow(app, pilot, wid)
            await wait_for(pilot, lambda: f"printed {shown}" in pane_text(app), what="line")
            await wait_for(pilot, lambda: f"50% [b]rows[/b] [/] {shown}" in pane_title(app))
            release.set()
            await wait_for(pilot, lambda: app.screen.query_one(TaskLogPane).done)
        assert "\x1b" not in pane_text(app) + pane_title(app)
