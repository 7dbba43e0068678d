"""Agents ride out dropped connections in every loop, and only SIGTERM/SIGINT ends them."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from chaos import TESTS, ChaosProxy, RedisProcess
from engine_helpers import (
    agent_thread,
    assert_stats_agree,
    primaries,
    spawn_agent,
    stop_process,
    wait_for,
)

from engine import Agent, EmbeddedRedis, Engine, Task, Workflow
from engine.connect.urls import open_client

pytestmark = pytest.mark.slow

QUIET = {"idle_check_s": 60.0, "maintain_s": 60.0, "lease_s": 60.0}  # no timer wakes it


@pytest.fixture()
def proxy(redis_server: EmbeddedRedis, redis_url: str) -> Iterator[ChaosProxy]:
    p = ChaosProxy(redis_server.port).start()
    yield p
    p.close()


def one_task(tag: str) -> Workflow:
    wf = Workflow(tag)
    wf.task("t", {"w": tag, "f": 0, "s": 0})
    return wf


def logged_starts(folder: Path) -> list[str]:
    return [
        line.split()[4]
        for path in folder.glob("*.log")
        for line in path.read_text().splitlines()
        if line.startswith("S ")
    ]


def start_agent(folder: Path, url: str, agent_id: str = "ag", *extra: str):
    env = {**os.environ, "REDISFLOW_URL": url}
    env |= {"RF_CHAOS_LOG": str(folder), "RF_CHAOS_ME": agent_id}
    args = ["--id", agent_id, "--handler", "chaos_handler:run", *extra]
    return spawn_agent(*args, env=env, cwd=TESTS, log=folder / f"{agent_id}.err")


def stop_cleanly(proc, folder: Path) -> None:
    assert proc.poll() is None, (folder / "ag.err").read_text()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0, (folder / "ag.err").read_text()


# cuts connections with a proxy in front of one Redis (cluster clients go around it)
@pytest.mark.single_redis
def test_an_idle_agent_survives_a_drop_just_after_a_wake_up(
    engine: Engine, proxy: ChaosProxy, tmp_path: Path
) -> None:
    agent = start_agent(tmp_path, proxy.url)
    try:
        wait_for(lambda: [a.state for a in engine.agents()] == ["online"], what="the agent")
        time.sleep(0.3)  # idle, waiting on its wake-up channel
        # The wake-up arrives, then the connection drops and Redis is away for a while:
        # the agent is between reading the message and draining the rest.
        proxy.cut_after(b"message", down_s=1.0)
        wid = engine.push(one_task("woken"))
        wait_for(lambda: proxy.cuts, what="the cut")
        assert engine.wait(wid, timeout=60) == "succeeded"
        assert engine.wait(engine.push(one_task("later")), timeout=60) == "succeeded"
        stop_cleanly(agent, tmp_path)
    finally:
        stop_process(agent)


# cuts connections with a proxy in front of one Redis (cluster clients go around it)
@pytest.mark.single_redis
def test_a_claim_whose_reply_was_lost_is_taken_back(
    engine: Engine, proxy: ChaosProxy, tmp_path: Path
) -> None:
    """The server ran the claim; the agent never heard: the task is still its to run."""
    seen: list[int] = []
    with Engine.connect(proxy.url) as via_proxy:
        with agent_thread(via_proxy, {"": lambda t: seen.append(t.attempt)}, **QUIET):
            wait_for(lambda: [a.state for a in engine.agents()] == ["online"], what="agent")
            time.sleep(0.3)
            proxy.swallow_reply_to(b"EVALSHA")  # the next script call is the claim
            wid = engine.push(one_task("claimed"))
            assert engine.wait(wid, timeout=30) == "succeeded"
    t = engine.status(wid).task("t")
    assert (t.attempts, seen) == (2, [2])  # the first attempt never ran: taken back
    assert_stats_agree(engine)


# cuts connections with a proxy in front of one Redis (cluster clients go around it)
@pytest.mark.single_redis
def test_an_agent_starting_while_redis_is_away_registers_when_it_is_back(
    engine: Engine, proxy: ChaosProxy
) -> None:
    with Engine.connect(proxy.url) as via_proxy:
        proxy.refuse(3.0)
        with agent_thread(via_proxy, {"": lambda t: "done"}, "late"):
            wid = engine.push(one_task("first"))
            assert engine.wait(wid, timeout=30) == "succeeded"
    assert [(a.id, a.state) for a in engine.agents()] == [("late", "stopped")]


# cuts connections with a proxy in front of one Redis (cluster clients go around it)
@pytest.mark.single_redis
def test_an_agent_whose_connection_drops_during_its_start_up_checks_waits(
    engine: Engine, proxy: ChaosProxy, tmp_path: Path
) -> None:
    """Connected, then cut while it checks its permissions (a script loaded at start-up):
    it tries again instead of exiting "Redis unreachable"."""
    wid = engine.push(one_task("started"))
    proxy.swallow_reply_to(b"SCRIPT", down_s=1.0)
    proc = start_agent(tmp_path, proxy.url, "ag", "--until-idle")
    assert proc.wait(60) == 0, (tmp_path / "ag.err").read_text()
    assert engine.state(wid) == "succeeded"


# cuts connections with a proxy in front of one Redis (cluster clients go around it)
@pytest.mark.single_redis
@pytest.mark.parametrize("concurrency", [1, 2])
def test_an_agent_stopping_while_redis_is_away_reports_and_leaves_when_it_is_back(
    engine: Engine, proxy: ChaosProxy, concurrency: int
) -> None:
    started, gate = threading.Semaphore(0), threading.Event()

    def hold(task: Task) -> int:
        started.release()
        gate.wait(30)
        return task.attempt

    wf = Workflow("held")
    for i in range(concurrency + 1):
        wf.task(f"t{i}", priority=10 - i)
    wid = engine.push(wf)
    with Engine.connect(proxy.url) as via_proxy:
        agent = Agent(via_proxy, "leaving", {"": hold}, concurrency=concurrency, lease_s=30)
        runner = threading.Thread(target=agent.run)
        runner.start()
        for _ in range(concurrency):
            assert started.acquire(timeout=30)
        proxy.refuse(2.0)
        agent.stop()
        gate.set()  # the handlers return while Redis is away
        runner.join(60)
        assert not runner.is_alive()
    st = engine.status(wid)
    assert [st.task(f"t{i}").state for i in range(concurrency)] == ["succeeded"] * concurrency
    assert st.task(f"t{concurrency}").state == "ready"
    assert [(a.id, a.state) for a in engine.agents()] == [("leaving", "stopped")]
    assert_stats_agree(engine)


# cuts connections with a proxy in front of one Redis (cluster clients go around it)
@pytest.mark.single_redis
def test_an_agent_working_until_idle_rides_out_connections_dropping_all_along(
    engine: Engine, proxy: ChaosProxy
) -> None:
    wids = [engine.push(one_task(f"w{k}")) for k in range(60)]
    stop = threading.Event()

    def work(task: Task) -> int:
        time.sleep(0.02)
        return task.attempt

    def cutter() -> None:
        while not stop.wait(0.03):
            proxy.cut()

    cutting = threading.Thread(target=cutter, daemon=True)
    cutting.start()
    try:
        with Engine.connect(proxy.url) as via_proxy:
            Agent(via_proxy, "busy", {"": work}, idle_check_s=0.2).run(until_idle=True)
    finally:
        stop.set()
        cutting.join(10)
    assert proxy.cuts > 3
    assert {engine.status(w).state for w in wids} == {"succeeded"}
    assert_stats_agree(engine)


def test_an_idle_agent_is_woken_again_after_its_connections_are_killed(
    engine: Engine,
) -> None:
    done = threading.Event()
    with agent_thread(engine, {"": lambda t: done.set()}, **QUIET):
        wait_for(lambda: [a.state for a in engine.agents()] == ["online"], what="the agent")
        time.sleep(0.3)
        admin = open_client(engine.url)
        masters = primaries(admin)  # every master of a cluster: each holds a subscription
        assert sum(m.client_kill_filter(_type="pubsub") for m in masters) >= 1
        for m in masters:
            m.client_kill_filter(_type="normal", skipme=True)
        admin.close()
        time.sleep(0.3)
        engine.push(one_task("after"))
        # the wake-up reaches the resubscribed channel: the 60 s timer never fires
        assert done.wait(20)


@pytest.mark.parametrize("how", ["shutdown", "sigkill"])
def test_an_idle_agent_process_survives_redis_restarts(tmp_path: Path, how: str) -> None:
    server = RedisProcess(tmp_path, fsync="always").start()
    agent = start_agent(tmp_path, server.url)
    try:
        with Engine.connect(server.url) as engine:
            wait_for(lambda: [a.state for a in engine.agents()] == ["online"], what="agent")
            for k in range(3):
                time.sleep(0.5)
                server.shutdown() if how == "shutdown" else server.kill()
                time.sleep(0.3)
                server.start()
                wid = engine.push(one_task(f"after{k}"))
                assert engine.wait(wid, timeout=60) == "succeeded"
            assert logged_starts(tmp_path) == ["t"] * 3
        stop_cleanly(agent, tmp_path)
    finally:
        stop_process(agent)
        server.stop()


# cuts connections with a proxy in front of one Redis (cluster clients go around it)
@pytest.mark.single_redis
def test_an_until_idle_agent_rides_out_a_drop_while_checking_for_work_left(
    engine: Engine, proxy: ChaosProxy
) -> None:
    wids = [engine.push(one_task(f"w{k}")) for k in range(3)]
    proxy.swallow_reply_to(b"ZCARD", down_s=1.0)  # the check that nothing is left
    with Engine.connect(proxy.url) as via_proxy:
        agent = Agent(via_proxy, "checker", {"": lambda t: t.attempt}, idle_check_s=0.2)
        agent.run(until_idle=True)
    assert proxy.cuts == 1
    assert {engine.status(w).state for w in wids} == {"succeeded"}
    assert [(a.id, a.state) for a in engine.agents()] == [("checker", "stopped")]


def test_an_agent_without_permission_exits_at_once_with_one_line(
    engine: Engine, redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    """A refused command is a misconfiguration, not an outage: no retrying for ever."""
    admin = redis.Redis.from_url(redis_server.url)
    admin.acl_setuser(
        "noscripts",
        enabled=True,
        passwords=["+pw"],
        keys=["*"],
        channels=["*"],
        commands=["+@all", "-evalsha", "-eval"],
    )
    try:
        url = f"redis://noscripts:pw@127.0.0.1:{redis_server.port}/0"
        agent = start_agent(tmp_path, url)
        assert agent.wait(60) == 3  # a permission denial: exit 3, naming what is missing
        err = (tmp_path / "ag.err").read_text().strip()
        assert "Traceback" not in err and "may not run EVAL" in err, err
        assert len(err.splitlines()) == 1, err
    finally:
        admin.acl_deluser("noscripts")
        admin.close()


# CONFIG SET maxmemory on the one Redis process
@pytest.mark.single_redis
def test_an_outcome_redis_refuses_for_lack_of_memory_is_sent_again(engine: Engine) -> None:
    """Out of memory, the report fails whole (no script runs a write): it is kept, not lost."""
    started, gate = threading.Event(), threading.Event()
    ran: list[int] = []

    def hold(task: Task) -> None:
        ran.append(task.attempt)
        started.set()
        gate.wait(30)

    admin = redis.Redis.from_url(engine.url)
    try:
        with agent_thread(engine, {"": hold}, **QUIET):
            wid = engine.push(one_task("oom"))
            assert started.wait(30)
            admin.config_set("maxmemory", 1)
            gate.set()
            time.sleep(1.0)  # the report is refused meanwhile
            admin.config_set("maxmemory", 0)
            assert engine.wait(wid, timeout=30) == "succeeded"
    finally:
        admin.config_set("maxmemory", 0)
        admin.close()
    assert (ran, engine.status(wid).task("t").attempts) == ([1], 1)
    assert_stats_agree(engine)
