"""redisflow on a local 3-master Redis Cluster: connecting, the stored layout, shards
spread over the masters, agents and reads across shards, sharded wake-ups."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from engine_helpers import assert_stats_agree

from engine import Agent, Engine, Workflow
from engine.cli.main import run as cli_run
from engine.connect.local_cluster import LocalCluster, slot_ranges
from engine.connect.urls import as_cluster_url, is_cluster_url, redact, url_of
from engine.errors import DefinitionError
from engine.store.layout import is_cluster, masters_in_slot_order


@pytest.fixture()
def cluster_engine(cluster_url: str) -> Iterator[Engine]:
    with Engine.connect(cluster_url) as engine:
        yield engine


def chain(name: str = "chain", n: int = 3) -> Workflow:
    wf = Workflow(name)
    for i in range(n):
        wf.task(f"t{i}", type="t", after=[f"t{i - 1}"] if i else [])
    return wf


def test_slot_ranges_cover_every_slot_once() -> None:
    ranges = slot_ranges(3)
    assert ranges[0][0] == 0 and ranges[-1][1] == 16383
    assert all(a[1] + 1 == b[0] for a, b in zip(ranges, ranges[1:], strict=False))


def test_connect_stores_one_shard_per_master_spread_over_them(cluster_engine: Engine) -> None:
    client = cluster_engine.redis
    assert is_cluster(client)
    assert cluster_engine.keys.shards == 3
    masters = masters_in_slot_order(client)
    for shard in cluster_engine.keys.all_shards():
        node = client.get_node_from_key(shard.seq)  # type: ignore[attr-defined]
        assert node.name == masters[shard.shard % len(masters)]
    # the next client reads the stored layout; another count is refused
    with Engine.connect(url_of(client)) as other:
        assert other.keys == cluster_engine.keys
    with pytest.raises(DefinitionError, match="--shards 5 but namespace 'rf' has 3 shards"):
        Engine.connect(url_of(client), shards=5)


def test_more_shards_than_masters_spread_evenly(cluster_url: str) -> None:
    with Engine.connect(cluster_url, shards=7) as engine:
        masters = masters_in_slot_order(engine.redis)
        owners = [
            engine.redis.get_node_from_key(s.seq).name  # type: ignore[attr-defined]
            for s in engine.keys.all_shards()
        ]
        assert owners == [masters[i % 3] for i in range(7)]


def test_workflows_run_across_shards_and_reads_merge(cluster_engine: Engine) -> None:
    engine = cluster_engine
    ids = [engine.push(chain(f"w{i % 2}")) for i in range(9)]
    assert {int(w) % 3 for w in ids} == {0, 1, 2}
    assert engine.count() == 9 and engine.stats().queued == {"t": 9}
    assert engine.names() == [("w0", 5), ("w1", 4)]
    marks: dict[int, str] = {}
    engine.events_after(marks)
    agent = Agent(engine, "a1", {"t": lambda task: task.index})
    agent.run(until_idle=True)
    assert agent.processed == 27
    assert engine.count("succeeded") == 9
    page = engine.list(limit=4)
    assert [w.id for w in page] == sorted(ids, key=int, reverse=True)[:4]
    assert [w.id for w in engine.list(offset=4, limit=10, oldest_first=True)] == sorted(
        ids, key=int
    )[4:]
    later = engine.events_after(marks)
    assert {e.wid for e in later if e.kind == "workflow.succeeded"} == set(ids)
    assert [e.ts for e in later] == sorted(e.ts for e in later)
    assert len(engine.events(500)) >= len(later)
    assert_stats_agree(engine)


def test_an_idle_agent_wakes_on_a_sharded_channel(cluster_engine: Engine) -> None:
    engine = cluster_engine
    done = threading.Event()
    agent = Agent(
        engine, "sleeper", {"t": lambda task: done.set()}, idle_check_s=30.0, maintain_s=30.0
    )
    thread = threading.Thread(target=agent.run, daemon=True)
    thread.start()
    try:
        # once it has registered (and subscribed), push to every shard
        while not engine.agents() and thread.is_alive():
            done.wait(0.05)
        for _ in range(3):
            engine.push(chain(n=1))
        assert done.wait(10), "the agent did not wake within 10 s (its safety timer is 30 s)"
    finally:
        agent.stop()
        thread.join(10)


def test_cli_runs_on_the_cluster_with_the_cluster_flag(
    redis_cluster: LocalCluster, cluster_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = f"redis://127.0.0.1:{redis_cluster.ports[1]}"
    assert cli_run(["stats", "--url", plain, "--cluster", "--json"]) == 0
    assert '"workflows"' in capsys.readouterr().out
    assert cli_run(["stats", "--url", cluster_url, "--shards", "4"]) == 2
    assert "--shards 4 but namespace 'rf' has 3 shards" in capsys.readouterr().err


def test_cluster_urls() -> None:
    assert as_cluster_url("redis://u:pw@h:7000") == "redis+cluster://u:pw@h:7000"
    assert as_cluster_url("rediss://h:7000") == "rediss+cluster://h:7000"
    assert is_cluster_url("redis+cluster://h:7000") and not is_cluster_url("redis://h:7000")
    assert redact("redis+cluster://u:pw@h:7000?ssl_ca_certs=x") == "redis+cluster://u:***@h:7000"
    with pytest.raises(ValueError, match="redis:// or rediss://"):
        as_cluster_url("unix:///tmp/redis.sock")


def test_server_cluster_bad_input_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:  # argparse refuses it: exit 2
        cli_run(["server", "--cluster", "0"])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "--cluster: not a count of masters (1 to 64)" in err
    assert cli_run(["stats", "--cluster"]) == 2
    assert "--cluster needs a --url" in capsys.readouterr().err


# what a single Redis stores (a cluster client always stores the layout)
@pytest.mark.single_redis
def test_a_single_redis_stores_a_shard_count_only_when_given(redis_url: str) -> None:
    with Engine.connect(redis_url) as plain:
        assert plain.keys.shards == 1 and not plain.redis.exists(plain.keys.layout)
        plain.push(chain(n=1))
        with pytest.raises(DefinitionError, match="already holds workflows pushed with 1 shard"):
            Engine.connect(redis_url, shards=3)
    with Engine.connect(redis_url, namespace="other", shards=3) as three:
        assert three.redis.hget(three.keys.layout, "shards") == "3"
    with Engine.connect(redis_url, namespace="other") as later:
        assert later.keys.shards == 3


def test_each_shard_is_looked_after_by_one_agent_at_a_time(engine: Engine) -> None:
    shard = engine.keys.shard(0)
    assert engine.store.calls.reap(shard, 0, 5, 10, "a1", 60_000) is not None
    assert engine.store.calls.reap(shard, 0, 5, 10, "a2", 60_000) is None  # a1 holds it
    assert engine.store.calls.reap(shard, 0, 5, 10, "a1", 60_000) is not None
    assert engine.store.calls.reap(shard, 0, 5, 10) is not None  # without a keeper: always
