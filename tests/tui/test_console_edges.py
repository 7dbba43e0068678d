"""Edges of the console a new operator meets first: marks, maps, approvals, keys, links."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from support import wait_for, widget_lines, workflow_open
from textual.widgets import Input

from demos import shapes
from engine import LOOKS, TASK_LOOKS, Agent, Engine, Skip, Task, Workflow
from engine.runtime.wait_keeper import WaitKeeper
from redisflow_tui.app import RedisflowApp
from redisflow_tui.screens.help import HelpScreen
from redisflow_tui.screens.prompt import PromptScreen
from redisflow_tui.screens.workflow import WorkflowScreen
from redisflow_tui.screens.workflows import WorkflowsScreen
from redisflow_tui.widgets.dag_view import DagView
from redisflow_tui.widgets.key_bar import KeyBar
from redisflow_tui.widgets.live_table import LiveTable
from redisflow_tui.widgets.task_detail import TaskDetail
from redisflow_tui.widgets.task_table import TaskTable
from redisflow_tui.widgets.workflow_table import WorkflowTable

# what the console shows and does with its keys: the same on a cluster
pytestmark = pytest.mark.same_on_cluster

SIZE = (160, 45)
W = TypeVar("W")


async def composed(pilot: Any, screen: Any, kind: type[W]) -> W:
    """``screen``'s widget of ``kind`` once it is mounted (a pushed screen composes later)."""
    await wait_for(pilot, lambda: screen.query_one(kind), what=kind.__name__)
    return screen.query_one(kind)


def skips_b(task: Task) -> Any:
    if task.name == "b":
        raise Skip("nothing to do")
    return task.name


def test_every_task_state_has_a_mark_of_its_own() -> None:
    marks = [LOOKS[look].glyph for look in TASK_LOOKS]
    assert len(set(marks)) == len(marks), marks
    assert LOOKS["skipped"].glyph != LOOKS["cancelled"].glyph


