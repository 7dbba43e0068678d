"""``async def`` handlers: awaited concurrently on the agent's event loop, next to plain
ones; their failures fail the attempt like a plain handler's."""

from __future__ import annotations

import asyncio
import functools
import threading
from typing import Any

from engine_helpers import assert_stats_agree, run_agent

from engine import Engine, Task, TaskFailed, Workflow
from engine.runtime.handlers import is_async


def flat(name: str, count: int, type: str = "") -> Workflow:
    wf = Workflow(name)
    for i in range(count):
        wf.task(f"t{i}", payload=i, type=type)
    return wf


def test_async_handlers_run_concurrently(engine: Engine) -> None:
    n = 16
    log: list[tuple[str, int]] = []
    all_started = asyncio.Event()

    async def handler(task: Task) -> int:
        log.append(("start", task.index))
        if sum(1 for kind, _ in log if kind == "start") == n:
            all_started.set()
        # Only returns once every task has started: run one after another, the first
        # would wait here for ever (the test's timeout).
        await asyncio.wait_for(all_started.wait(), timeout=30)
        await asyncio.sleep(0.05)
        log.append(("end", task.index))
        return int(task.payload) * 2

    wid = engine.push(flat("conc", n))
    agent = run_agent(engine, {"": handler}, concurrency=n)
    assert agent.processed == n
    status = engine.status(wid)
    assert status.state == "succeeded"
    assert [t.output for t in status.tasks] == [2 * i for i in range(n)]
    kinds = [kind for kind, _ in log]
    assert kinds == ["start"] * n + ["end"] * n  # all began before any ended
    assert_stats_agree(engine)


def test_async_handlers_respect_concurrency(engine: Engine) -> None:
    running = 0
    most = 0

    async def handler(task: Task) -> None:
        nonlocal running, most
        running += 1  # one event loop thread: no lock needed
        most = max(most, running)
        await asyncio.sleep(0.01)
        running -= 1

    wid = engine.push(flat("limit", 30))
    run_agent(engine, {"": handler}, concurrency=4)
    assert engine.status(wid).state == "succeeded"
    assert 1 <= most <= 4


def test_an_async_handler_that_raises_fails_the_attempt(engine: Engine) -> None:
    async def boom(task: Task) -> None:
        await asyncio.sleep(0)
        raise ValueError(f"bad row in {task.payload}")

    async def refuse(task: Task) -> None:
        raise TaskFailed("upstream said no")

    async def too_big(task: Task) -> str:
        return "x" * 2048

    wf = Workflow("fails")
    wf.task("a", payload="f.csv", type="boom")
    wf.task("b", type="refuse")
    wf.task("c", type="big")
    wid = engine.push(wf)
    small = Engine.connect(engine.url, max_payload=1024)
    try:
        run_agent(small, {"boom": boom, "refuse": refuse, "big": too_big}, concurrency=4)
    finally:
        small.close()
    status = engine.status(wid)
    assert status.state == "failed"
    errors = {t.name: t.error for t in status.tasks}
    assert errors["a"] == "ValueError: bad row in f.csv"
    assert errors["b"] == "upstream said no"
    assert errors["c"] is not None and "over the 1024-byte limit" in errors["c"]


def test_sync_and_async_handlers_in_one_agent(engine: Engine) -> None:
    threads: dict[str, set[str]] = {"sync": set(), "async": set()}

    async def aio(task: Task) -> str:
        threads["async"].add(threading.current_thread().name)
        await asyncio.sleep(0.001)
        return f"async {task.input['who']}"

    def plain(task: Task) -> str:
        threads["sync"].add(threading.current_thread().name)
        return f"sync {task.parents['first']}"

    wf = Workflow("mixed")
    first = wf.task("first", type="aio")
    for i in range(5):
        mid = wf.task(f"sync{i}", type="plain", after=[first])
        wf.task(f"async{i}", type="aio", after=[mid])
    wid = engine.push(wf, input={"who": "me"})
    agent = run_agent(engine, {"aio": aio, "plain": plain}, concurrency=4)
    assert agent.processed == 11
    status = engine.status(wid)
    assert status.state == "succeeded"
    outputs = {t.name: t.output for t in status.tasks}
    assert outputs["first"] == "async me"
    assert outputs["sync3"] == "sync async me"
    assert outputs["async4"] == "async me"
    assert len(threads["async"]) == 1  # the agent's one event loop thread
    assert threads["async"].isdisjoint(threads["sync"])


def test_mixed_agents_at_each_concurrency(engine: Engine) -> None:
    async def aio(task: Task) -> int:
        await asyncio.sleep(0)
        return 1

    def plain(task: Task) -> int:
        return 2

    for concurrency in (1, 3):
        wf = Workflow(f"m{concurrency}")
        for i in range(12):
            wf.task(f"t{i}", type="aio" if i % 2 else "plain")
        wid = engine.push(wf)
        agent = run_agent(engine, {"aio": aio, "plain": plain}, concurrency=concurrency)
        assert agent.processed == 12
        assert [t.output for t in engine.status(wid).tasks] == [2, 1] * 6
    assert_stats_agree(engine)


class AsyncCallable:
    async def __call__(self, task: Task) -> str:
        return "called"


async def _with_prefix(prefix: str, task: Task) -> str:
    return prefix + task.name


def test_async_handlers_are_told_apart() -> None:
    async def plain_async(task: Task) -> None:
        return None

    assert is_async(plain_async)
    assert is_async(AsyncCallable())
    assert is_async(functools.partial(_with_prefix, "p-"))
    assert not is_async(lambda task: None)


def test_an_awaitable_from_a_plain_handler_is_awaited(engine: Engine) -> None:
    """A plain function that returns a coroutine is still awaited (in its own loop)."""

    def returns_coroutine(task: Task) -> Any:
        return _with_prefix("late-", task)

    wid = engine.push(flat("late", 2))
    run_agent(engine, {"": returns_coroutine})
    assert [t.output for t in engine.status(wid).tasks] == ["late-t0", "late-t1"]
