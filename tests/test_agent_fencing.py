"""Fencing before a handler starts, on a real Redis: an agent whose lease was lost between
a claim and the start of the task's handler (here: its condition held up while its
heartbeats fail) does not run the handler: another agent has the task by then."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis
from engine_helpers import agent_thread, wait_for

import engine.runtime.agent as agent_module
from engine import Engine, Task, Workflow


@pytest.mark.parametrize("how", ["inline", "threads", "async"])
def test_a_task_whose_lease_was_lost_before_its_handler_started_is_not_run(
    engine: Engine, redis_url: str, monkeypatch: Any, how: str
) -> None:
    """Each way an agent runs handlers: inline, in its thread pool, on its event loop."""
    wf = Workflow("fenced")
    wf.task("t", when="input.go")
    wid = engine.push(wf, {"go": True})
    ran: list[tuple[str, int]] = []  # (agent, attempt) of each handler call
    held, release = threading.Event(), threading.Event()
    real_gate = agent_module.gate

    def gate(task: Task, *args: Any) -> Any:
        if task.attempt == 1:  # the first agent's claim: held up until the test says
            held.set()
            release.wait(60)
        return real_gate(task, *args)

    monkeypatch.setattr(agent_module, "gate", gate)
    # the first agent has a store of its own, whose heartbeats fail until released
    first = Engine.connect(redis_url, shards=len(engine.keys.all_shards()))
    real_heartbeat = first.store.calls.heartbeat

    def heartbeat(*args: Any) -> int:
        if not release.is_set():
            raise redis.ConnectionError("heartbeats held back by the test")
        return real_heartbeat(*args)

    monkeypatch.setattr(first.store.calls, "heartbeat", heartbeat)

    def handler(name: str) -> Any:
        def run(t: Task) -> None:
            ran.append((name, t.attempt))

        async def run_async(t: Task) -> None:
            ran.append((name, t.attempt))

        return run_async if how == "async" and name == "first" else run

    try:
        options: dict[str, Any] = {"lease_s": 1.0, "heartbeat_s": 0.2}
        if how == "threads":
            options["concurrency"] = 2
        with agent_thread(first, {"": handler("first")}, "first", **options) as a:
            wait_for(held.is_set, what="the first agent to claim the task")
            # its lease runs out: housekeeping hands the task to the second agent, which
            # runs it (attempt 2)
            with agent_thread(engine, {"": handler("second")}, "second", lease_s=5.0):
                wait_for(lambda: engine.status(wid).state.value == "succeeded", 60, "a run")
            release.set()  # the first agent's condition is decided: true
            wait_for(lambda: getattr(a, "dropped", 0) or len(ran) > 1, 60, "the first agent")
    finally:
        release.set()
        first.close()
    assert ran == [("second", 2)]
    assert a.dropped == 1 and a.rejected == 0  # not run, and nothing reported
    t = engine.status(wid).tasks[0]
    assert (t.state.value, t.attempts) == ("succeeded", 2)
