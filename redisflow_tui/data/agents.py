"""The Agents screen's data: liveness explained with its thresholds."""

from __future__ import annotations

from engine import GONE_AFTER_S, AgentInfo, AgentState, Engine, current_agents, plural

from .actions import Action

ORDER = {
    AgentState.ONLINE: 0,
    AgentState.DRAINING: 1,
    AgentState.STALE: 2,
    AgentState.DEAD: 3,
    AgentState.STOPPED: 4,
}


def sort_agents(agents: list[AgentInfo]) -> list[AgentInfo]:
    """Online first, then draining, stale, dead and stopped; by id within each."""
    return sorted(agents, key=lambda a: (ORDER.get(a.state, 9), a.id))


def read_agents(engine: Engine) -> tuple[list[AgentInfo], int]:
    """The agents to show (those gone a while left out, sorted) and how many were left out."""
    every = engine.agents()
    shown = current_agents(every)
    return sort_agents(shown), len(every) - len(shown)


def plan_drain(engine: Engine, agent: AgentInfo) -> Action:
    """Ask ``agent`` to drain: it claims nothing more, finishes what it runs, and exits."""
    body = (
        f"Agent {agent.id} ({agent.host}:{agent.pid}) will claim nothing more, finish and "
        f"report its {plural(len(agent.running), 'running task')}, and exit, at its next "
        f"heartbeat (every {agent.heartbeat_s:g}s). Its queued work waits for other agents."
    )

    def run(e: Engine) -> str:
        e.drain_agent(agent.id)
        return f"Agent {agent.id} asked to drain: it stops once its tasks are done"

    return Action(f"Drain agent {agent.id}?", body, "Drain agent", run)


def thresholds(agent: AgentInfo) -> str:
    """``stale >10s · dead >15s``: when this agent counts as stale and as dead."""
    return f"stale >{agent.heartbeat_s * 2:g}s · dead >{agent.lease_s:g}s"


def running_text(agent: AgentInfo) -> str:
    """``3/4``: tasks held out of the agent's concurrency."""
    return f"{len(agent.running)}/{agent.concurrency}"


def counts(agents: list[AgentInfo]) -> dict[str, int]:
    """How many agents are in each state."""
    out = {s.value: 0 for s in AgentState}
    for a in agents:
        out[a.state.value] += 1
    return out


LEGEND = (
    "online: beat within 2 intervals · stale: beat late, lease not expired · "
    "dead: lease expired, its tasks handed on · stopped: left cleanly · draining: asked "
    f"to stop (d), finishing its tasks · gone over {GONE_AFTER_S / 60:g} min ago: hidden"
)
