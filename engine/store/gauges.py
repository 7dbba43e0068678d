"""What ``GET /metrics`` reports, read on each scrape: counters and a few cheap reads.

Every read here is O(1) or O(log n) per shard and task type (counters, queue lengths, a
queue's first members, the earliest deadline), plus one read of the agent registry and
``INFO memory`` per master: a scrape costs the same whatever the number of workflows.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, cast

import redis

from engine.core.model import AgentInfo, Stats

from .codec import F_CREATED, parse_record, step_field
from .keys import ShardKeys
from .layout import is_cluster
from .reads import Reads

ENDED = ("succeeded", "failed")  # the P:stats counters n:<state> (they only grow)
PRIORITY_BAND = 1_000_000_000_000  # a queue score is (1000 - priority) * this + wid
MAX_BANDS = 16  # priorities looked at per queue for the oldest ready task


@dataclass
class QueueGauge:
    """One task type's ready queue: how many wait, and how long the oldest has."""

    type: str
    depth: int
    oldest_age_s: float


@dataclass
class MemoryGauge:
    """One Redis server's memory (a master's, on a cluster), from ``INFO memory``."""

    node: str  # host:port
    used: int  # bytes (used_memory)
    limit: int  # bytes (maxmemory; 0: no limit)


@dataclass
class Gauges:
    """Everything a scrape reports."""

    stats: Stats
    ended: dict[str, int]  # tasks that ever succeeded / failed (their last attempt)
    queues: list[QueueGauge]
    agents: dict[str, int]  # agents by state
    schedule_lag_s: float  # now - the earliest due schedule, when that is past; else 0
    http: dict[str, int] = field(default_factory=dict)  # P:http counters
    agent_list: list[AgentInfo] = field(default_factory=list)  # every agent known
    past_deadline: int = 0  # runs still listed past their deadline (housekeeping ends them)
    deadline_lag_s: float = 0.0  # now - the earliest such deadline; else 0
    memory: list[MemoryGauge] = field(default_factory=list)  # [] when INFO is refused


def read_gauges(reads: Reads, retention_ms: int = 0) -> Gauges:
    """Read every gauge of the deployment ``reads`` reads (``retention_ms``: the
    deployment's retention, for the backlog of runs past it)."""
    keys = reads.keys
    stats = reads.stats(retention_ms)
    pipe = reads.redis.pipeline(transaction=False)
    cluster = is_cluster(reads.redis)  # a cluster pipeline takes keyed commands only
    if not cluster:
        pipe.time()
    for shard in keys.all_shards():
        pipe.hmget(shard.stats, [f"n:{s}" for s in ENDED])
        pipe.zrange(shard.schedules_due, 0, 0, withscores=True)
        pipe.zrange(shard.deadlines, 0, 0, withscores=True)
    pipe.hgetall(keys.shard(0).http_counters)
    rows = pipe.execute()
    sec, usec = reads.redis.time() if cluster else rows.pop(0)
    now_ms = int(sec) * 1000 + int(usec) // 1000
    http = cast("dict[str, str]", rows.pop())
    ended = dict.fromkeys(ENDED, 0)
    due: list[float] = []
    late: list[float] = []  # each shard's earliest deadline
    for counts, first, deadline in zip(rows[0::3], rows[1::3], rows[2::3], strict=True):
        for state, n in zip(ENDED, counts, strict=True):
            ended[state] += int(n or 0)
        if first:
            due.append(float(first[0][1]))
        if deadline:
            late.append(float(deadline[0][1]))
    lag = max(0.0, (now_ms - min(due)) / 1000.0) if due else 0.0
    agent_list = reads.agents()
    past = _past_deadline(reads, now_ms) if late and min(late) <= now_ms else 0
    return Gauges(
        stats=stats,
        ended=ended,
        queues=_queues(reads, now_ms, stats.queued),
        agents=dict(Counter(str(a.state) for a in agent_list)),
        schedule_lag_s=lag,
        http={k: int(v) for k, v in http.items()},
        agent_list=agent_list,
        past_deadline=past,
        deadline_lag_s=(now_ms - min(late)) / 1000.0 if past else 0.0,
        memory=_memory(reads.redis, cluster),
    )


