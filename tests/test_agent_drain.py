"""An operator asks an agent to drain (engine/runtime/agent_ops.py, drain.lua): at its next
heartbeat it stops claiming, finishes and reports what it runs, and leaves; agents gone
a while leave the list."""

from __future__ import annotations

import json
import threading

import httpx
import pytest
from engine_helpers import cli, spawn_agent, stop_process, wait_for
from test_http_server import Client, client  # noqa: F401 - the fixture

from engine import Agent, Engine, Task, Workflow
from engine.core.model import AgentInfo, AgentState, TaskState, WorkflowState
from engine.errors import NotFoundError, StateError
from engine.runtime.agent_ops import GONE_AFTER_S, current_agents


def slow_workflow(engine: Engine) -> str:
    wf = Workflow("slow")
    wf.task("work", type="slow")
    return engine.push(wf)


def test_a_drained_agent_finishes_its_task_claims_nothing_more_and_stops(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    started, go = threading.Event(), threading.Event()

    def work(_: Task) -> str:
        started.set()
        assert go.wait(30)
        return "done"

    first = slow_workflow(engine)
    agent = Agent(engine, "a1", {"slow": work}, lease_s=3, heartbeat_s=0.1, idle_check_s=0.2)
    thread = threading.Thread(target=agent.run, daemon=True)
    thread.start()
    assert started.wait(30)
    asked = cli("agents", "drain", "a1", env=cli_env)
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.startswith("agent a1: asked to drain")
    assert [a.state for a in engine.agents()] == [AgentState.DRAINING]
    listed = cli("agents", env=cli_env)
    assert "draining" in listed.stdout
    wait_for(agent._stopping.is_set, what="the heartbeat to read the drain request")
    second = slow_workflow(engine)  # pushed while it drains: never claimed by it
    go.set()
    thread.join(30)
    assert not thread.is_alive()
    assert engine.state(first) == WorkflowState.SUCCEEDED
    assert engine.status(second).tasks[0].state == TaskState.READY
    (info,) = engine.agents()
    assert info.state == AgentState.STOPPED and info.running == []
    assert not engine.redis.hexists(engine.keys.shard(0).agents_drain, "a1")
    with pytest.raises(StateError, match="agent 'a1' is stopped: only a live agent can be drained"):
        engine.drain_agent("a1")
    with pytest.raises(NotFoundError, match="no agent 'ghost' is known"):
        engine.drain_agent("ghost")
    unknown = cli("agents", "drain", "ghost", env=cli_env)
    assert unknown.returncode == 2 and len(unknown.stderr.strip().splitlines()) == 1


def test_a_drained_agent_process_exits(engine: Engine, cli_env: dict[str, str]) -> None:
    proc = spawn_agent(
        "--id", "proc-1", "--type", "x", "--exec", "true", "--lease", "1.5", env=cli_env
    )  # fmt: skip
    try:
        wait_for(
            lambda: [(a.id, a.state) for a in engine.agents()] == [("proc-1", AgentState.ONLINE)],
            what="the agent online",
        )
        asked = cli("agents", "drain", "proc-1", "--json", env=cli_env)
        assert asked.stdout.strip() == '{"agent":"proc-1","draining":true}', asked.stderr
        assert proc.wait(30) == 0
        assert [a.state for a in engine.agents()] == [AgentState.STOPPED]
    finally:
        stop_process(proc)


def test_http_drain_answers_404_and_409(engine: Engine, client: Client) -> None:  # noqa: F811
    api: httpx.Client = client()
    r = api.post("/v1/agents/ghost/drain")
    assert r.status_code == 404 and "no agent 'ghost'" in r.json()["error"]
    agent = Agent(engine, "a2", {"slow": lambda t: 1}, idle_check_s=0.2)
    agent.run(until_idle=True)  # registers, finds nothing, leaves: stopped
    r = api.post("/v1/agents/a2/drain")
    assert r.status_code == 409 and "is stopped" in r.json()["error"]


def _info(agent_id: str, state: AgentState, age: float) -> AgentInfo:
    return AgentInfo(agent_id, ["t"], 1, state, age, 30.0, 10.0, [])


def test_agents_gone_a_while_leave_the_list() -> None:
    agents = [
        _info("live", AgentState.ONLINE, 1.0),
        _info("left-now", AgentState.STOPPED, 5.0),
        _info("left-long-ago", AgentState.STOPPED, GONE_AFTER_S + 1),
        _info("died-long-ago", AgentState.DEAD, GONE_AFTER_S + 1),
        _info("stale", AgentState.STALE, GONE_AFTER_S + 1),
    ]
    assert [a.id for a in current_agents(agents)] == ["live", "left-now", "stale"]


def test_the_cli_hides_agents_gone_a_while(engine: Engine, cli_env: dict[str, str]) -> None:
    shard = engine.keys.shard(0)
    long_ago = int((engine.server_time() - 2 * GONE_AFTER_S) * 1000)
    engine.redis.hset(shard.agents, "old", '{"types": ["t"], "lease_s": 30}')
    engine.redis.hset(shard.agents_state, "old", "stopped")
    engine.redis.zadd(shard.agents_seen, {"old": long_ago})
    Agent(engine, "recent", {"t": lambda t: 1}, idle_check_s=0.2).run(until_idle=True)
    shown = cli("agents", env=cli_env)
    assert shown.returncode == 0, shown.stderr
    assert "recent" in shown.stdout and "old" not in shown.stdout.split("agents stopped")[0]
    assert "1 agents stopped or dead over 10m ago are hidden (--all shows them" in shown.stdout
    every = cli("agents", "--all", "--json", env=cli_env)
    assert sorted(a["id"] for a in json.loads(every.stdout)) == ["old", "recent"]
    bad = cli("agents", "old", env=cli_env)
    assert bad.returncode == 2 and "invalid choice: 'old' (choose from 'drain')" in bad.stderr
