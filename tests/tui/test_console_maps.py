"""A map in the console: one chip with live counts, its items paged in the task table."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from support import wait_for, widget_lines, workflow_open

from engine import Agent, Engine, Task, Workflow
from redisflow_tui.app import RedisflowApp
from redisflow_tui.data.items import ITEM_PAGE
from redisflow_tui.screens.workflow import WorkflowScreen
from redisflow_tui.widgets.dag_view import DagView
from redisflow_tui.widgets.task_detail import TaskDetail
from redisflow_tui.widgets.task_table import TaskTable
from redisflow_tui.widgets.text_line import TextLine

# what the console shows and does with its keys: the same on a cluster, whose reads the
# engine's own tests check there
pytestmark = pytest.mark.same_on_cluster

SIZE = (160, 45)
N = 250  # items: three pages


def mapped(n: int = N) -> Workflow:
    wf = Workflow("sections")
    split = wf.task("split")
    count = wf.task("count", map=split["sections"], concurrency=50, tolerate="10%")
    wf.task("total", after=[count])
    return wf


def handler(task: Task) -> Any:
    """Splits into N sections; fails every item whose index ends in 7."""
    if task.name == "split":
        return {"sections": [f"sec-{k}" for k in range(N)]}
    if task.name == "count":
        if task.item_index is not None and task.item_index % 10 == 7:
            raise ValueError(f"cannot count {task.item}")
        return len(task.item)
    return sum(x or 0 for x in task.parents["count"])


def run_all(engine: Engine) -> None:
    thread = threading.Thread(
        target=lambda: Agent(engine, "agent-1", {"": handler}).run(until_idle=True)
    )
    thread.start()
    thread.join()


def text(widget: Any) -> str:
    return "\n".join(widget_lines(widget))


def detail(screen: WorkflowScreen) -> str:
    return str(screen.query_one("#detail-body").render())


async def open_workflow(app: RedisflowApp, pilot: Any, wid: str) -> WorkflowScreen:
    app.goto(wid)
    await wait_for(pilot, lambda: workflow_open(app))
    screen = app.screen
    assert isinstance(screen, WorkflowScreen)
    await wait_for(
        pilot,
        lambda: any(dag.layout_ is not None for dag in screen.query(DagView)),
        what="layout",
    )
    return screen


async def test_a_map_is_one_chip_with_live_counts(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wid = engine.push(mapped())
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_workflow(app, pilot, wid)
        dag = screen.query_one(DagView)
        await wait_for(pilot, lambda: "[○ count" in text(dag) and "0/?]" in text(dag))
        run_all(engine)
        await wait_for(
            pilot, lambda: "[✔ count     225/250 ✖25]" in text(dag), what="counts on the chip"
        )
        assert "[✔ split]──[✔ count     225/250 ✖25]──[✔ total]" in text(dag)


async def test_a_maps_items_page_and_filter(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wid = engine.push(mapped())
    run_all(engine)
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_workflow(app, pilot, wid)
        table = screen.query_one(TaskTable)
        title = screen.query_one("#tasks-title", TextLine)
        await wait_for(pilot, lambda: table.row_count == 3)
        await pilot.press("right")  # the DAG: split → count
        await wait_for(pilot, lambda: screen.sel_task == 1)
        assert "225 succeeded, 25 failed of 250" in detail(screen)
        await pilot.press("enter")  # open its items
        await wait_for(pilot, lambda: table.row_count == ITEM_PAGE, what="first page")
        assert screen.focused is table
        assert "Items of count" in str(title.render()) and "page 1/3" in str(title.render())
        assert table.text(0, "name") == "count.0" and "succeeded" in table.text(0, "state")
        assert "failed" in table.text(7, "state")
        await pilot.press(*["down"] * 7)
        await wait_for(pilot, lambda: screen.sel_item == 7)
        shown = detail(screen)
        assert "count.7" in shown and "sec-7" in shown and "cannot count sec-7" in shown

        await pilot.press("right_square_bracket", "right_square_bracket")
        await wait_for(pilot, lambda: table.row_count == N - 2 * ITEM_PAGE, what="last page")
        assert table.text(0, "name") == "count.200"
        assert "page 3/3" in str(title.render())
        await pilot.press("right_square_bracket")  # no page past the last
        await pilot.pause(0.2)
        assert screen.items_query is not None and screen.items_query.page == 2

        await pilot.press("f")  # failed only, from the first page
        await wait_for(pilot, lambda: table.row_count == 25, what="failed items")
        assert [table.text(k, "name") for k in range(3)] == ["count.7", "count.17", "count.27"]
        assert "Failed items of count" in str(title.render())
        assert "cannot count sec-7" in detail(screen)
        await pilot.press("f")  # all again
        await wait_for(pilot, lambda: table.row_count == ITEM_PAGE)

        await pilot.press("T")  # the map succeeded (its failures tolerated): no retry
        await pilot.pause(0.1)
        assert engine.status(wid).task("count").items["failed"] == 25  # type: ignore[index]

        await pilot.press("escape")  # back to the tasks, the map selected
        await wait_for(pilot, lambda: table.row_count == 3, what="tasks again")
        assert screen.items_query is None and isinstance(app.screen, WorkflowScreen)
        assert table.cursor_key == "1"
        assert "225 succeeded" in str(
            screen.query_one(TaskDetail).query_one("#detail-body").render()
        )


async def test_an_items_steps_show_in_its_detail(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    steps = Workflow("per")
    fetch = steps.task("fetch")
    steps.task("count", after=[fetch])
    wf = Workflow("stepped")
    split = wf.task("split")
    wf.task("each", map=split, steps=steps)
    wid = engine.push(wf)

    def run(task: Task) -> Any:
        if task.name == "split":
            return ["a", "b"]
        if task.name == "count" and task.item_index == 1:
            raise ValueError("b is bad")
        return task.item

    Agent(engine, "agent-1", {"": run}).run(until_idle=True)
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_workflow(app, pilot, wid)
        table = screen.query_one(TaskTable)
        await wait_for(pilot, lambda: table.row_count == 2)
        await pilot.press("right")
        await wait_for(pilot, lambda: screen.sel_task == 1)
        await pilot.press("enter")
        await wait_for(pilot, lambda: table.row_count == 2, what="its items")
        await pilot.press("down")
        await wait_for(pilot, lambda: screen.sel_item == 1)
        shown = detail(screen)
        assert "step count: ValueError: b is bad" in shown and "attempts" not in shown
        assert "steps" in shown and "fetch succeeded" in " ".join(shown.split())
        assert "count failed" in " ".join(shown.split())
