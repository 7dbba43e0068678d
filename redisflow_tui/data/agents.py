"""The Agents screen's data: liveness explained with its thresholds."""

from __future__ import annotations

from engine import AgentInfo, AgentState

ORDER = {AgentState.ONLINE: 0, AgentState.STALE: 1, AgentState.DEAD: 2, AgentState.STOPPED: 3}


def sort_agents(agents: list[AgentInfo]) -> list[AgentInfo]:
    """Online first, then stale, dead and stopped; by id within each."""
    return sorted(agents, key=lambda a: (ORDER.get(a.state, 9), a.id))


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
    "dead: lease expired, its tasks handed on · stopped: left cleanly"
)