async def test_skipped_and_cancelled_look_different(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wf = Workflow("skips")
    a = wf.task("a")
    wf.task("b", after=[a])
    skipped_wid = engine.push(wf)
    Agent(engine, "tester", {"": skips_b}).run(until_idle=True)
    stopped = Workflow("stops")
    stopped.task("x")
    cancelled_wid = engine.push(stopped)
    engine.cancel(cancelled_wid)
    skip, cancel = LOOKS["skipped"].glyph, LOOKS["cancelled"].glyph
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        home = app.screen.query_one(WorkflowTable)
        await wait_for(pilot, lambda: len(home.wids) == 2, what="both workflows listed")
        at = home.wids.index(cancelled_wid)
        assert home.text(at, "state") == f"{cancel} cancelled"
        app.goto(cancelled_wid)
        await wait_for(pilot, lambda: workflow_open(app) and app.screen.wid == cancelled_wid)
        screen = app.screen
        assert isinstance(screen, WorkflowScreen)
        tasks = await composed(pilot, screen, TaskTable)
        await wait_for(pilot, lambda: tasks.row_count == 1, what="the cancelled task")
        assert tasks.text(0, "state") == f"{cancel} cancelled"
        dag = await composed(pilot, screen, DagView)
        await wait_for(pilot, lambda: f"[{cancel} x]" in "\n".join(widget_lines(dag)))
        await pilot.press("escape")
        app.goto(skipped_wid)
        await wait_for(pilot, lambda: workflow_open(app) and app.screen.wid == skipped_wid)
        screen = app.screen
        assert isinstance(screen, WorkflowScreen)
        tasks = await composed(pilot, screen, TaskTable)
        await wait_for(pilot, lambda: tasks.row_count == 2, what="the skipped workflow's tasks")
        assert tasks.text(1, "state") == f"{skip} skipped"
        dag = await composed(pilot, screen, DagView)
        await wait_for(pilot, lambda: f"[{skip} b]" in "\n".join(widget_lines(dag)))


async def test_a_map_not_expanded_yet_says_so(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wf = Workflow("sections")
    split = wf.task("split")
    wf.task("count", map=split["sections"], max_attempts=2)
    wid = engine.push(wf)
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        app.goto(wid)
        await wait_for(pilot, lambda: workflow_open(app))
        screen = app.screen
        assert isinstance(screen, WorkflowScreen)
        tasks = await composed(pilot, screen, TaskTable)
        await wait_for(pilot, lambda: tasks.row_count == 2, what="the tasks")
        tasks.focus()
        tasks.select_task(1)
        await wait_for(pilot, lambda: screen.sel_task == 1)
        body = str(screen.query_one("#detail-body").render())
        assert "items not expanded yet" in body, body
        assert "2 allowed per item" in body, body
        assert "expanding" not in body and "0 started" not in body, body


def gates(n: int) -> Workflow:
    """``n`` tasks waiting for a signal (``gate0``…), and a plain task ``work`` first."""
    wf = Workflow("gates")
    wf.task("work")
    for k in range(n):
        wf.task(f"gate{k}", wait={"signal": f"go{k}"})
    return wf


async def test_approve_picks_the_only_waiting_task(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    one = str(engine.push(gates(1)))
    two = str(engine.push(gates(2)))
    WaitKeeper(engine).step()
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        for wid in (two, one):
            app.goto(wid)
            await wait_for(pilot, lambda wid=wid: workflow_open(app) and app.screen.wid == wid)
            screen = app.screen
            assert isinstance(screen, WorkflowScreen)
            tasks = await composed(pilot, screen, TaskTable)
            await wait_for(pilot, lambda tasks=tasks: tasks.row_count > 1, what="the tasks")
            tasks.focus()
            tasks.select_task(0)  # work: not a wait task
            await wait_for(pilot, lambda screen=screen: screen.sel_task == 0)
            await pilot.press("a")
            if wid == two:  # which one? the operator selects it, as before
                await pilot.pause(0.2)
                assert not isinstance(app.screen, PromptScreen)
                await pilot.press("escape")
                await wait_for(pilot, lambda: isinstance(app.screen, WorkflowsScreen))
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen))
        prompt = app.screen
        assert isinstance(prompt, PromptScreen)
        assert "gate0" in str(prompt.query_one("#dialog-title").render())
        await pilot.press("enter")
        await wait_for(pilot, lambda: engine.status(one).task("gate0").state == "succeeded")
        assert [t.state for t in engine.status(two).tasks[1:]] == ["suspended", "suspended"]


async def test_tab_keys_and_escape_work_from_any_focused_widget(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wid = str(engine.push(shapes.diamond4()))
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: len(app.screen.query_one(WorkflowTable).wids) == 1)
        # an empty search box: the digits are tab keys; once typing began, text
        await pilot.press("slash")
        box = app.screen.query_one("#search", Input)
        assert app.focused is box
        await pilot.press("2")
        await wait_for(pilot, lambda: app.current_mode == "agents", what="agents from the box")
        await pilot.press("1")
        await wait_for(pilot, lambda: app.current_mode == "workflows")
        await pilot.press("d", "2")
        assert box.value == "d2" and app.current_mode == "workflows"
        await pilot.press("escape")  # one step back: the filter cleared, the list focused
        await wait_for(pilot, lambda: box.value == "" and app.focused is not box)
        # a dialog typing an id keeps its digits
        await pilot.press("g", "1", "2")
        assert isinstance(app.screen, PromptScreen) and app.current_mode == "workflows"
        assert app.screen.query_one(Input).value == "12"
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, WorkflowsScreen))
        # the help closes and the tab shows
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("4")
        await wait_for(pilot, lambda: app.current_mode == "schedules", what="help → schedules")
        await pilot.press("1")
        await wait_for(pilot, lambda: isinstance(app.screen, WorkflowsScreen))
        # every widget of a workflow's screen: 3 shows the events, Esc goes back one step
        app.goto(wid)
        await wait_for(pilot, lambda: workflow_open(app))
        screen = app.screen
        focusable = [w for w in screen.query("*") if w.focusable]
        assert len(focusable) >= 3, focusable
        for widget in focusable:
            widget.focus()
            await pilot.press("3")
            await wait_for(pilot, lambda: app.current_mode == "events", what=f"3 from {widget}")
            await pilot.press("1")
            await wait_for(pilot, lambda: app.screen is screen)
            widget.focus()
            await pilot.press("escape")
            await wait_for(
                pilot, lambda: isinstance(app.screen, WorkflowsScreen), what=f"esc from {widget}"
            )
            app.push_screen(screen)
            await wait_for(pilot, lambda: app.screen is screen)
        # the events' filter box: 2 from it while empty
        await pilot.press("3")
        await wait_for(pilot, lambda: app.current_mode == "events")
        await pilot.press("slash")
        await wait_for(pilot, lambda: isinstance(app.focused, Input))
        await pilot.press("2")
        await wait_for(pilot, lambda: app.current_mode == "agents", what="agents from a filter")


