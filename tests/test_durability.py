"""``wait_replicas``: every state change followed by WAIT on its own connection, on one
Redis with a replica and on a local cluster with replicas; too few acknowledgements are a
clear error (the write stands on the master)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from engine_helpers import cli, one_line_error, run_agent, wait_for

from engine import EmbeddedRedis, Engine, NotReplicatedError, Workflow
from engine.cli.common import EXIT_UNREACHABLE
from engine.connect.local_cluster import LocalCluster
from engine.runtime.agent import Agent

pytestmark = pytest.mark.single_redis  # servers of its own, whatever the session runs on


def chain(n: int = 2) -> Workflow:
    wf = Workflow("durable")
    for i in range(n):
        wf.task(f"t{i}", after=[f"t{i - 1}"] if i else [])
    return wf


def synced(replica: redis.Redis) -> bool:
    return replica.info("replication").get("master_link_status") == "up"


def redirections(cluster: LocalCluster) -> dict[str, int]:
    """MOVED and ASK replies every master has sent so far."""
    total = {"MOVED": 0, "ASK": 0}
    for port in cluster.master_ports():
        with redis.Redis(port=port, decode_responses=True) as c:
            stats = c.info("errorstats")
        for kind in total:
            total[kind] += int(stats.get(f"errorstat_{kind}", {}).get("count", 0))
    return total


def answer(replica: redis.Redis, key: str) -> str | None:
    """``"has"`` or ``"lacks"`` for ``key`` on ``replica``, None while it redirects."""
    try:
        return "has" if replica.exists(key) else "lacks"
    except redis.exceptions.MovedError:
        return None


def replica_of(ports: list[int], master: int) -> int:
    """The port of the node that replicates the one on port ``master``."""
    for port in ports:
        with redis.Redis(port=port, decode_responses=True) as c:
            info = c.info("replication")
            if info["role"] == "slave" and int(info["master_port"]) == master:
                return port
    raise AssertionError(f"no replica of port {master}")


class Pair:
    """A master and its replica."""

    def __init__(self) -> None:
        # diskless sync at once (Redis 7 waits 5 s for more replicas by default)
        self.master = EmbeddedRedis(extra_args=["--repl-diskless-sync-delay", "0"]).start()
        self.replica = EmbeddedRedis(
            extra_args=["--replicaof", "127.0.0.1", str(self.master.port)]
        ).start()
        self.m = redis.Redis(port=self.master.port, decode_responses=True)
        self.r = redis.Redis(port=self.replica.port, decode_responses=True)
        wait_for(lambda: synced(self.r), what="the replica to sync")

    def wait_count(self) -> int:
        """How many WAIT commands the master has run."""
        return int(self.m.info("commandstats").get("cmdstat_wait", {}).get("calls", 0))

    def close(self) -> None:
        self.m.close()
        self.r.close()
        self.replica.stop()
        self.master.stop()


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    p = Pair()
    yield p
    p.close()


@pytest.fixture(scope="module")
def lone() -> Iterator[Pair]:
    """A pair whose replica is stopped once synced: WAIT 1 can only time out."""
    p = Pair()
    p.replica.stop()
    wait_for(lambda: p.m.info("replication")["connected_slaves"] == 0, what="the replica gone")
    yield p
    p.close()


def test_push_and_completions_are_on_the_replica_when_they_return(pair: Pair) -> None:
    pair.m.flushall()
    with Engine.connect(pair.master.url, wait_replicas=1, wait_timeout_ms=5000) as engine:
        engine.push(chain(1))  # loads the scripts (NOSCRIPT, then the call again)
        waits = pair.wait_count()
        wid = engine.push(chain(2))
        assert pair.wait_count() == waits + 1  # one WAIT after the push's round trip
        key = engine.keys.shard_of(wid).workflow(wid)
        assert pair.r.hgetall(key) == pair.m.hgetall(key) != {}
        agent = run_agent(engine, {"": lambda t: t.index}, "a1")
        assert agent.processed == 3 and agent.unconfirmed == 0  # the first push's too
        # the last completion returned after the replica had it: both say succeeded
        assert pair.r.hgetall(key) == pair.m.hgetall(key)
        assert engine.status(wid).state == "succeeded"


def test_wait_off_sends_no_wait(pair: Pair) -> None:
    pair.m.flushall()
    with Engine.connect(pair.master.url) as engine:
        waits = pair.wait_count()
        wid = engine.push(chain(1))
        run_agent(engine, {"": lambda t: None}, "a1")
        assert engine.status(wid).state == "succeeded"
        assert pair.wait_count() == waits


def test_too_few_replicas_raise_after_the_timeout_and_the_push_stands(lone: Pair) -> None:
    with Engine.connect(lone.master.url, wait_replicas=1, wait_timeout_ms=100) as engine:
        with pytest.raises(NotReplicatedError, match="fewer than 1 replica") as caught:
            engine.push_many([chain(1)] * 3)
        pushed = caught.value.results
        assert len(pushed) == 3 and caught.value.unconfirmed == [0, 1, 2]
        for p in pushed:  # written on the master all the same
            assert engine.status(p.id).state == "running"  # type: ignore[attr-defined]


def test_an_agent_goes_on_and_counts_what_its_replicas_did_not_confirm(lone: Pair) -> None:
    lone.m.flushall()
    with Engine.connect(lone.master.url) as plain:
        wid = plain.push(chain(2))
    with Engine.connect(lone.master.url, wait_replicas=1, wait_timeout_ms=50) as engine:
        agent = Agent(engine, "a1", {"": lambda t: None}, maintain_s=60)
        agent.run(until_idle=True)
        assert engine.status(wid).state == "succeeded"
        assert agent.processed == 2 and agent.unconfirmed >= 2


def test_the_cli_says_so_in_one_line_and_exits_3(lone: Pair, tmp_path: Path) -> None:
    flow = tmp_path / "flow.json"
    flow.write_text(json.dumps({"name": "durable", "tasks": [{"name": "t0"}]}))
    url = lone.master.url
    result = cli("push", str(flow), "--url", url, "--wait-replicas", "1", "--wait-timeout", "100")
    assert result.returncode == EXIT_UNREACHABLE
    assert "acknowledged by fewer than 1 replica" in one_line_error(result)
    result = cli("push", str(flow), "--url", url, "--wait-replicas", "-1")
    assert result.returncode == 2
    assert "--wait-replicas: not a replica count (0 to 100)" in one_line_error(result)


def test_on_a_cluster_a_push_is_on_its_masters_replica_when_it_returns() -> None:
    from cluster_support import start_cluster

    cluster = start_cluster(3, 1)
    try:
        with Engine.connect(cluster.url, wait_replicas=1, wait_timeout_ms=5000) as engine:
            wids = engine.push_many([chain(2)] * 6)  # round robin: two on each master
            shards = {engine.keys.shard_of(w).shard for w in wids}
            assert len(shards) == 3
            run_agent(engine, {"": lambda t: None}, "a1")
            for wid in wids:
                key = engine.keys.shard_of(wid).workflow(wid)
                master = engine.redis.get_node_from_key(key).port  # type: ignore[attr-defined]
                with redis.Redis(
                    port=replica_of(cluster.ports, master), decode_responses=True
                ) as replica:
                    replica.execute_command("READONLY")
                    assert replica.hgetall(key) == engine.redis.hgetall(key) != {}
                assert engine.status(wid).state == "succeeded"
    finally:
        cluster.stop()


@pytest.mark.slow
def test_pushes_ride_through_a_failover_with_wait_off_and_on() -> None:
    from cluster_support import start_cluster

    cluster = start_cluster(3, 1)
    try:
        plain = Engine.connect(cluster.url)
        waited = Engine.connect(cluster.url, wait_replicas=1, wait_timeout_ms=100)
        plain.push_many([chain(1)] * 3)
        waited.count()  # its slot map, read before the kill, names the master that dies
        victim = plain.redis.get_node_from_key(plain.keys.shard(0).seq).port  # type: ignore[attr-defined]
        server = next(s for s in cluster.servers if s.port == victim)
        assert server.process is not None
        server.process.kill()
        # the push is sent again until the replica is promoted, then goes there
        ids = plain.push_many([chain(1)] * 3)
        assert all(plain.status(w).state == "running" for w in ids)
        # the promoted master has no replica yet: its shard's run is written, unconfirmed
        with pytest.raises(NotReplicatedError) as caught:
            waited.push_many([chain(1)] * 3)
        pushed = [p.id for p in caught.value.results]  # type: ignore[attr-defined]
        assert len(pushed) == 3 and all(plain.status(w).state == "running" for w in pushed)
        short = [pushed[k] for k in caught.value.unconfirmed]
        assert short and all(plain.keys.shard_of(w).shard == 0 for w in short)
        plain.close()
        waited.close()
    finally:
        cluster.stop()


def test_the_acl_roles_that_write_may_wait(pair: Pair) -> None:
    pair.m.flushall()
    urls = {}
    for role in ("operator", "agent"):
        out = cli("acl", "--role", role, "--user", f"w-{role}")
        assert out.returncode == 0, out.stderr
        pair.m.execute_command(*out.stdout.strip().split())
        pair.m.execute_command("ACL", "SETUSER", f"w-{role}", f">pw-{role}")
        urls[role] = f"redis://w-{role}:pw-{role}@127.0.0.1:{pair.master.port}/0"
    try:
        with Engine.connect(urls["operator"], wait_replicas=1, wait_timeout_ms=5000) as op:
            wid = op.push(chain(1))
        with Engine.connect(urls["agent"], wait_replicas=1, wait_timeout_ms=5000) as engine:
            assert run_agent(engine, {"": lambda t: None}, "a1").processed == 1
        with Engine.connect(pair.master.url) as admin:
            assert admin.status(wid).state == "succeeded"
    finally:
        for role in urls:
            pair.m.acl_deluser(f"w-{role}")


def test_a_webhook_run_the_replicas_did_not_confirm_answers_503(lone: Pair) -> None:
    import httpx
    from test_http_server import PIPELINE, serving

    from engine.http import create_app

    lone.m.flushall()
    with Engine.connect(lone.master.url) as plain:
        plain.put_template(PIPELINE)
    with (
        Engine.connect(lone.master.url, wait_replicas=1, wait_timeout_ms=50) as engine,
        serving(create_app(engine)) as base,
        httpx.Client(base_url=base, timeout=30) as http,
    ):
        r = http.post("/v1/templates/pipeline/runs", json={"n": 1})
        assert r.status_code == 503
        assert "was written but not acknowledged by the replicas" in r.json()["error"]
        assert engine.count() == 1  # written all the same


def test_with_wait_a_moved_shard_is_followed_and_waited_on_its_new_master() -> None:
    from cluster_support import start_cluster

    from engine.store.shard_moves import ShardMoves

    cluster = start_cluster(3, 1)
    try:
        with Engine.connect(cluster.url, wait_replicas=1, wait_timeout_ms=5000) as engine:
            engine.push_many([chain(1)] * 3)  # the slot map, as it is before the move
            moves = ShardMoves(engine.redis, engine.keys)
            home = moves.places()[0]
            away = next(p.master for p in moves.places() if p.master != home.master)
            during: list[str] = []
            moves.move(0, away, between=lambda: during.extend(engine.push_many([chain(1)] * 3)))
            moves.close()
            after = engine.push_many([chain(1)] * 3)  # shard 0's call answered MOVED first
            for wid in during + after:
                assert engine.status(wid).state == "running"
                key = engine.keys.shard_of(wid).workflow(wid)
                master = engine.redis.get_node_from_key(key).port  # type: ignore[attr-defined]
                with redis.Redis(port=replica_of(cluster.ports, master)) as replica:
                    replica.execute_command("READONLY")
                    # the replica learns its master's new slot by gossip, maybe after the
                    # data came: until then it answers MOVED, then whether it has the key
                    found = wait_for(functools.partial(answer, replica, key), what="its slots")
                    assert found == "has"
            assert engine.redis.get_node_from_key(engine.keys.shard(0).seq).name == away  # type: ignore[attr-defined]
        # the waited calls met both redirections and followed them
        met = redirections(cluster)
        assert met["MOVED"] >= 1 and met["ASK"] >= 1
    finally:
        cluster.stop()
