"""``GET /metrics``: a Prometheus collector that reads Redis on each scrape.

Nothing is counted in the server's memory: every figure comes from the deployment's
counters (:meth:`engine.Engine.gauges`), so any number of servers (or workers) report
the same values, and Prometheus computes rates from the ``_total`` counters.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from engine.core.unserved import LIVE
from engine.runtime.rollups import metric_families

if TYPE_CHECKING:
    from engine.core.model import AgentInfo

    from ..client import Engine


class RedisCollector(Collector):
    """Every redisflow metric, read from Redis when Prometheus scrapes."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        g = self.engine.gauges()
        s = g.stats

        workflows = GaugeMetricFamily(
            "redisflow_workflows", "Workflows by state, now.", labels=["state"]
        )
        for state, n in sorted(s.workflows.items()):
            workflows.add_metric([state], n)
        yield workflows

        tasks = GaugeMetricFamily("redisflow_tasks", "Tasks by state, now.", labels=["state"])
        for state, n in sorted(s.tasks.items()):
            tasks.add_metric([state], n)
        yield tasks

        yield CounterMetricFamily(
            "redisflow_workflows_pushed", "Workflows pushed.", value=s.workflows_pushed
        )
        yield CounterMetricFamily("redisflow_tasks_pushed", "Tasks pushed.", value=s.tasks_pushed)
        ended = CounterMetricFamily(
            "redisflow_tasks_ended",
            "Tasks that ended: succeeded, or failed their last attempt.",
            labels=["state"],
        )
        for state, n in sorted(g.ended.items()):
            ended.add_metric([state], n)
        yield ended

        depth = GaugeMetricFamily(
            "redisflow_queue_depth", "Ready tasks waiting for an agent, per type.", labels=["type"]
        )
        age = GaugeMetricFamily(
            "redisflow_queue_oldest_age_seconds",
            "How long the oldest ready task of each type has waited (0: none waits).",
            labels=["type"],
        )
        for q in g.queues:
            depth.add_metric([q.type], q.depth)
            age.add_metric([q.type], q.oldest_age_s)
        yield depth
        yield age

        agents = GaugeMetricFamily("redisflow_agents", "Agents by state.", labels=["state"])
        for state in ("online", "stale", "dead", "stopped"):
            agents.add_metric([state], g.agents.get(state, 0))
        yield agents
        yield from _agent_families(g.agent_list, [q.type for q in g.queues])

        yield GaugeMetricFamily(
            "redisflow_retention_backlog",
            "Finished workflows past their retention that housekeeping has not removed yet.",
            value=s.retention_backlog,
        )
        yield GaugeMetricFamily(
            "redisflow_schedule_lag_seconds",
            "How far the earliest due schedule is behind (0: none is late).",
            value=g.schedule_lag_s,
        )
        yield GaugeMetricFamily(
            "redisflow_workflows_past_deadline",
            "Runs still running past their deadline (housekeeping fails them within seconds).",
            value=g.past_deadline,
        )
        yield GaugeMetricFamily(
            "redisflow_deadline_lag_seconds",
            "How far the run longest past its deadline is behind it (0: none is).",
            value=g.deadline_lag_s,
        )
        used = GaugeMetricFamily(
            "redisflow_redis_memory_used_bytes",
            "Memory Redis uses (INFO memory used_memory), per master.",
            labels=["node"],
        )
        limit = GaugeMetricFamily(
            "redisflow_redis_memory_max_bytes",
            "Redis's maxmemory (0: no limit), per master.",
            labels=["node"],
        )
        for m in g.memory:
            used.add_metric([m.node], m.used)
            limit.add_metric([m.node], m.limit)
        yield used
        yield limit

        rejected = CounterMetricFamily(
            "redisflow_http_rejected",
            "Requests to push a run or deliver to a trigger that were refused, by reason.",
            labels=["reason"],
        )
        deliveries = CounterMetricFamily(
            "redisflow_http_deliveries",
            "Trigger deliveries that ran (accepted) or replayed an earlier run (duplicate).",
            labels=["trigger", "outcome"],
        )
        for field, n in sorted(g.http.items()):
            kind, _, what = field.partition(":")
            if kind == "rejected":
                rejected.add_metric([what], n)
            elif kind in ("accepted", "duplicate"):
                deliveries.add_metric([what, kind], n)
        yield rejected
        yield deliveries
        yield from metric_families(self.engine)  # run-time history (engine/runtime/rollups.py)


def _agent_families(agents: list[AgentInfo], queued: list[str]) -> Iterator[Metric]:
    """Live agents (online or stale: those that claim) per task type, every type with a
    queue included (0: nothing serves it), and each live agent's load."""
    live = [a for a in agents if a.state in LIVE]
    serving = GaugeMetricFamily(
        "redisflow_agents_serving",
        "Live agents (online or stale) that run each task type (0: none does).",
        labels=["type"],
    )
    counts = dict.fromkeys(queued, 0)
    for a in live:
        for t in set(a.types):
            counts[t] = counts.get(t, 0) + 1
    for t, n in sorted(counts.items()):
        serving.add_metric([t], n)
    yield serving
    running = GaugeMetricFamily(
        "redisflow_agent_running_tasks", "Tasks each live agent holds now.", labels=["agent"]
    )
    slots = GaugeMetricFamily(
        "redisflow_agent_concurrency",
        "Tasks each live agent runs at once at most (its --concurrency).",
        labels=["agent"],
    )
    for a in live:
        running.add_metric([a.id], len(a.running))
        slots.add_metric([a.id], a.concurrency)
    yield running
    yield slots


def registry_for(engine: Engine) -> CollectorRegistry:
    """A registry of its own (not the process-wide default) with the collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RedisCollector(engine))
    return registry
