"""Agent processes that die, freeze, restart or are told to stop, mid-task."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest
from chaos import RedisProcess
from engine_helpers import agent_thread, assert_stats_agree, spawn_agent, stop_process, wait_for

from engine import Engine, Workflow

pytestmark = pytest.mark.slow

HANDLER = '''\
"""Test handler: logs each start, then holds the task until the gate file exists."""
import os
import time
from pathlib import Path

LOG = Path(os.environ["RF_TEST_LOG"])
GATE = Path(os.environ["RF_TEST_GATE"])


def hold(task):
    with LOG.open("a") as f:
        f.write(f"{os.environ['RF_TEST_ME']} {task.name} {task.attempt}\\n")
    while not GATE.exists():
        time.sleep(0.02)
    return {"by": os.environ["RF_TEST_ME"], "attempt": task.attempt}
'''


class Rig:
    """Agent processes sharing a handler module, a start log and a gate file."""

    def __init__(self, tmp_path: Path, env: dict[str, str]) -> None:
        self.dir = tmp_path
        (tmp_path / "holder.py").write_text(HANDLER)
        self.log = tmp_path / "starts.log"
        self.gate = tmp_path / "gate"
        self.env = {**env, "RF_TEST_LOG": str(self.log), "RF_TEST_GATE": str(self.gate)}
        self.procs: list = []

    def start(self, agent_id: str, *extra: str):
        env = {**self.env, "RF_TEST_ME": agent_id}
        proc = spawn_agent(
            "--id", agent_id, "--handler", "holder:hold", *extra, env=env, cwd=self.dir
        )
        self.procs.append(proc)
        return proc

    def starts(self) -> list[tuple[str, str, int]]:
        if not self.log.exists():
            return []
        rows = [line.split() for line in self.log.read_text().splitlines()]
        return [(who, name, int(attempt)) for who, name, attempt in rows]

    def open_gate(self) -> None:
        self.gate.touch()

    def close(self) -> None:
        for proc in self.procs:
            stop_process(proc)


@pytest.fixture()
def rig(tmp_path: Path, cli_env: dict[str, str]):
    r = Rig(tmp_path, cli_env)
    yield r
    r.close()


def one_task(name: str = "job") -> Workflow:
    wf = Workflow(name)
    wf.task("t", payload="x")
    return wf


def test_a_killed_agents_task_is_rerun_by_another_after_its_lease(engine: Engine, rig: Rig) -> None:
    victim = rig.start("victim", "--lease", "1")
    wid = engine.push(one_task())
    wait_for(lambda: rig.starts() == [("victim", "t", 1)], what="the victim to start")
    victim.send_signal(signal.SIGKILL)
    victim.wait(30)
    rig.open_gate()
    heir = rig.start("heir", "--lease", "3", "--until-idle")
    out, err = heir.communicate(timeout=60)
    assert heir.returncode == 0, err
    assert rig.starts() == [("victim", "t", 1), ("heir", "t", 2)]
    t = engine.status(wid).task("t")
    assert (t.state, t.agent, t.attempts, t.output) == (
        "succeeded",
        "heir",
        2,
        {"by": "heir", "attempt": 2},
    )
    assert t.failures == 0  # a lost lease is not a handler failure
    kinds = [(e.kind, e.data.get("agent")) for e in engine.events()]
    assert ("task.requeued", "victim") in kinds and ("agent.dead", "victim") in kinds
    states = {a.id: a.state for a in engine.agents()}
    assert states == {"victim": "dead", "heir": "stopped"}
    assert_stats_agree(engine)


def test_a_restarted_agent_takes_its_task_back_at_once(engine: Engine, rig: Rig) -> None:
    first = rig.start("worker", "--lease", "60")
    wid = engine.push(one_task())
    wait_for(lambda: rig.starts() == [("worker", "t", 1)], what="the first run")
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    rig.open_gate()
    again = rig.start("worker", "--lease", "60", "--until-idle")
    out, err = again.communicate(timeout=60)
    assert again.returncode == 0, err
    assert rig.starts() == [("worker", "t", 1), ("worker", "t", 2)]
    t = engine.status(wid).task("t")
    assert (t.state, t.agent, t.attempts) == ("succeeded", "worker", 2)
    # Taken back by registering, long before the 60 s lease could have run out.
    kinds = {e.kind for e in engine.events()}
    assert "task.requeued" not in kinds and "agent.dead" not in kinds
    assert_stats_agree(engine)


def test_a_frozen_agents_late_completion_is_rejected(engine: Engine, rig: Rig) -> None:
    zombie = rig.start("zombie", "--lease", "1")
    wid = engine.push(one_task())
    wait_for(lambda: rig.starts() == [("zombie", "t", 1)], what="the zombie to start")
    zombie.send_signal(signal.SIGSTOP)  # alive, holding the task, but silent
    rig.open_gate()
    heir = rig.start("heir", "--lease", "3", "--until-idle")
    _, err = heir.communicate(timeout=60)
    assert heir.returncode == 0, err
    assert engine.status(wid).task("t").output == {"by": "heir", "attempt": 2}
    zombie.send_signal(signal.SIGCONT)  # its handler returns now, too late
    wait_for(
        lambda: any(e.kind == "task.rejected" for e in engine.events()),
        what="the zombie's report",
    )
    zombie.send_signal(signal.SIGTERM)
    _, err = zombie.communicate(timeout=60)
    assert zombie.returncode == 0, err
    assert "0 tasks done, 1 rejected" in err
    t = engine.status(wid).task("t")
    assert (t.state, t.agent, t.attempts, t.output) == (
        "succeeded",
        "heir",
        2,
        {"by": "heir", "attempt": 2},
    )
    [rejected] = [e for e in engine.events() if e.kind == "task.rejected"]
    assert rejected.data == {"agent": "zombie", "attempt": 1}
    assert_stats_agree(engine)


@pytest.mark.parametrize("concurrency", [1, 2])
def test_sigterm_finishes_in_flight_and_claims_nothing_more(
    engine: Engine, rig: Rig, concurrency: int
) -> None:
    wf = Workflow("several")
    for i in range(concurrency + 1):
        wf.task(f"t{i}", priority=10 - i)
    agent = rig.start("polite", "--concurrency", str(concurrency))
    wid = engine.push(wf)
    in_flight = [("polite", f"t{i}", 1) for i in range(concurrency)]
    wait_for(lambda: sorted(rig.starts()) == in_flight, what="the first tasks")
    agent.send_signal(signal.SIGTERM)
    time.sleep(0.3)  # let the signal land while the tasks are held; nothing is timed
    wait_for(
        lambda: [a.state for a in engine.agents()] == ["online"] and agent.poll() is None,
        what="the agent to keep running",
    )
    rig.open_gate()
    _, err = agent.communicate(timeout=60)
    assert agent.returncode == 0, err
    assert "Traceback" not in err
    assert sorted(rig.starts()) == in_flight
    st = engine.status(wid)
    assert {st.task(f"t{i}").state for i in range(concurrency)} == {"succeeded"}
    last = st.task(f"t{concurrency}")
    assert last.state == "ready"  # never started: there for the next agent
    assert engine.stats().queued[""] == 1
    assert [a.state for a in engine.agents()] == ["stopped"]
    assert_stats_agree(engine)


def test_agents_ride_out_a_redis_restart(tmp_path: Path) -> None:
    """Redis stops (persisting to its append-only file) mid-task and comes back."""
    server = RedisProcess(tmp_path).start()
    try:
        with Engine.connect(server.url) as engine:
            wf = Workflow("restart")
            first = wf.task("first")
            for i in range(5):
                wf.task(f"next{i}", after=[first])
            wid = engine.push(wf)
            started, go_on = threading.Event(), threading.Event()

            def handler(task) -> str:
                if task.name == "first":
                    started.set()
                    go_on.wait(30)
                return task.name

            with agent_thread(engine, {"": handler}, "survivor", concurrency=2):
                assert started.wait(30)
                server.shutdown()  # a clean shutdown flushes the append-only file
                go_on.set()  # the handler returns while Redis is down
                server.start()
                assert engine.wait(wid, timeout=60) == "succeeded"
            st = engine.status(wid)
            assert {t.output for t in st.tasks} == {t.name for t in st.tasks}
            assert st.task("first").attempts == 1  # reported after the restart, not re-run
            assert_stats_agree(engine)
    finally:
        server.stop()
