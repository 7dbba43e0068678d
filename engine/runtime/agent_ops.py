"""What an operator does with agents: ask one to drain and stop, and see the agents that
matter now (those gone a while are hidden; Redis forgets them after a day, reap.lua).

Draining is a flag in Redis (``P:agents:drain``, written by drain.lua) that the agent's
heartbeat reads: the agent then stops claiming, finishes and reports what it runs, and
leaves (stop.lua clears the flag and marks it stopped). No loop of its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from engine.core.model import AgentInfo, AgentState
from engine.errors import NotFoundError, StateError
from engine.store.codec import RECORD_FORM

if TYPE_CHECKING:
    from engine.runtime.deployment import Deployment

GONE_AFTER_S = 600.0  # a stopped or dead agent seen longer ago than this is hidden
GONE = (AgentState.STOPPED, AgentState.DEAD)


def drain(engine: Deployment, agent_id: str) -> None:
    """Ask ``agent_id`` to drain on every shard it is live on (see the module doc).

    Raises :class:`NotFoundError` when no shard knows it, :class:`StateError` when it is
    known but live on none (stopped, or dead)."""
    answers = [engine.store.calls.drain(shard, agent_id) for shard in engine.keys.all_shards()]
    if 1 in answers:
        return
    if all(a < 0 for a in answers):
        raise NotFoundError(f"no agent {agent_id!r} is known (redisflow agents lists them)")
    agents = engine.store.reads.agents()
    state = next((a.state.value for a in agents if a.id == agent_id), "not live")
    raise StateError(f"agent {agent_id!r} is {state}: only a live agent can be drained")


def gone(agent: AgentInfo, after_s: float = GONE_AFTER_S) -> bool:
    """Whether ``agent`` stopped or died more than ``after_s`` ago."""
    age = agent.heartbeat_age
    return agent.state in GONE and (age is None or age > after_s)


def earlier_release(agents: Iterable[AgentInfo]) -> list[AgentInfo]:
    """The live agents of a release that writes an earlier task record form: agents of
    this release do not start while they run (register.lua)."""
    return [a for a in agents if a.state not in GONE and a.records < RECORD_FORM]


def current_agents(agents: Iterable[AgentInfo], after_s: float = GONE_AFTER_S) -> list[AgentInfo]:
    """The agents not :func:`gone`: live ones, and those that left or died lately."""
    return [a for a in agents if not gone(a, after_s)]
