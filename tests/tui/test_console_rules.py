"""Failure branches in the console: upstream_failed's look, dashed edges, the why line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import wait_for, widget_lines, workflow_open

from engine import Agent, Engine, Task, TaskFailed, load_file
from redisflow_tui.app import RedisflowApp
from redisflow_tui.screens.workflow import WorkflowScreen
from redisflow_tui.widgets.dag_view import DagView
from redisflow_tui.widgets.task_detail import TaskDetail
from redisflow_tui.widgets.task_table import TaskTable

# what the console shows and does with its keys: the same on a cluster, whose reads the
# engine's own tests check there
pytestmark = pytest.mark.same_on_cluster

SIZE = (160, 45)
BRANCH = Path(__file__).resolve().parents[2] / "demos" / "branch.yaml"


def deploy_fails(task: Task) -> Any:
    if task.name == "deploy":
        raise TaskFailed("the new version did not start")
    return task.name


async def test_a_failure_branch_as_an_operator_sees_it(
    engine: Engine, console: Callable[..., RedisflowApp], tmp_path: Path
) -> None:
    [wf] = load_file(BRANCH)
    wid = engine.push(wf)
    Agent(engine, "tester", {"": deploy_fails}).run(until_idle=True)
    assert engine.state(wid) == "succeeded"  # rollback handled the failure
    app = console()
    async with app.run_test(size=SIZE) as pilot:
        app.goto(wid)
        await wait_for(pilot, lambda: workflow_open(app))
        screen = app.screen
        assert isinstance(screen, WorkflowScreen)
        dag = screen.query_one(DagView)
        await wait_for(pilot, lambda: dag.layout_ is not None and screen.view.status is not None)
        await wait_for(pilot, lambda: "[⇣ announce]" in "\n".join(widget_lines(dag)))
        lines = widget_lines(dag)
        drawn = "\n".join(lines)
        assert "[⇣ announce]" in drawn and "[✔ rollback]" in drawn
        # the edge into the failure branch is dashed, the one into announce is not
        rollback = next(line for line in lines if "rollback]" in line)
        announce = next(line for line in lines if "announce]" in line)
        before = rollback[: rollback.index("[✔ rollback]")]
        assert before.endswith("⇢"), rollback  # (a longer edge is dashed too: ╌ ╎)
        assert not announce[: announce.index("[⇣ announce]")].endswith("⇢"), announce
        # upstream_failed has a colour of its own
        assert dag._style("upstream_failed") not in (dag._style("failed"), dag._style("skipped"))
        # the task table and the detail say what happened and why
        table = screen.query_one(TaskTable)
        table.focus()
        table.select_task(2)
        await wait_for(pilot, lambda: screen.sel_task == 2)
        detail = str(screen.query_one(TaskDetail).query_one("#detail-body").content)
        assert "⇣ upstream_failed" in detail
        assert "all_success: 0/1 succeeded, 1 failed → upstream_failed" in detail
        table.select_task(3)
        await wait_for(pilot, lambda: screen.sel_task == 3)
        detail = str(screen.query_one(TaskDetail).query_one("#detail-body").content)
        assert "one_failed (failure branch)" in detail
        assert "one_failed: 0/1 succeeded, 1 failed" in detail
        header = str(screen.query_one("#wf-header").content)
        assert "1 upstream_failed" in header
        app.save_screenshot("rules.svg", str(tmp_path))
    assert (tmp_path / "rules.svg").stat().st_size > 0
