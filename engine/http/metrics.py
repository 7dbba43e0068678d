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

from engine.runtime.rollups import metric_families

if TYPE_CHECKING:
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


def registry_for(engine: Engine) -> CollectorRegistry:
    """A registry of its own (not the process-wide default) with the collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RedisCollector(engine))
    return registry
