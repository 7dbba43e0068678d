"""Waits survive what kills processes: a Redis restart (append-only file) with a signal
kept, a wait suspended and a timer armed; an agent process SIGKILLed while its keeper
holds child runs to start; 10,000 runs waiting at once hold no agent and cost a few
hundred bytes each."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from chaos import RedisProcess
from engine_helpers import (
    Hand,
    assert_stats_agree,
    run_agent,
    spawn_agent,
    stop_process,
    wait_for,
)

from engine import Engine, Workflow
from engine.runtime.wait_keeper import WaitKeeper


def gates() -> Workflow:
    wf = Workflow("gates")
    a = wf.task("a")
    early = wf.task("early", after=[a], wait={"signal": "early"})
    held = wf.task("held", wait={"signal": "held", "timeout": "1h"})
    nap = wf.task("nap", wait={"sleep": 0.3})
    wf.task("z", after=[early, held, nap])
    return wf


@pytest.mark.slow
def test_waits_ride_out_a_redis_restart(tmp_path: Path) -> None:
    server = RedisProcess(tmp_path).start()
    try:
        with Engine.connect(server.url) as engine:
            wid = engine.push(gates())
            assert engine.signal(wid, "early", "kept").outcome == "kept"
            WaitKeeper(engine).step()  # held and nap suspended, their timers armed
            st = engine.status(wid)
            assert st.task("held").state == "suspended" and st.task("nap").state == "suspended"
            server.shutdown()  # SHUTDOWN writes the append-only file
            server.start()
            wait_for(lambda: engine.redis.ping())
            assert engine.status(wid).task("held").state == "suspended"
            assert engine.signal(wid, "held", "after the restart").outcome == "delivered"

            def moved_on() -> bool:  # the nap's timer ends it once its time comes
                run_agent(engine, {"": lambda t: t.name})
                WaitKeeper(engine).step()
                return engine.state(wid).finished

            wait_for(moved_on, timeout=60, what="the run to finish")
            st = engine.status(wid)
            assert st.state == "succeeded", st.to_dict()
            assert st.task("early").output == "kept"
            assert st.task("held").output == "after the restart"
            assert_stats_agree(engine)
    finally:
        server.stop()


@pytest.mark.slow
def test_a_killed_agent_leaves_waits_and_child_runs_to_the_next(
    engine: Engine, cli_env: dict[str, str], tmp_path: Path
) -> None:
    engine.put_template("name: child\ntasks:\n  - name: inside\n")
    wf = Workflow("parent")
    a = wf.task("a")
    g = wf.task("approve", after=[a], wait={"signal": "go"})
    wf.task("kid", after=[g], run="child")
    (tmp_path / "noop.py").write_text("def run(task):\n    return task.name\n")
    first = spawn_agent("--id", "first", "--handler", "noop:run", env=cli_env, cwd=tmp_path)
    try:
        wid = engine.push(wf)
        wait_for(lambda: engine.status(wid).task("approve").state == "suspended")
        stop_process(first, signal.SIGKILL)
        engine.signal(wid, "go", {"by": "ops"})
        second = spawn_agent("--id", "second", "--handler", "noop:run", env=cli_env, cwd=tmp_path)
        try:
            wait_for(lambda: engine.state(wid) == "succeeded", timeout=60)
        finally:
            stop_process(second, signal.SIGTERM)
    finally:
        stop_process(first)
    st = engine.status(wid)
    assert st.task("kid").output == "inside"
    assert engine.status(st.task("kid").child).parent == f"{wid}:2:1"  # type: ignore[arg-type]


def test_ten_thousand_waiting_runs_hold_no_agent(engine: Engine) -> None:
    wf = Workflow("approval")
    g = wf.task("approve", wait={"signal": "approve", "timeout": "2d"})
    wf.task("ship", after=[g])
    used = engine.redis.info("memory")["used_memory"]
    ids = engine.push_many([wf] * 10_000)
    keeper = WaitKeeper(engine)
    keeper.step()
    per_run = (engine.redis.info("memory")["used_memory"] - used) / 10_000
    stats = engine.stats()
    assert stats.tasks.get("suspended") == 10_000
    assert sum(engine.redis.zcard(s.timers) for s in engine.keys.all_shards()) == 10_000
    # nothing for an agent to do: a claim finds no task, no agent holds a lease
    hand = Hand(engine, "h")
    assert hand.claim() == []
    assert per_run < 2000, per_run  # a workflow hash, its timer, index entries
    print(f"memory per waiting run: {per_run:.0f} bytes")
    for wid in ids[:3]:
        engine.signal(wid, "approve")
    assert [t.name for t in hand.claim()] == ["ship"] * 3
