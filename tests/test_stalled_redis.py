"""A stalled Redis (SIGSTOP, then SIGCONT) does not count against the agents' leases.

Leases are kept on Redis's clock; a Redis that stood still for longer than a lease would,
at resume, find every lease expired and hand every running task to another agent while
its first agent was still running it. lease_clock (``lib/lease.lua``) moves the leases on by a
gap no heartbeat could have filled, so only heartbeats missed while Redis ran count. An
agent that does lose its lease tells its handlers (``task.cancelled``; an ``--exec``
child gets SIGTERM).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
from engine_helpers import Hand, agent_thread, spawn_agent, stop_process, wait_for
from own_server import admin, server  # noqa: F401 - fixtures

from engine import EmbeddedRedis, Engine, Task, Workflow
from engine.runtime.handlers import exec_handler

pytestmark = pytest.mark.single_redis

TESTS = Path(__file__).resolve().parent


@contextmanager
def frozen(redis_server: EmbeddedRedis, seconds: float) -> Iterator[None]:
    """redis-server stopped (SIGSTOP) for ``seconds``, then running again."""
    assert redis_server.process is not None
    redis_server.process.send_signal(signal.SIGSTOP)
    try:
        time.sleep(seconds)
        yield
    finally:
        redis_server.process.send_signal(signal.SIGCONT)


def one_task(eng: Engine, payload: Any = None) -> str:
    wf = Workflow("w")
    wf.task("a", payload)
    return eng.push(wf)


@pytest.fixture()
def eng(server: EmbeddedRedis, admin: redis.Redis) -> Iterator[Engine]:  # noqa: F811
    with Engine.connect(server.url) as e:
        yield e


def kinds(eng: Engine) -> list[str]:
    return [e.kind for e in eng.events(200)]


@pytest.mark.slow
def test_a_frozen_redis_does_not_expire_a_healthy_agents_lease(
    server: EmbeddedRedis,  # noqa: F811
    eng: Engine,
) -> None:
    runner = Hand(eng, "runner", lease_s=3.0)
    wid = one_task(eng)
    task = runner.claim_one()
    with frozen(server, 6.0):  # twice the lease: on Redis's clock every lease has run out
        pass
    # another agent's housekeeping comes first after the freeze
    assert eng.maintain(keeper="keeper", hold_s=1.0, lease_s=3.0)[0] == 0  # nobody reaped
    assert runner.heartbeat() == 1
    st = eng.status(wid)
    assert (st.tasks[0].state, st.tasks[0].agent, st.tasks[0].attempts) == ("running", "runner", 1)
    assert runner.succeed(task, "done") == 1
    assert eng.state(wid) == "succeeded"
    [extended] = [e for e in eng.events(200) if e.kind == "agent.leases_extended"]
    assert extended.data["agents"] == 1 and extended.data["gap_ms"] >= 5000
    assert "task.requeued" not in kinds(eng)


@pytest.mark.slow
def test_a_dead_agent_is_still_reaped_after_a_freeze(
    server: EmbeddedRedis,  # noqa: F811
    eng: Engine,
) -> None:
    dead = Hand(eng, "dead", lease_s=3.0)
    live = Hand(eng, "live", lease_s=3.0)
    wid = one_task(eng)
    dead.claim_one()  # and never heartbeats again
    with frozen(server, 6.0):
        pass
    assert eng.maintain(keeper="live", hold_s=1.0, lease_s=3.0)[0] == 0  # the freeze does not count

    def reaped() -> bool:
        live.heartbeat()
        return eng.maintain(keeper="live", hold_s=1.0, lease_s=3.0)[0] == 1

    # at most one lease of Redis running later (generous bound for a loaded machine)
    wait_for(reaped, timeout=20, what="the dead agent to be reaped")
    task = live.claim_one()
    assert (task.workflow_id, task.attempt) == (wid, 2)


@pytest.mark.parametrize("concurrency", [1, 2])  # inline, and in the pool
def test_a_handler_is_told_when_its_attempt_is_taken(eng: Engine, concurrency: int) -> None:
    """An agent Redis declared dead (its lease expired while Redis ran) sets
    ``task.cancelled`` on what it runs: those tasks were handed on."""
    seen: list[tuple[int, bool]] = []
    started = threading.Event()

    def handler(task: Task) -> int:
        if task.attempt == 1:
            started.set()
            seen.append((task.attempt, task.cancelled.wait(30)))
        else:
            seen.append((task.attempt, task.cancelled.is_set()))
        return task.attempt

    wid = one_task(eng)
    with agent_thread(eng, {"": handler}, agent_id="told", lease_s=1.0, concurrency=concurrency):
        assert started.wait(30)
        shard = eng.keys.shard_of(wid)

        def declared_dead() -> bool:  # its lease ran out, then housekeeping reaped it
            eng.redis.zadd(shard.agents_live, {"told": 0})
            return eng.maintain()[0] == 1

        wait_for(declared_dead, what="the agent to be declared dead")
        assert eng.wait(wid, timeout=30) == "succeeded"
    # in the pool, attempt 2 may start before attempt 1's thread, told, has noted it
    assert sorted(seen) == [(1, True), (2, False)]
    st = eng.status(wid)
    assert (st.tasks[0].output, st.tasks[0].attempts) == (2, 2)


CHILD = """
import os, signal, sys, time
folder = sys.argv[1]
sys.stdin.read()
def term(*_):
    open(os.path.join(folder, "terminated"), "w").close()
    sys.exit(143)
