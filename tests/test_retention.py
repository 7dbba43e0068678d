"""Retention keeps up: housekeeping removes finished workflows past their retention in
batches of one script call each (lib/retention.lua), again while a batch comes back full
(sweep.lua, Engine.maintain's time budget), and ``stats`` and ``/metrics`` show the
backlog it has left, on a real redis-server."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from engine_helpers import Hand, agent_thread, cli, scan_keys, wait_for
from prometheus_client import CollectorRegistry, generate_latest

from engine import Engine, Workflow
from engine.http.metrics import RedisCollector

RUNS = 5_000
BATCH = 200  # maintain's limit: at most this many removed per script call and shard


def one_task(name: str, ttl: float | None = None) -> Workflow:
    wf = Workflow(name, ttl=ttl)
    wf.task("t")
    return wf


def finish_all(engine: Engine, hand: Hand) -> None:
    """Claim and report every ready task, 256 per script call as agents do."""
    while True:
        claimed = 0
        for shard in engine.keys.all_shards():
            call = engine.store.calls.claim_call(shard, hand.id, [""], 256)
            tasks = engine.store.scripts.run(call)
            if tasks:
                outcomes = [(t.workflow_id, t.key, t.attempt, "ok", "null") for t in tasks]
                reported = engine.store.scripts.run(
                    engine.store.calls.complete_call(shard, hand.id, outcomes)
                )
                assert all(reported.codes)
                claimed += len(tasks)
        if not claimed:
            return


@pytest.fixture()
def expired(engine: Engine, redis_url: str) -> Iterator[Engine]:
    """5,000 finished workflows past their retention, as an engine whose retention is a
    minute sees them: half past their own (``ttl``), half past the deployment's (finished
    an hour ago, as their index says: as if the time had passed)."""
    half = RUNS // 2
    engine.push_many([one_task("own", ttl=0.001)] * half)
    plain = engine.push_many([one_task("plain")] * half)
    finish_all(engine, Hand(engine))
    assert engine.stats().workflows["succeeded"] == RUNS
    for wid in plain:
        index = engine.keys.shard_of(wid).by_state("succeeded")
        engine.redis.zincrby(index, -3_600_000, wid)
    with Engine.connect(redis_url, retention_s=60) as sweeper:
        wait_for(lambda: sweeper.stats().retention_backlog == RUNS, what="all past retention")
        yield sweeper


def left(engine: Engine) -> int:
    return sum(engine.stats().workflows.values())


def test_one_housekeeping_round_removes_a_backlog_within_its_time_budget(
    expired: Engine,
) -> None:
    shards = expired.keys.shards
    # no time to go on: one batch per shard, and the shards still behind are said
    first = expired.maintain(sweep_s=0)
    assert first[3] == BATCH * shards and first[4] == shards
    assert expired.stats().retention_backlog == RUNS - BATCH * shards
    # time enough: the same round goes on until every shard is caught up
    rest = expired.maintain(sweep_s=120)
    assert rest[3] == RUNS - BATCH * shards and rest[4] == 0
    assert left(expired) == 0 and expired.stats().retention_backlog == 0
    assert expired.maintain()[3:] == [0, 0]
    # nothing of any run is left behind
    assert not [k for k in scan_keys(expired.redis) if ":w:" in k or ":ws:" in k]


def test_an_agent_comes_back_for_a_backlog_before_its_next_round(expired: Engine) -> None:
    # One round an hour: without going on while behind, it would take 200 a shard and
    # leave the rest for the next hour
    with agent_thread(expired, {"": lambda t: None}, maintain_s=3600):
        wait_for(lambda: left(expired) == 0, timeout=120, what="the backlog removed")
    assert expired.stats().retention_backlog == 0


def test_stats_and_metrics_show_the_backlog(expired: Engine, cli_env: dict[str, str]) -> None:
    expired.maintain(sweep_s=0)
    backlog = RUNS - BATCH * expired.keys.shards
    registry = CollectorRegistry()
    registry.register(RedisCollector(expired))
    text = generate_latest(registry).decode()
    assert f"redisflow_retention_backlog {float(backlog)}" in text
    # the command line's engine has the deployment's default retention (7 days): only the
    # runs' own retention is past
    own_left = RUNS // 2 - BATCH * expired.keys.shards  # each shard's batch took its own first
    out = cli("stats", env=cli_env)
    assert out.returncode == 0, out.stderr
    assert f"retention  {own_left:,} finished workflows past it" in out.stdout
    data = cli("stats", "--json", env=cli_env)
    assert json.loads(data.stdout)["retention_backlog"] == own_left
