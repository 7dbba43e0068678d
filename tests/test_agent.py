"""The in-process agent: routing, handlers, concurrency, stopping, leases."""

from __future__ import annotations

import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import redis
from engine_helpers import Hand, agent_thread, assert_stats_agree, run_agent, wait_for

from engine import Agent, AgentState, Engine, Task, TaskFailed, Workflow, exec_handler
from engine.connect.urls import open_client
from engine.store.gauges import read_gauges
from engine.store.keys import ShardKeys


def fan(name: str, types: list[str], width: int = 3) -> Workflow:
    """A root per type, each with ``width`` children of the same type."""
    wf = Workflow(name)
    for t in types:
        root = wf.task(f"{t or 'plain'}-root", type=t, payload=t)
        for k in range(width):
            wf.task(f"{t or 'plain'}-{k}", type=t, after=[root])
    return wf


def test_each_agent_gets_only_its_types(engine: Engine) -> None:
    seen: dict[str, list[tuple[str, str]]] = defaultdict(list)
    lock = threading.Lock()

    def handler_for(agent_id: str):
        def handle(task: Task) -> str:
            with lock:
                seen[agent_id].append((task.type, task.name))
            return agent_id

        return handle

    serves = {"ax": ["x"], "ay": ["y"], "axz": ["x", "z"], "plain": [""]}
    ids = [engine.push(fan(f"w{i}", ["x", "y", "z", ""])) for i in range(3)]
    with (
        agent_thread(engine, {t: handler_for("ax") for t in serves["ax"]}, "ax"),
        agent_thread(engine, {t: handler_for("ay") for t in serves["ay"]}, "ay", concurrency=2),
        agent_thread(engine, {t: handler_for("axz") for t in serves["axz"]}, "axz"),
        agent_thread(engine, {t: handler_for("plain") for t in serves["plain"]}, "plain"),
    ):
        for wid in ids:
            assert engine.wait(wid, timeout=60) == "succeeded"
    for agent_id, runs in seen.items():
        assert {t for t, _ in runs} <= set(serves[agent_id]), agent_id
    assert {t for t, _ in seen["axz"]} >= {"z"}  # only axz serves z
    for wid in ids:
        for t in engine.status(wid).tasks:
            assert t.type in serves[t.agent] and t.output == t.agent
    assert sum(len(r) for r in seen.values()) == 3 * 16
    assert_stats_agree(engine)


def test_one_agent_claims_across_its_types_by_priority(engine: Engine) -> None:
    wf = Workflow("mixed")
    wf.task("x-low", type="x", priority=1)
    wf.task("y-high", type="y", priority=9)
    wf.task("x-mid", type="x", priority=5)
    wf.task("y-low", type="y", priority=0)
    engine.push(wf)
    order: list[str] = []
    run_agent(engine, {"x": lambda t: order.append(t.name), "y": lambda t: order.append(t.name)})
    assert order == ["y-high", "x-mid", "x-low", "y-low"]


def test_concurrency_runs_tasks_side_by_side_and_never_claims_more(
    engine: Engine, redis_url: str
) -> None:
    limit = 3
    wf = Workflow("wide")
    for i in range(12):
        wf.task(f"t{i}", type=("a", "b", "c")[i % 3])
    wid = engine.push(wf)
    barrier = threading.Barrier(limit, timeout=30)
    lock = threading.Lock()
    active = peak = 0
    running_seen: list[int] = []
    probe = open_client(redis_url, decode_responses=True)
    running_key = engine.keys.shard_of(wid).stats

    def handler(task: Task) -> None:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
            running_seen.append(int(probe.hget(running_key, "t:running") or 0))
        barrier.wait()  # proves `limit` handlers run at once
        with lock:
            active -= 1

    run_agent(engine, {"a": handler, "b": handler, "c": handler}, concurrency=limit)
    probe.close()
    assert engine.state(wid) == "succeeded"
    assert peak == limit
    assert max(running_seen) <= limit  # claims never exceed the free slots