async def test_open_starts_on_a_workflow(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wid = str(engine.push(shapes.diamond4()))
    engine.push(shapes.chain9())
    app = console(open_wid=wid)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: workflow_open(app) and app.screen.wid == wid)
        await pilot.press("escape")  # the list is under it
        await wait_for(pilot, lambda: isinstance(app.screen, WorkflowsScreen))
    missing = console(open_wid="999")
    async with missing.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: bool(missing._notifications), what="a notice")
        assert isinstance(missing.screen, WorkflowsScreen)
        assert "No workflow 999" in str(list(missing._notifications)[0].message)


def _shows(table: LiveTable, column: str) -> bool:
    """Whether ``column`` of ``table`` fits in its width, from the left edge."""
    right = 0
    for key, _, width in table.columns:
        right += width + (1 if key != column else 0)
        if key == column:
            return right <= table.scrollable_content_region.width
    raise AssertionError(column)


async def test_the_focused_pane_is_always_marked(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wid = str(engine.push(shapes.diamond4()))
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        home = app.screen.query_one(WorkflowTable)
        await wait_for(pilot, lambda: home.wids == [wid])
        assert app.focused is home
        marked = home._style("header")
        await pilot.press("slash")  # the search box takes focus: the table's header is plain
        await wait_for(pilot, lambda: home._style("header") != marked, what="plain header")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.focused is home and home._style("header") == marked)
        app.goto(wid)
        await wait_for(pilot, lambda: workflow_open(app))
        screen = app.screen
        dag = await composed(pilot, screen, DagView)
        tasks = await composed(pilot, screen, TaskTable)
        detail = await composed(pilot, screen, TaskDetail)
        accent = app.theme_variables["accent"]
        await wait_for(
            pilot, lambda: dag.layout_ is not None and screen.view.status is not None
        )  # (a new graph view may take the focus back)
        await wait_for(pilot, lambda: app.focused is dag)
        assert dag.styles.border_top[0] == "round" and dag.styles.border_top[1].hex == accent
        assert detail.styles.border_left[1].hex != accent
        tasks.focus()
        await wait_for(pilot, lambda: dag.styles.border_top[0] == "blank", what="dag plain")
        assert tasks._style("header") == marked
        detail.focus()
        await wait_for(pilot, lambda: detail.styles.border_left[1].hex == accent)
        assert tasks._style("header") != marked


async def test_80_by_24_keeps_names_states_and_keys(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wf = Workflow("billing-sync-nightly")
    a = wf.task("fetch-accounts")
    wf.task("charge", after=[a])
    wid = str(engine.push(wf))
    Agent(engine, "tester", {"": skips_b}).run(until_idle=True)
    app = console()
    async with app.run_test(size=(80, 24)) as pilot:
        home = app.screen.query_one(WorkflowTable)
        await wait_for(pilot, lambda: home.wids == [wid])
        await wait_for(pilot, lambda: _shows(home, "name") and _shows(home, "state"))
        assert app.screen.query_one(KeyBar).compact
        await pilot.press("2")
        await wait_for(pilot, lambda: app.current_mode == "agents")
        agents = await composed(pilot, app.screen, LiveTable)
        assert [c[0] for c in agents.columns][:2] == ["id", "state"]
        await wait_for(pilot, lambda: _shows(agents, "state"), what="agents' states")
        await pilot.press("4")
        await wait_for(pilot, lambda: app.current_mode == "schedules")
        await wait_for(pilot, lambda: _shows(app.screen.query_one("#schedules", LiveTable), "name"))
        await pilot.press("1")
        app.goto(wid)
        await wait_for(pilot, lambda: workflow_open(app))
        tasks = await composed(pilot, app.screen, TaskTable)
        await wait_for(pilot, lambda: tasks.row_count == 2)
        await wait_for(pilot, lambda: _shows(tasks, "name") and _shows(tasks, "state"))
        keys = app.screen.query_one(KeyBar)
        assert keys.compact and keys.size.width == 80
        # at the usual size the detail keeps its width and the keys their padding
        await pilot.resize_terminal(160, 45)
        await wait_for(pilot, lambda: app.screen.query_one(TaskDetail).outer_size.width == 60)
        assert not app.screen.query_one(KeyBar).compact
