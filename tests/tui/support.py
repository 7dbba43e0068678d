"""Helpers shared by the console tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from textual.css.query import NoMatches
from textual.pilot import Pilot

from engine import Agent, Engine, Task, TaskFailed


async def wait_for(
    pilot: Pilot[Any], predicate: Callable[[], Any], timeout: float = 30.0, what: str = ""
) -> None:
    """Let the app run until ``predicate()`` is true (fail after ``timeout`` seconds).

    The timeout is only an upper bound against a hang (a passing wait returns as soon as
    it holds), generous for a loaded machine. A widget the predicate queries that is not
    mounted yet (a screen pushed but still composing) counts as not yet."""
    deadline = time.monotonic() + timeout
    while not _holds(predicate):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        await pilot.pause(0.05)


def _holds(predicate: Callable[[], Any]) -> bool:
    try:
        return bool(predicate())
    except NoMatches:
        return False


def ok_or_fail(task: Task) -> Any:
    """A handler: fails tasks whose payload says ``"fail"``, else echoes the payload."""
    if task.payload == "fail":
        raise TaskFailed(f"{task.name} was told to fail")
    return {"echo": task.payload}


def drain(engine: Engine, agent_id: str = "tester") -> None:
    """Run one agent until no work is left."""
    Agent(engine, agent_id, {"": ok_or_fail}).run(until_idle=True)


def widget_lines(widget: Any) -> list[str]:
    """The visible lines of a line-API widget, as plain text."""
    return [
        "".join(seg.text for seg in widget.render_line(y)).rstrip()
        for y in range(widget.size.height)
    ]


def workflow_open(app: Any) -> bool:
    """Whether the app shows a workflow's screen with its widgets mounted (pushing a
    screen returns before it has composed)."""
    from redisflow_tui.screens.workflow import WorkflowScreen

    return isinstance(app.screen, WorkflowScreen) and bool(app.screen.query("#dag"))