def test_exec_handler_runs_a_command_per_task(engine: Engine, tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(
        "import json, sys\n"
        "task = json.load(sys.stdin)\n"
        "p = task['payload']\n"
        "if p == 'fail':\n"
        "    print('asked to fail', file=sys.stderr)\n"
        "    sys.exit(3)\n"
        "if p == 'text':\n"
        "    print('plain words')\n"
        "    sys.exit(0)\n"
        "print(json.dumps({'up': str(p).upper(), 'parents': task['parents'],\n"
        "                  'key': task['idempotency_key']}))\n"
    )
    wf = Workflow("exec")
    a = wf.task("a", payload="hello")
    wf.task("b", payload="world", after=[a])
    wf.task("c", payload="fail")
    wf.task("d", payload="text")
    wid = engine.push(wf)
    run_agent(engine, {"": exec_handler(f"{sys.executable} {script}")})
    st = engine.status(wid)
    assert st.task("a").output == {"up": "HELLO", "parents": {}, "key": f"{wid}:0:1"}
    assert st.task("b").output["parents"] == {"a": st.task("a").output}
    c = st.task("c")
    assert (c.state, c.error) == ("failed", "asked to fail")
    assert st.task("d").output == "plain words"
    assert st.state == "failed"


def test_exec_handler_reports_a_missing_command(engine: Engine) -> None:
    wf = Workflow("exec")
    wf.task("a")
    wid = engine.push(wf)
    run_agent(engine, {"": exec_handler("/nonexistent/worker --flag")})
    assert engine.status(wid).task("a").error == "command not found: /nonexistent/worker"


def test_output_over_the_limit_fails_the_attempt(redis_url: str) -> None:
    with Engine.connect(redis_url, max_payload=100) as engine:
        wf = Workflow("big")
        wf.task("big")
        wf.task("small")
        wid = engine.push(wf)
        run_agent(engine, {"": lambda t: "x" * 200 if t.name == "big" else "ok"})
        st = engine.status(wid)
        assert st.task("big").state == "failed"
        assert "over the 100-byte limit" in st.task("big").error
        assert st.task("small").output == "ok"


def test_task_failed_message_is_stored_as_is(engine: Engine) -> None:
    wf = Workflow("w")
    wf.task("a")
    wid = engine.push(wf)

    def handler(task: Task) -> None:
        raise TaskFailed("upstream returned 503")

    run_agent(engine, {"": handler})
    assert engine.status(wid).task("a").error == "upstream returned 503"


def test_retries_run_again_without_waiting_for_the_idle_timer(engine: Engine) -> None:
    wf = Workflow("flaky", retry_backoff=0.05)
    wf.task("f", max_attempts=4)
    wid = engine.push(wf)
    attempts: list[int] = []

    def handler(task: Task) -> str:
        attempts.append(task.attempt)
        if task.attempt < 4:
            raise RuntimeError("not yet")
        return "finally"

    # A long idle timer: only the backoff's own deadline can wake the agent in time.
    run_agent(engine, {"": handler}, idle_check_s=30.0, maintain_s=30.0)
    assert attempts == [1, 2, 3, 4]
    f = engine.status(wid).task("f")
    assert (f.state, f.failures, f.output) == ("succeeded", 3, "finally")


def test_stop_finishes_in_flight_tasks_and_starts_no_more(engine: Engine) -> None:
    wf = Workflow("batch")
    for i in range(5):
        wf.task(f"t{i}", priority=-i)
    wid = engine.push(wf)
    ran: list[str] = []
    agent = Agent(engine, "stopper", {"": lambda t: (ran.append(t.name), agent.stop())}, batch=5)
    agent.run()  # inline, one batch of five claimed
    assert ran == ["t0"]
    st = engine.status(wid)
    assert st.task("t0").state == "succeeded"
    assert {st.task(f"t{i}").state for i in range(1, 5)} == {"ready"}  # handed back
    # they never started: no attempt counted, no agent recorded
    assert {(st.task(f"t{i}").attempts, st.task(f"t{i}").agent) for i in range(1, 5)} == {(0, None)}
    assert len(engine.redis.zrange(engine.keys.shard_of(wid).queue(""), 0, -1)) == 4
    assert [a.state for a in engine.agents()] == [AgentState.STOPPED]
    assert_stats_agree(engine)
    attempts: list[int] = []
    run_agent(engine, {"": lambda t: attempts.append(t.attempt)})
    assert attempts == [1, 1, 1, 1]


def test_a_drain_longer_than_the_lease_keeps_the_lease(engine: Engine) -> None:
    wf = Workflow("slow")
    wf.task("slow")
    wid = engine.push(wf)
    started, release = threading.Event(), threading.Event()

    def handler(task: Task) -> str:
        started.set()
        release.wait(30)
        return "done"

    with agent_thread(
        engine, {"": handler}, "drainer", lease_s=0.6, heartbeat_s=0.1, concurrency=2
    ) as agent:
        assert started.wait(30)
        agent.stop()
        # Several leases' worth of housekeeping while the task is still in flight.
        before = engine.server_time()
        wait_for(lambda: engine.maintain() and engine.server_time() - before > 2.0)
        release.set()
    st = engine.status(wid)
    assert (st.state, st.task("slow").attempts) == ("succeeded", 1)
    assert agent.rejected == 0 and agent.processed == 1
    assert not [e for e in engine.events() if e.kind == "task.requeued"]


def test_an_agent_takes_back_its_own_tasks_on_start(engine: Engine) -> None:
    wf = Workflow("w")
    wf.task("a")
    wid = engine.push(wf)
    Hand(engine, "same").claim_one()  # as if the previous process died mid-task
    attempts: list[int] = []
    run_agent(engine, {"": lambda t: attempts.append(t.attempt)}, "same")
    assert attempts == [2]
    assert engine.state(wid) == "succeeded"


def test_an_agent_declared_dead_registers_again(engine: Engine) -> None:
    wf = Workflow("w")
    wf.task("a")
    with agent_thread(engine, {"": lambda t: "ok"}, "phoenix", lease_s=60, heartbeat_s=30) as agent:
        wait_for(lambda: any(a.id == "phoenix" for a in engine.agents()))
        for shard in engine.keys.all_shards():
            engine.redis.zadd(shard.agents_live, {"phoenix": 0})
        engine.maintain()  # reaped: its next claim is refused until it registers again
        wid = engine.push(wf)
        assert engine.wait(wid, timeout=30) == "succeeded"
        assert [a.state for a in engine.agents()] == [AgentState.ONLINE]
    assert agent.processed == 1


def test_agents_listing(engine: Engine) -> None:
    wf = Workflow("w")
    wf.task("a", type="t1")
    engine.push(wf)
    started, release = threading.Event(), threading.Event()

    def handler(task: Task) -> None:
        started.set()
        release.wait(30)

    with agent_thread(engine, {"t1": handler, "t2": handler}, "lister", concurrency=2):
        assert started.wait(30)
        [info] = engine.agents()
        assert (info.id, info.types, info.concurrency) == ("lister", ["t1", "t2"], 2)
        assert info.state == AgentState.ONLINE and info.heartbeat_age is not None
        assert len(info.running) == 1
        release.set()
    [info] = engine.agents()
    assert info.state == AgentState.STOPPED and info.running == []


def test_an_agent_on_several_shards_is_listed_once(redis_url: str) -> None:
    """An agent registers on every shard: listed (and counted in the gauges) once, holding
    the tasks it runs on each of them."""
    with Engine.connect(redis_url, shards=3) as engine:
        wf = Workflow("w")
        wf.task("a")
        wids = [engine.push(wf) for _ in range(3)]
        assert {engine.keys.shard_of(w).shard for w in wids} == {0, 1, 2}
        hand = Hand(engine, "wide")
        held = hand.claim(count=3)
        assert sorted(t.workflow_id for t in held) == sorted(wids)
        [info] = engine.agents()
        assert (info.id, info.state) == ("wide", AgentState.ONLINE)
        assert sorted(m.split(":")[0] for m in info.running) == sorted(wids)
        assert read_gauges(engine.store.reads).agents == {"online": 1}
        hand.stop(held)
        [info] = engine.agents()
        assert (info.state, info.running) == (AgentState.STOPPED, [])


def test_agent_rejects_bad_arguments(engine: Engine) -> None:
    with pytest.raises(ValueError, match="needs an id"):
        Agent(engine, " ", {"": lambda t: None})
    with pytest.raises(ValueError, match="at least one handler"):
        Agent(engine, "x", {})
    with pytest.raises(ValueError, match="concurrency"):
        Agent(engine, "x", {"": lambda t: None}, concurrency=0)
    with pytest.raises(ValueError, match="lease_s"):
        Agent(engine, "x", {"": lambda t: None}, lease_s=0)
    with pytest.raises(ValueError, match="heartbeat_s"):
        Agent(engine, "x", {"": lambda t: None}, lease_s=1, heartbeat_s=2)
    with pytest.raises(ValueError, match="batch"):
        Agent(engine, "x", {"": lambda t: None}, batch=-1)


def queued(pipe: Any) -> list[tuple[Any, ...]]:
    """The commands a pipeline holds: a cluster pipeline keeps them in its strategy."""
    strategy = getattr(pipe, "_execution_strategy", None)
    if strategy is not None:
        return [c.args for c in strategy.command_queue]
    return [c[0] for c in pipe.command_stack]


def sabotage(
    engine: Engine, script: str, *, after_running: bool, shard: ShardKeys | None = None
) -> list[int]:
    """Make the first pipeline that calls ``script`` (on ``shard``'s keys, when given: an
    agent claims from every shard in turn) lose its connection.

    ``after_running``: the server ran the pipeline and only the reply is lost (a claim's
    tasks are then recorded as the agent's without it knowing); otherwise nothing ran.
    Returns a list that gets one entry when the fault has been injected.
    """
    sha = engine.store.scripts.sha(script)
    real_pipeline = engine.redis.pipeline
    fired: list[int] = []

    def pipeline(*args, **kwargs):
        pipe = real_pipeline(*args, **kwargs)
        real_execute = pipe.execute

        def execute(*eargs, **ekwargs):
            calls = queued(pipe)
            if not fired and any(
                c[0] == "EVALSHA"
                and c[1] == sha
                and (shard is None or str(c[3]).startswith(shard.prefix))
                for c in calls
            ):
                fired.append(1)
                if after_running:
                    real_execute(*eargs, **ekwargs)
                pipe.reset()
                raise redis.ConnectionError("connection lost (injected)")
            return real_execute(*eargs, **ekwargs)

        pipe.execute = execute
        return pipe

    engine.redis.pipeline = pipeline  # type: ignore[method-assign]
    return fired


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_claim_whose_reply_is_lost_is_taken_back(
    redis_url: str, engine: Engine, concurrency: int
) -> None:
    wf = Workflow("w")
    wf.task("a")
    wid = engine.push(wf)
    with Engine.connect(redis_url) as agent_engine:
        shard = engine.keys.shard_of(wid)
        fired = sabotage(agent_engine, "claim", after_running=True, shard=shard)
        with agent_thread(agent_engine, {"": lambda t: t.attempt}, concurrency=concurrency):
            assert engine.wait(wid, timeout=30) == "succeeded"
    assert fired
    a = engine.status(wid).task("a")
    assert (a.attempts, a.output) == (2, 2)  # the orphaned claim was taken back
    assert_stats_agree(engine)


@pytest.mark.parametrize("concurrency", [1, 2])
def test_an_outcome_whose_report_fails_is_sent_again(
    redis_url: str, engine: Engine, concurrency: int
) -> None:
    wf = Workflow("w")
    wf.task("a")
    wf.task("b", after=["a"])
    wid = engine.push(wf)
    with Engine.connect(redis_url) as agent_engine:
        fired = sabotage(agent_engine, "complete", after_running=False)
        with agent_thread(agent_engine, {"": lambda t: t.name}, concurrency=concurrency) as agent:
            assert engine.wait(wid, timeout=30) == "succeeded"
    assert fired
    st = engine.status(wid)
    assert [(t.attempts, t.output) for t in st.tasks] == [(1, "a"), (1, "b")]
    assert agent.processed == 2 and agent.rejected == 0
    assert_stats_agree(engine)


def test_several_shards_work_as_one(redis_url: str) -> None:
    with Engine.connect(redis_url, shards=3) as engine:
        ids = [engine.push(fan(f"w{i}", ["", "x"], width=2)) for i in range(6)]
        shards = {int(wid) % 3 for wid in ids}
        assert shards == {0, 1, 2}
        for wid in ids:  # each workflow's keys live in its own shard
            assert engine.redis.exists(engine.keys.shard_of(wid).workflow(wid))
        engine.pause(ids[0])
        run_agent(engine, {"": lambda t: t.workflow_id, "x": lambda t: t.workflow_id})
        assert engine.state(ids[0]) == "paused"
        engine.release(ids[0])
        run_agent(engine, {"": lambda t: t.workflow_id, "x": lambda t: t.workflow_id})
        for wid in ids:
            st = engine.status(wid)
            assert st.state == "succeeded" and {t.output for t in st.tasks} == {wid}
        assert engine.stats().workflows["succeeded"] == 6
        assert engine.stats().tasks_pushed == 6 * 6
        assert [s.id for s in engine.list(limit=4)] == sorted(ids, key=int, reverse=True)[:4]
        assert engine.count("succeeded") == 6
        assert {e.wid for e in engine.events(500) if e.kind == "workflow.succeeded"} == set(ids)
        assert_stats_agree(engine)
        assert engine.cleanup_finished() == 6
        assert engine.count() == 0


def test_several_shards_never_hand_an_agent_more_than_its_free_slots(redis_url: str) -> None:
    with Engine.connect(redis_url, shards=3) as engine:
        for i in range(9):  # three single-task workflows ready on every shard
            wf = Workflow(f"w{i}")
            wf.task("t")
            engine.push(wf)
        gate = threading.Event()
        running: list[int] = []
        lock = threading.Lock()
        most = 0

        def hold(task: Task) -> None:
            nonlocal most
            with lock:
                running.append(1)
                most = max(most, len(running))
            gate.wait(10)
            with lock:
                running.pop()

        with agent_thread(engine, {"": hold}, concurrency=2):
            wait_for(lambda: len(running) == 2, what="two running tasks")
            time.sleep(0.3)  # more turns: still no third claim
            held = sum(engine.redis.scard(s.running_of("a1")) for s in engine.keys.all_shards())
            assert held == 2 and most == 2
            gate.set()
            wait_for(lambda: engine.stats().workflows["succeeded"] == 9, what="all nine")
        assert most == 2
        assert_stats_agree(engine)


def test_agent_reloads_scripts_the_server_forgot(engine: Engine) -> None:
    """SCRIPT FLUSH (or a restart) mid-run: calls answered NOSCRIPT are loaded and resent once."""
    wf = Workflow("flushy")
    prev = None
    for i in range(6):
        prev = wf.task(f"t{i}", after=[prev] if prev else [])
    wid = engine.push(wf)
    engine.redis.script_flush()
    runs: list[str] = []

    def handler(task: Task) -> None:
        runs.append(task.name)
        if task.name == "t2":
            engine.redis.script_flush()

    Agent(engine, "flushed", {"": handler}).run(until_idle=True)
    assert engine.status(wid).state == "succeeded"
    assert runs == [f"t{i}" for i in range(6)]  # each ran once: no call was sent twice
