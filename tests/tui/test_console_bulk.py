"""The console acting on many workflows, and browsing them: marks and a filter with a
confirmation that states the count, a frozen list, sorting, columns as wide as their
text, agents drained and agents gone hidden, a failed workflow opened at its failure,
the timeline's lines never wrapped."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from support import drain, wait_for, widget_lines, workflow_open

from engine import Agent, Engine, Task, Workflow
from engine.core.model import AgentState, WorkflowState
from redisflow_tui.app import RedisflowApp
from redisflow_tui.screens.bulk_choice import BulkChoiceScreen
from redisflow_tui.screens.confirm import ConfirmScreen
from redisflow_tui.screens.timeline import TimelineScreen
from redisflow_tui.screens.workflow import WorkflowScreen
from redisflow_tui.screens.workflows import WorkflowsScreen
from redisflow_tui.widgets.live_table import LiveTable
from redisflow_tui.widgets.task_table import TaskTable
from redisflow_tui.widgets.text_line import TextLine
from redisflow_tui.widgets.workflow_table import WorkflowTable

# what the console shows and does with its keys: the same on a cluster, whose reads the
# engine's own tests check there
pytestmark = pytest.mark.same_on_cluster

SIZE = (160, 45)


def waiting(name: str = "idle") -> Workflow:
    """A workflow that stays running: no agent serves its type."""
    wf = Workflow(name)
    wf.task("a", type="nobody")
    return wf


def failing(name: str = "fails") -> Workflow:
    wf = Workflow(name)
    a = wf.task("a", payload="ok")
    wf.task("b", payload="fail", after=[a])
    wf.task("c", payload="fail", after=[a])
    return wf


def table(app: RedisflowApp) -> WorkflowTable:
    return app.screen.query_one(WorkflowTable)


def info(app: RedisflowApp) -> str:
    return str(app.screen.query_one("#listinfo", TextLine).content)


def dialog(app: RedisflowApp) -> str:
    return " ".join(str(w.render()) for w in app.screen.query("#dialog Static"))


async def test_marked_rows_are_acted_on_after_a_count(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    first, second, third = (engine.push(waiting()) for _ in range(3))
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: table(app).wids == [third, second, first])
        await pilot.press("space", "space")  # marks the newest two, moving down
        await wait_for(pilot, lambda: "2 marked" in info(app))
        assert table(app).text(0, "id") == f"●{third}" and table(app).text(2, "id") == first
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "Cancel 2 workflows?" in dialog(app) and "2 marked workflows" in dialog(app)
        await pilot.press("y")
        await wait_for(pilot, lambda: engine.state(second) == WorkflowState.CANCELLED)
        assert engine.state(third) == WorkflowState.CANCELLED
        assert engine.state(first) == WorkflowState.RUNNING
        assert "marked" not in info(app)  # the marks were spent on the action
        await pilot.press("space")  # marks the row under the cursor again
        await wait_for(pilot, lambda: "1 marked" in info(app))
        await pilot.press("escape")  # clears the marks
        await wait_for(pilot, lambda: "marked" not in info(app))


async def test_every_match_of_the_filter_after_a_count(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    bad = [engine.push(failing()) for _ in range(3)]
    drain(engine)
    idle = engine.push(waiting())
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: len(table(app).wids) == 4)
        for _ in range(6):  # all → running → paused → queued → scheduled → succeeded → failed
            await pilot.press("s")
        await wait_for(pilot, lambda: sorted(table(app).wids) == sorted(bad))
        await pilot.press("A")
        await wait_for(pilot, lambda: isinstance(app.screen, BulkChoiceScreen))
        assert "failed workflows" in dialog(app)
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "Retry 3 workflows?" in dialog(app)
        assert "3 workflows (failed workflows)" in dialog(app)
        await pilot.press("y")
        await wait_for(pilot, lambda: all(engine.state(w) == WorkflowState.RUNNING for w in bad))
        assert engine.state(idle) == WorkflowState.RUNNING  # not failed: never selected


async def test_the_list_freezes_while_browsing(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    first = engine.push(waiting())
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: table(app).wids == [first])
        screen = app.screen
        assert isinstance(screen, WorkflowsScreen)
        await pilot.press("f")
        await wait_for(pilot, lambda: "FROZEN" in info(app))
        assert screen.check_action("unfreeze", ()) and not screen.check_action("freeze", ())
        footer_keys = {b.action for _, b, enabled, _ in app.active_bindings.values() if enabled}
        assert "unfreeze" in footer_keys and "freeze" not in footer_keys
        second = engine.push(waiting())
        await wait_for(pilot, lambda: screen.pending.pushed > 0, what="the push heard")
        await pilot.pause(0.2)
        assert table(app).wids == [first]  # heard, not shown: frozen
        await pilot.press("f")
        await wait_for(pilot, lambda: table(app).wids == [second, first], what="live again")
        assert "FROZEN" not in info(app)


async def test_sorting_by_key_and_by_header(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    b = engine.push(waiting("bravo"))
    a = engine.push(waiting("alpha"))
    c = engine.push(waiting("charlie"))
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: table(app).wids == [c, a, b])
        await pilot.press("S")  # id → name, A to Z
        await wait_for(pilot, lambda: table(app).wids == [a, b, c])
        assert "this page by Name ↑" in info(app)
        assert "Name ↑" in widget_lines(table(app))[0]
        x = next(i for i, ch in enumerate(widget_lines(table(app))[0]) if ch == "I")
        await pilot.click(WorkflowTable, offset=(x, 0))  # the ID header: newest first
        await wait_for(pilot, lambda: table(app).wids == [c, a, b])
        await pilot.click(WorkflowTable, offset=(x, 0))  # again: oldest first (from Redis)
        await wait_for(pilot, lambda: table(app).wids == [b, a, c])
        assert "oldest first" in info(app)


async def test_columns_widen_to_their_text_while_there_is_room(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    long = "a-workflow-name-long-enough-to-be-cut-in-26-cells"
    engine.push(waiting(long))
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: len(table(app).wids) == 1)
        await wait_for(pilot, lambda: long in widget_lines(table(app))[1])
    narrow = console()
    async with narrow.run_test(size=(90, 30)) as pilot:
        await wait_for(pilot, lambda: len(table(narrow).wids) == 1)
        await pilot.pause(0.1)
        assert "…" in widget_lines(table(narrow))[1]  # no room: cut, as before


async def test_a_failed_workflow_opens_at_its_first_failed_task(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wid = engine.push(failing())
    drain(engine)
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        app.goto(wid)
        await wait_for(pilot, lambda: workflow_open(app))
        screen = app.screen
        assert isinstance(screen, WorkflowScreen)
        await wait_for(pilot, lambda: screen.sel_task == 1)
        await wait_for(pilot, lambda: screen.query_one(TaskTable).selected_task == 1)


async def test_an_agent_is_drained_from_its_screen_and_gone_agents_are_hidden(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    shard = engine.keys.shard(0)
    long_ago = int((engine.server_time() - 7200) * 1000)
    engine.redis.hset(shard.agents, "old-agent", '{"types": ["t"], "lease_s": 30}')
    engine.redis.hset(shard.agents_state, "old-agent", "stopped")
    engine.redis.zadd(shard.agents_seen, {"old-agent": long_ago})
    started, go = threading.Event(), threading.Event()

    def work(_: Task) -> None:
        started.set()
        assert go.wait(30)

    wf = Workflow("slow")
    wf.task("a", type="slow")
    engine.push(wf)
    agent = Agent(engine, "worker-1", {"slow": work}, heartbeat_s=0.1, lease_s=3)
    thread = threading.Thread(target=agent.run, daemon=True)
    thread.start()
    assert started.wait(30)
    app = console()
    try:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("2")
            agents = lambda: app.screen.query_one("#agents", LiveTable)  # noqa: E731
            await wait_for(pilot, lambda: agents().keys == ["worker-1"], what="old one hidden")
            assert "1 gone a while, hidden" in str(app.screen.query_one("#agents-counts").content)
            await pilot.press("d")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            assert "Drain agent worker-1?" in dialog(app) and "1 running task" in dialog(app)
            await pilot.press("y")
            await wait_for(pilot, lambda: engine.agents()[-1].state == AgentState.DRAINING)
            await wait_for(pilot, lambda: "draining" in agents().text(0, "state"))
            go.set()
            await wait_for(pilot, lambda: not thread.is_alive(), what="the agent to exit")
            await wait_for(pilot, lambda: "stopped" in agents().text(0, "state"))
    finally:
        go.set()
        thread.join(30)


async def test_the_timeline_never_wraps_a_line(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wf = Workflow("many")
    prev = None
    for i in range(40):  # more rows than the screen: a vertical scrollbar
        prev = wf.task(f"step-{i:02}", after=[prev] if prev else [])
    wid = engine.push(wf)
    drain(engine)
    app = console()
    async with app.run_test(size=(70, 24)) as pilot:
        app.goto(wid)
        await wait_for(pilot, lambda: workflow_open(app))
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, TimelineScreen))
        chart = lambda: app.screen.query_one("#timeline-chart")  # noqa: E731
        await wait_for(pilot, lambda: "step-39" in str(chart().render()), what="the chart")
        await pilot.pause(0.2)
        lines = str(chart().render()).split("\n")
        assert chart().size.height == len(lines)  # one screen line per chart line
        assert lines[0].rstrip().endswith("s") and "0s" in lines[0]
