"""The console driven like an operator would, against a real Redis."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from support import drain, wait_for, widget_lines, workflow_open
from textual.widgets import Footer, Input

from demos import shapes
from engine import Engine, NotFoundError, Workflow
from redisflow_tui.app import RedisflowApp
from redisflow_tui.screens.confirm import ConfirmScreen
from redisflow_tui.screens.workflow import WorkflowScreen
from redisflow_tui.screens.workflows import WorkflowsScreen
from redisflow_tui.widgets.dag_view import DagView
from redisflow_tui.widgets.live_table import LiveTable
from redisflow_tui.widgets.workflow_table import WorkflowTable

# what the console shows and does with its keys: the same on a cluster, whose reads the
# engine's own tests check there
pytestmark = pytest.mark.same_on_cluster

SIZE = (160, 45)
ROOT = Path(__file__).resolve().parents[2]


def failing(name: str = "fails") -> Workflow:
    wf = Workflow(name)
    a = wf.task("a", payload="ok")
    wf.task("b", payload="fail", after=[a])
    wf.task("c", payload="ok", after=["b"])
    return wf


def home(app: RedisflowApp) -> WorkflowsScreen:
    screen = app.screen
    assert isinstance(screen, WorkflowsScreen)
    return screen


def table(app: RedisflowApp) -> WorkflowTable:
    return app.screen.query_one(WorkflowTable)


async def test_home_lists_workflows_live(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    first = engine.push(shapes.diamond4())
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: table(app).wids == [first], what="first row")
        second = engine.push(shapes.chain9())
        await wait_for(pilot, lambda: table(app).wids == [second, first], what="live push")
        await wait_for(pilot, lambda: app.stats is not None and app.stats.workflows["running"] == 2)
        drain(engine)
        await wait_for(pilot, lambda: "succeeded" in table(app).text(0, "state"))
        assert table(app).text(0, "done") == "9/9"


async def test_table_pages_through_workflows(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    ids = engine.push_many([shapes.diamond4(name=f"wf{i % 3}") for i in range(120)])
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: len(table(app).wids) == 50)
        assert table(app).wids[0] == ids[-1]
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: table(app).wids[:1] == [ids[-51]], what="page 2")
        await pilot.press("right_square_bracket", "right_square_bracket")
        await wait_for(pilot, lambda: len(table(app).wids) == 20, what="last page")
        assert table(app).wids[-1] == ids[0]
        assert home(app).query_.page == 2
        await pilot.press("left_square_bracket")
        await wait_for(pilot, lambda: table(app).wids[:1] == [ids[-51]])


async def test_state_filter_and_name_search(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    bad = engine.push(failing())
    good = engine.push(shapes.diamond4(name="etl"))
    drain(engine)
    newest = engine.push(shapes.chain9(name="etl"))
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: len(table(app).wids) == 3)
        for _ in range(6):  # all → running → paused → queued → scheduled → succeeded → failed
            await pilot.press("s")
        await wait_for(pilot, lambda: table(app).wids == [bad], what="failed only")
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(table(app).wids) == 3)
        await pilot.press("slash")
        await pilot.press(*"etl", "enter")  # filters by the name and opens its newest run
        await wait_for(
            pilot,
            lambda: workflow_open(app) and app.screen.wid == newest,
            what="the newest match opened",
        )
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, WorkflowsScreen))
        await wait_for(pilot, lambda: len(table(app).wids) == 2, what="by name")
        assert good in table(app).wids and bad not in table(app).wids


async def test_actions_change_engine_state(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wid = engine.push(shapes.chain9())
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: table(app).wids == [wid])
        await pilot.press("p")
        await wait_for(pilot, lambda: engine.state(wid) == "paused", what="paused")
        await pilot.press("r")
        await wait_for(pilot, lambda: engine.state(wid) == "running", what="released")
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "9 tasks not yet started will be cancelled" in app.screen.body
        await pilot.press("y")
        await wait_for(pilot, lambda: engine.state(wid) == "cancelled", what="cancelled")
        await wait_for(pilot, lambda: "cancelled" in table(app).text(0, "state"))
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "will be deleted" in app.screen.body
        await pilot.press("n")  # keep it
        await pilot.pause(0.2)
        assert engine.state(wid) == "cancelled"
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")

        def gone() -> bool:
            try:
                engine.state(wid)
            except NotFoundError:
                return True
            return False

        await wait_for(pilot, gone, what="cleaned up")
        await wait_for(pilot, lambda: table(app).wids == [])


async def test_engine_refusal_is_a_notification(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wid = engine.push(shapes.chain9())
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: table(app).wids == [wid])
        await pilot.press("r")  # release a running workflow: refused
        await wait_for(pilot, lambda: any("released" in n.message for n in app._notifications))
        note = [n for n in app._notifications if "released" in n.message][-1]
        assert note.severity == "warning" and "Refused" in note.title
        assert engine.state(wid) == "running"


async def test_retry_workflow_and_one_task(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wid = engine.push(failing())
    drain(engine)
    assert engine.state(wid) == "failed"
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: table(app).wids == [wid])
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        body = app.screen.body
        assert "1 failed task will run again with their inputs unchanged, and the 1 " in body
        assert "upstream_failed or skipped task after them decided again" in body
        await pilot.press("y")
        await wait_for(pilot, lambda: engine.state(wid) == "running", what="retried")
        drain(engine)  # fails again
        await wait_for(pilot, lambda: engine.state(wid) == "failed")
        await pilot.press("enter")
        await wait_for(pilot, lambda: workflow_open(app))
        screen = app.screen
        assert isinstance(screen, WorkflowScreen)
        await wait_for(pilot, lambda: screen.view.status is not None)
        await pilot.press("f")  # failed only: the one failed task is selected
        await wait_for(pilot, lambda: screen.query_one("#tasks").row_count == 1)
        screen.query_one("#tasks").focus()
        await pilot.press("down", "up")
        await wait_for(pilot, lambda: screen.sel_task == 1)
        await pilot.press("T")
        await wait_for(pilot, lambda: engine.status(wid).task("b").state == "ready")
        assert engine.status(wid).task("c").state == "waiting"


async def test_cleanup_all_finished_confirms_the_count(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    engine.push_many([shapes.diamond4() for _ in range(4)] + [failing()])
    drain(engine)
    keep = engine.push(shapes.chain9())
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: len(table(app).wids) == 6)
        await pilot.press("C")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        body = app.screen.body
        assert "5 finished workflows (4 succeeded, 1 failed, 0 cancelled)" in body
        await pilot.press("y")
        await wait_for(pilot, lambda: engine.count() == 1, what="cleaned")
        await wait_for(pilot, lambda: table(app).wids == [keep])
        await wait_for(pilot, lambda: any("Cleaned up 5" in n.message for n in app._notifications))


async def test_push_a_workflow_file(engine: Engine, console: Callable[..., RedisflowApp]) -> None:
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen.focused, Input))
        app.screen.focused.value = str(ROOT / "demos" / "task-list-sample.yaml")
        await pilot.press("enter")
        await wait_for(pilot, lambda: engine.count() == 1, what="pushed")
        await wait_for(pilot, lambda: len(table(app).wids) == 1)
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen.focused, Input))
        app.screen.focused.value = "/no/such/file.yaml"
        await pilot.press("enter")
        await wait_for(pilot, lambda: any(n.severity == "error" for n in app._notifications))
        assert engine.count() == 1


async def test_dag_view_shows_live_states(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wid = engine.push(shapes.diamond4())
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen.focused, Input))
        await pilot.press(*wid, "enter")
        await wait_for(pilot, lambda: workflow_open(app))
        dag = app.screen.query_one(DagView)
        await wait_for(pilot, lambda: dag.layout_ is not None, what="layout")
        await wait_for(
            pilot,
            lambda: (
                "[◌ TestNode1]" in "\n".join(widget_lines(dag))
                and "[○ TestNode4]" in "\n".join(widget_lines(dag))
            ),
            what="first chips",
        )
        thread = threading.Thread(target=drain, args=(engine,))
        thread.start()
        thread.join()
        await wait_for(
            pilot,
            lambda: "[✔ TestNode4]" in "\n".join(widget_lines(dag)),
            what="succeeded chips",
        )
        assert "[✔ TestNode1]──[✔ TestNode2]─┤" in "\n".join(widget_lines(dag))
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, WorkflowsScreen))


@pytest.mark.same_on_cluster
async def test_big_workflow_opens_grouped(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wid = engine.push(shapes.fan(1000, name="shard-scan"))
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        app.goto(wid)
        await wait_for(pilot, lambda: workflow_open(app))
        screen = app.screen
        assert isinstance(screen, WorkflowScreen)
        await wait_for(pilot, lambda: bool(screen.query(DagView)), what="the graph mounted")
        dag = screen.query_one(DagView)
        await wait_for(pilot, lambda: dag.layout_ is not None, what="layout")
        assert screen.view_mode == "groups"
        await wait_for(pilot, lambda: "[○ part ×1000    0/1000]" in "\n".join(widget_lines(dag)))
        await pilot.press("d")  # → around the selected task
        await wait_for(pilot, lambda: dag.mode == "focus")
        await pilot.press("d")  # → per level
        await wait_for(pilot, lambda: dag.mode == "levels")
        await wait_for(pilot, lambda: "1,000" in "\n".join(widget_lines(dag)))


@pytest.mark.same_on_cluster
async def test_read_only_hides_actions(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wid = engine.push(shapes.chain9())
    app = console(read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: table(app).wids == [wid])
        await pilot.press("p", "x", "C", "o")
        await pilot.pause(0.3)
        assert engine.state(wid) == "running"
        assert app.screen is home(app)
        shown = {key for key, active in app.screen.active_bindings.items() if active.enabled}
        assert not shown & {"p", "r", "x", "t", "c", "C", "o"}
        assert {"s", "slash", "g"} <= shown
        assert app.screen.query_one(Footer)


async def test_agents_and_events_screens(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    wid = engine.push(failing())
    drain(engine, agent_id="worker-1")
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        agents = app.screen.query_one("#agents", LiveTable)
        await wait_for(pilot, lambda: agents.row_count == 1)
        assert agents.text(0, "id") == "worker-1" and "stopped" in agents.text(0, "state")
        assert "stale >10s" in agents.text(0, "limits") and "dead >15s" in agents.text(0, "limits")
        await pilot.press("3")
        from redisflow_tui.widgets.event_log import EventLogView

        log = app.screen.query_one(EventLogView)
        await wait_for(pilot, lambda: len(log.events) >= 5, what="history")
        kinds = [e.kind for e in log.events]
        assert kinds[-1] == "workflow.pushed"  # newest first: the push is the oldest
        assert "workflow.failed" in kinds
        await pilot.press("space")  # freeze
        engine.push(shapes.diamond4())
        await pilot.pause(0.4)
        assert [e.kind for e in log.events] == kinds
        await pilot.press("space")
        await wait_for(pilot, lambda: log.events[0].kind == "workflow.pushed")
        await pilot.press("slash", *"failed")
        await wait_for(pilot, lambda: all("failed" in e.kind for e in log.events))
        log.focus()
        log.cursor = 0
        await pilot.press("enter")
        await wait_for(pilot, lambda: workflow_open(app))
        assert app.screen.wid == wid


async def test_live_events_show_task_names(
    engine: Engine, console: Callable[..., RedisflowApp]
) -> None:
    from redisflow_tui.widgets.event_log import EventLogView

    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        log = app.screen.query_one(EventLogView)
        wid = engine.push(shapes.diamond4())  # after the history was read: live events
        drain(engine, agent_id="worker-1")

        def named() -> bool:
            return {
                e.task_name for e in log.events if e.wid == wid and e.kind == "task.succeeded"
            } == {"TestNode1", "TestNode2", "TestNode3", "TestNode4"}

        await wait_for(pilot, named, what="task names on live events")
        row = next(
            i for i, e in enumerate(log.events) if e.wid == wid and e.task_name == "TestNode4"
        )
        line = log.render_line(row - log.scroll_offset.y)  # newest first: on screen
        assert "#3 TestNode4" in "".join(seg.text for seg in line)


@pytest.mark.same_on_cluster
async def test_help_and_palette(engine: Engine, console: Callable[..., RedisflowApp]) -> None:
    wid = engine.push(shapes.diamond4())
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "HelpScreen")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, WorkflowsScreen))
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "CommandPalette")
        await pilot.press(*f"workflow {wid}")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: workflow_open(app))
        assert app.screen.wid == wid


@pytest.mark.same_on_cluster
@pytest.mark.parametrize("theme", ["nord", "textual-light"])
async def test_themes_render(
    engine: Engine, console: Callable[..., RedisflowApp], theme: str
) -> None:
    engine.push(shapes.diamond4())
    app = console(theme=theme)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: len(table(app).wids) == 1)
        await pilot.press("ctrl+t")
        await pilot.pause(0.1)
        assert app.theme != theme


async def test_an_eviction_policy_is_an_error_notification(
    console: Callable[..., RedisflowApp], engine: Engine
) -> None:
    engine.redis.config_set("maxmemory-policy", "allkeys-lru")
    try:
        app = console()
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(
                pilot, lambda: any("allkeys-lru" in n.message for n in app._notifications)
            )
            [note] = [n for n in app._notifications if "allkeys-lru" in n.message]
            assert note.severity == "error"
    finally:
        engine.redis.config_set("maxmemory-policy", "noeviction")


@pytest.mark.parametrize(
    "given",
    [
        {"file": "orders.csv"},
        {"file": "orders.csv", "note": "é€😀" * 20},  # stored in pieces
        {"file": "orders.csv", "note": "é€😀" * 200},  # in a key of its own
    ],
)
async def test_the_workflow_screen_shows_the_runs_input(
    console: Callable[..., RedisflowApp], engine: Engine, given: dict
) -> None:
    wf = Workflow("with-input")
    wf.task("a")
    wid = engine.push(wf, input=given)
    shown = json.dumps(given, separators=(",", ":"), ensure_ascii=False)
    shown = shown if len(shown) <= 60 else shown[:59] + "…"
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: table(app).wids == [wid])
        await pilot.press("enter")
        await wait_for(pilot, lambda: workflow_open(app))
        screen = app.screen
        assert isinstance(screen, WorkflowScreen)
        await wait_for(pilot, lambda: screen.view.status is not None)
        header = screen.query_one("#wf-header")
        await wait_for(pilot, lambda: "orders.csv" in str(header.render()))
        assert f"input {shown}" in str(header.render())


async def test_the_workflow_screen_says_when_no_live_agent_serves_a_ready_task(
    console: Callable[..., RedisflowApp], engine: Engine
) -> None:
    wf = Workflow("unserved")
    wf.task("resize", type="slow")
    wid = engine.push(wf)
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: table(app).wids == [wid])
        await pilot.press("enter")
        await wait_for(pilot, lambda: workflow_open(app))
        screen = app.screen
        assert isinstance(screen, WorkflowScreen)
        header = screen.query_one("#wf-header")
        await wait_for(pilot, lambda: "no live agent" in str(header.render()))
        assert "no live agent serves type 'slow' (ready: resize)" in str(header.render())