def _past_deadline(reads: Reads, now_ms: int) -> int:
    """How many runs are still listed past their deadline: a second round trip, made only
    when some shard's earliest deadline has passed (housekeeping ends such runs within
    seconds, so most scrapes never make it)."""
    pipe = reads.redis.pipeline(transaction=False)
    for shard in reads.keys.all_shards():
        pipe.zcount(shard.deadlines, "-inf", now_ms)
    return sum(int(n) for n in pipe.execute())


def _memory(client: Any, cluster: bool) -> list[MemoryGauge]:
    """Each master's used memory and ``maxmemory`` (``INFO memory``; [] for a user
    without INFO, which the roles of ``redisflow acl`` do not grant)."""
    try:
        if cluster:
            from redis.cluster import RedisCluster

            infos = client.info("memory", target_nodes=RedisCluster.PRIMARIES)
            # one master: redis-py answers its INFO itself, not a dict by node
            one = "used_memory" in infos
            found = [(client.get_default_node().name, infos)] if one else sorted(infos.items())
        else:
            kwargs = client.connection_pool.connection_kwargs
            where = kwargs.get("path") or f"{kwargs.get('host', '')}:{kwargs.get('port', '')}"
            found = [(str(where), client.info("memory"))]
    except redis.ResponseError:  # NOPERM, or a managed Redis that renamed INFO away
        return []
    return [
        MemoryGauge(str(node), int(info.get("used_memory", 0)), int(info.get("maxmemory", 0)))
        for node, info in found
    ]


def _queues(reads: Reads, now_ms: int, depths: dict[str, int]) -> list[QueueGauge]:
    """Each type's depth and the age of its oldest ready task: of the task first in line
    at each priority (within a priority, the oldest workflow's task comes first)."""
    oldest: dict[str, float] = dict.fromkeys(depths, 0.0)
    for shard in reads.keys.all_shards():
        types = [t for t in depths if depths[t]]
        heads = {t: _heads(reads, shard, t) for t in types}
        members = [(t, m) for t in types for m in heads[t]]
        if not members:
            continue
        pipe = reads.redis.pipeline(transaction=False)
        for _, member in members:
            wid, _, index = member.partition(":")
            key, rec = _record_at(shard, wid, index)
            pipe.hget(shard.workflow(wid), F_CREATED)
            pipe.hget(key, rec)
        values = pipe.execute()
        for n, (t, _) in enumerate(members):
            created, record = values[2 * n], values[2 * n + 1]
            if created is None or record is None:
                continue  # ended or cleaned up since the queue was read
            ready = parse_record(record)[2]
            if ready:
                age = (now_ms - int(created) - int(float(ready))) / 1000.0
                oldest[t] = max(oldest[t], age)
    return [QueueGauge(t, depths[t], oldest[t]) for t in sorted(depths)]


def _heads(reads: Reads, shard: ShardKeys, task_type: str) -> list[str]:
    """The first member of each priority in ``task_type``'s queue (a few at most)."""
    key = shard.queue(task_type)
    heads: list[str] = []
    low: float | str = "-inf"
    for _ in range(MAX_BANDS):
        first = cast(
            "list[tuple[str, float]]",
            reads.redis.zrangebyscore(key, low, "+inf", start=0, num=1, withscores=True),
        )
        if not first:
            break
        member, score = first[0]
        heads.append(member)
        low = (int(score) // PRIORITY_BAND + 1) * PRIORITY_BAND
    return heads


def _record_at(shard: ShardKeys, wid: str, index: str) -> tuple[str, str]:
    """The hash and field of the record of task ``index`` of ``wid``: ``c`` (a task),
    ``c.k`` (item k of map c) or ``c.k.s`` (its step s)."""
    c, dot, rest = index.partition(".")
    if not dot:
        return shard.workflow(wid), index
    k, dot, s = rest.partition(".")
    return shard.map_items(wid, c), step_field(k, s) if dot else k