signal.signal(signal.SIGTERM, term)
open(os.path.join(folder, "started"), "w").close()
time.sleep(30)
"""


def test_an_exec_child_is_signalled_when_its_attempt_is_taken(eng: Engine, tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    run = exec_handler(f"{sys.executable} {script} {tmp_path}")
    outcome: list[str] = []
    task = Task("1", 0, "a", "", None, 1)

    def target() -> None:
        try:
            run(task)
        except Exception as e:  # noqa: BLE001 - the test reads it
            outcome.append(str(e))

    thread = threading.Thread(target=target)
    thread.start()
    wait_for(lambda: (tmp_path / "started").exists(), what="the child to start")
    task.cancelled.set()
    thread.join(30)
    assert (tmp_path / "terminated").exists()
    assert outcome and "cancelled" in outcome[0]


def starts_in(logs: Path) -> list[list[str]]:
    """The start lines the agents' handler logged (tests/chaos_handler.py), split."""
    return [
        line.split(" ")
        for p in logs.glob("*.log")
        for line in p.read_text().splitlines()
        if line.startswith("S ")
    ]


@pytest.mark.slow
def test_agents_run_nothing_twice_across_a_redis_freeze(
    server: EmbeddedRedis,  # noqa: F811
    eng: Engine,
    tmp_path: Path,
) -> None:
    """Real agent processes (3 s leases) running 8 s tasks while Redis stands still for
    7 s: every task runs once, on one agent."""
    logs = tmp_path / "runs"
    logs.mkdir()
    tags = []
    for k in range(4):
        wf = Workflow(f"w{k}")
        wf.task("t0", {"w": f"w{k}", "f": 0, "s": 8000})
        tags.append(eng.push(wf))
    procs = []
    for me in ("f1", "f2"):
        env = {**os.environ, "REDISFLOW_URL": server.url, "RF_CHAOS_LOG": str(logs)}
        env["RF_CHAOS_ME"] = me
        args = ["--id", me, "--handler", "chaos_handler:run", "--lease", "3", "--concurrency", "2"]
        procs.append(spawn_agent(*args, env=env, cwd=TESTS, log=tmp_path / f"{me}.err"))
    try:
        wait_for(lambda: len(starts_in(logs)) >= 4, what="every task to start")
        with frozen(server, 7.0):
            pass
        for wid in tags:
            assert eng.wait(wid, timeout=60) == "succeeded"
    finally:
        for p in procs:
            stop_process(p, signal.SIGTERM)
    starts = starts_in(logs)
    assert sorted(s[3] for s in starts) == ["w0", "w1", "w2", "w3"], starts
    assert all(json.loads(" ".join(s[6:])) == {} for s in starts)
