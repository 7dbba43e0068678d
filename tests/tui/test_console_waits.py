"""Wait tasks in the console: what a waiting task waits for and since when, and an
operator approving or rejecting it with a comment, recorded with who did it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from support import wait_for, workflow_open

from engine import Engine, Workflow
from engine.runtime.wait_keeper import WaitKeeper
from redisflow_tui.app import RedisflowApp
from redisflow_tui.screens.prompt import PromptScreen
from redisflow_tui.screens.workflow import WorkflowScreen
from redisflow_tui.widgets.task_detail import TaskDetail
from redisflow_tui.widgets.task_table import TaskTable

# what the console shows and does with its keys: the same on a cluster, whose reads the
# engine's own tests check there
pytestmark = pytest.mark.same_on_cluster

SIZE = (160, 45)


def release(engine: Engine) -> str:
    wf = Workflow("release")
    build = wf.task("build", wait={"sleep": 0})
    gate = wf.task(
        "approve", after=[build], wait={"signal": "approve", "timeout": "2d", "prompt": "Ship?"}
    )
    wf.task("ship", after=[gate], wait={"signal": "shipped"})
    wid = str(engine.push(wf))
    wait_for_state = WaitKeeper(engine)
    for _ in range(3):
        wait_for_state.step()
    return wid


async def _open(app: RedisflowApp, pilot: object, wid: str) -> WorkflowScreen:
    app.goto(wid)
    await wait_for(pilot, lambda: workflow_open(app))
    screen = app.screen
    assert isinstance(screen, WorkflowScreen)
    await wait_for(pilot, lambda: screen.view.status is not None)
    return screen


def _detail(screen: WorkflowScreen) -> str:
    return str(screen.query_one(TaskDetail).query_one("#detail-body").content)


async def test_an_operator_approves_a_waiting_task_with_a_comment(
    engine: Engine, console: Callable[..., RedisflowApp], tmp_path: Path
) -> None:
    wid = release(engine)
    assert engine.status(wid).task("approve").state == "suspended"
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, wid)
        table = screen.query_one(TaskTable)
        table.focus()
        table.select_task(1)
        await wait_for(pilot, lambda: screen.sel_task == 1)
        await wait_for(pilot, lambda: "waits for signal approve since" in _detail(screen))
        detail = _detail(screen)
        assert "Ship?" in detail and "then fail" in detail
        assert "a: approve" in detail
        app.save_screenshot("waits.svg", str(tmp_path))
        if os.environ.get("RF_SHOTS"):  # keep it to look at
            app.save_screenshot("waits.svg", os.environ["RF_SHOTS"])
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen))
        await pilot.press(*"fine by me")
        await pilot.press("enter")
        await wait_for(pilot, lambda: engine.status(wid).task("approve").state == "succeeded")
        sig = engine.status(wid).task("approve").signal
        assert sig is not None
        assert sig["comment"] == "fine by me" and sig["by"] == engine.actor
        await wait_for(pilot, lambda: "signal approve by" in _detail(screen))
    assert (tmp_path / "waits.svg").stat().st_size > 0


async def test_a_rejection_fails_the_task_and_a_finished_task_is_refused(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wid = release(engine)
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, wid)
        table = screen.query_one(TaskTable)
        table.focus()
        table.select_task(0)  # build: a sleep, already over
        await wait_for(pilot, lambda: screen.sel_task == 0)
        await pilot.press("j")
        assert not isinstance(app.screen, PromptScreen)  # nothing to reject there
        table.select_task(1)
        await wait_for(pilot, lambda: screen.sel_task == 1)
        await pilot.press("j")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen))
        await pilot.press(*"not today")
        await pilot.press("enter")
        await wait_for(pilot, lambda: engine.status(wid).task("approve").state == "failed")
        assert engine.status(wid).task("approve").error == f"rejected by {engine.actor}: not today"


async def test_a_child_run_opens_from_its_parents_task(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    engine.put_template("name: enrich\ntasks:\n  - name: look\n")
    wf = Workflow("order")
    wf.task("enrich", run="enrich")
    wid = str(engine.push(wf))
    WaitKeeper(engine).step()
    WaitKeeper(engine).step()
    child = engine.status(wid).task("enrich").child
    assert child is not None
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, wid)
        table = screen.query_one(TaskTable)
        table.focus()
        table.select_task(0)
        await wait_for(pilot, lambda: f"run {child} · enter: open it" in _detail(screen))
        await pilot.press("enter")
        await wait_for(
            pilot, lambda: isinstance(app.screen, WorkflowScreen) and app.screen.wid == child
        )
        child_screen = app.screen
        assert isinstance(child_screen, WorkflowScreen)
        await wait_for(pilot, lambda: child_screen.view.status is not None)
        await wait_for(
            pilot, lambda: f"child of {wid}" in str(child_screen.query_one("#wf-header").content)
        )
