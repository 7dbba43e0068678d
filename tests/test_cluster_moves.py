"""Moving a shard to another master of a Redis Cluster while agents and a pusher run
(``engine/store/shard_moves.py``, ``redisflow cluster shards|move``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from engine_helpers import agent_thread, assert_stats_agree, run_agent, wait_for

from engine import EmbeddedRedis, Engine, Workflow
from engine.cli.main import run as cli_run
from engine.connect.local_cluster import LocalCluster, cluster_port
from engine.errors import StateError
from engine.store.shard_moves import ShardMoves, parse_nodes


def chain(n: int = 3) -> Workflow:
    wf = Workflow("chain")
    for i in range(n):
        wf.task(f"t{i}", type="t", after=[f"t{i - 1}"] if i else [])
    return wf


def node(address: str) -> redis.Redis:
    host, _, port = address.rpartition(":")
    return redis.Redis(host=host, port=int(port), decode_responses=True)


def redirections(cluster: LocalCluster) -> dict[str, int]:
    """MOVED and ASK replies every master has sent so far."""
    total = {"MOVED": 0, "ASK": 0}
    for port in cluster.master_ports():
        with node(f"127.0.0.1:{port}") as c:
            stats: dict[str, Any] = c.info("errorstats")
        for kind in total:
            total[kind] += int(stats.get(f"errorstat_{kind}", {}).get("count", 0))
    return total


def keys_in_slot(cluster: LocalCluster, slot: int) -> dict[str, int]:
    """How many keys of ``slot`` each master holds (0 everywhere but its owner, once a
    move is over)."""
    out = {}
    for port in cluster.master_ports():
        with node(f"127.0.0.1:{port}") as c:
            out[f"127.0.0.1:{port}"] = int(c.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot))
    return out


def slot_marks(cluster: LocalCluster) -> list[str]:
    """Every MIGRATING / IMPORTING mark any node shows (none when no move is under way)."""
    marks = []
    for port in cluster.ports:
        with node(f"127.0.0.1:{port}") as c:
            for n in parse_nodes(str(c.execute_command("CLUSTER", "NODES"))):
                marks += [f"{n.address} {s}->{t}" for s, t in n.migrating.items()]
                marks += [f"{n.address} {s}<-{t}" for s, t in n.importing.items()]
    return marks


@pytest.fixture()
def cluster_engine(redis_cluster: LocalCluster, cluster_url: str) -> Iterator[Engine]:
    """An engine of 3 shards, one per master; every shard back on its master after."""
    with Engine.connect(cluster_url) as engine:
        moves = ShardMoves(engine.redis, engine.keys)
        home = {p.shard: p.master for p in moves.places()}
        try:
            yield engine
        finally:
            for p in moves.places():
                if p.master != home[p.shard]:
                    moves.move(p.shard, home[p.shard])
            moves.close()


def other_master(engine: Engine, than: str) -> str:
    moves = ShardMoves(engine.redis, engine.keys)
    try:
        return next(p.master for p in moves.places() if p.master != than)
    finally:
        moves.close()


def test_a_shard_moves_and_back_while_agents_and_a_pusher_run(
    redis_cluster: LocalCluster, cluster_engine: Engine, cluster_url: str
) -> None:
    engine = cluster_engine
    moves = ShardMoves(engine.redis, engine.keys)
    home = moves.places()[0]
    away = other_master(engine, home.master)
    pushed: list[str] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def pusher() -> None:
        try:
            with Engine.connect(cluster_url) as mine:
                while not stop.is_set():
                    pushed.extend(mine.push_many([chain()] * 12))
                    stop.wait(0.01)
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(e)

    def succeeded() -> int:
        return engine.count("succeeded")

    handlers = {"t": lambda task: task.index}
    with Engine.connect(cluster_url) as e1, Engine.connect(cluster_url) as e2:
        with agent_thread(e1, handlers, "a1"), agent_thread(e2, handlers, "a2"):
            thread = threading.Thread(target=pusher, daemon=True)
            thread.start()
            wait_for(lambda: succeeded() >= 24, what="workflows done before the move")
            before = redirections(redis_cluster)
            on_shard0 = next(w for w in list(pushed) if int(w) % 3 == 0)
            seen: list[str] = []
            report = moves.move(
                0, away, between=lambda: seen.append(engine.status(on_shard0).state.value)
            )
            assert (report.source, report.target) == (home.master, away) and report.keys > 0
            assert seen, "the status read between the two halves of the move ran"
            assert keys_in_slot(redis_cluster, home.slot)[home.master] == 0
            done = succeeded()
            wait_for(lambda: succeeded() >= done + 24, what="workflows done after the move")
            back = moves.move(0, home.master)  # and back, still running
            assert (back.source, back.target) == (away, home.master)
            done = succeeded()
            wait_for(lambda: succeeded() >= done + 24, what="workflows done after moving back")
            stop.set()
            thread.join(30)
            assert not errors, errors
            wait_for(lambda: succeeded() == len(pushed), what="every workflow to succeed")
    met = redirections(redis_cluster)
    moves.close()
    # the clients met both redirections and followed them
    assert met["ASK"] > before["ASK"] and met["MOVED"] > before["MOVED"]
    # none lost, none doubled, none left behind: every key of the slot on its owner alone
    assert len(set(pushed)) == len(pushed) and engine.count() == len(pushed)
    assert {engine.status(w).state.value for w in pushed} == {"succeeded"}
    held = keys_in_slot(redis_cluster, home.slot)
    assert held[home.master] > 0 and sum(held.values()) == held[home.master]
    assert not slot_marks(redis_cluster)
    assert_stats_agree(engine)


def test_an_idle_agent_still_wakes_for_a_moved_shard(cluster_engine: Engine) -> None:
    engine = cluster_engine
    moves = ShardMoves(engine.redis, engine.keys)
    home = moves.places()[0]
    done = threading.Event()
    with agent_thread(
        engine, {"t": lambda task: done.set()}, "sleeper", idle_check_s=30.0, maintain_s=30.0
    ):
        wait_for(engine.agents, what="the agent to register")
        moves.move(0, other_master(engine, home.master))
        done.clear()
        engine.push(chain(1))  # the round robin starts at shard 0: the moved one
        assert done.wait(10), "the agent did not wake within 10 s (its safety timer is 30 s)"
    moves.close()


def test_cli_lists_shards_and_moves_one(
    cluster_engine: Engine, cluster_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = [w for _ in range(3) for w in cluster_engine.push_many([chain()] * 3)]  # a shard each
    assert cli_run(["cluster", "shards", "--url", cluster_url, "--json"]) == 0
    shards = json.loads(capsys.readouterr().out)["shards"]
    assert [s["shard"] for s in shards] == [0, 1, 2]
    assert len({s["master"] for s in shards}) == 3 and all(s["keys"] > 0 for s in shards)
    to = shards[1]["master"]
    assert cli_run(["cluster", "move", "0", "--to", to, "--url", cluster_url]) == 0
    out = capsys.readouterr().out
    assert f"shard 0 (slot {shards[0]['slot']}) moved from {shards[0]['master']} to {to}" in out
    assert cli_run(["cluster", "shards", "--url", cluster_url, "--json"]) == 0
    after = json.loads(capsys.readouterr().out)["shards"]
    assert after[0] == {**shards[0], "master": to} and after[1:] == shards[1:]
    assert cluster_engine.count() == len(ids)
    assert_stats_agree(cluster_engine)


def test_refusals_exit_2_and_change_nothing(
    redis_cluster: LocalCluster,
    redis_server: EmbeddedRedis,
    cluster_engine: Engine,
    cluster_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cluster_engine.push_many([chain()] * 6)
    moves = ShardMoves(cluster_engine.redis, cluster_engine.keys)
    before = moves.places()
    masters = sorted({p.master for p in before})
    cases = [
        (["move", "3", "--to", masters[0]], "shard 3 does not exist: namespace 'rf' has 3 shards"),
        (["move", "0", "--to", "127.0.0.1:1"], "no master at 127.0.0.1:1 in the cluster"),
        (["move", "0", "--to", before[0].master], f"is on {before[0].master} already"),
    ]
    for argv, message in cases:
        assert cli_run(["cluster", *argv, "--url", cluster_url]) == 2, argv
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
    with pytest.raises(SystemExit) as exited:  # argparse: main() exits 2
        cli_run(["cluster", "move", "0", "--to", "nowhere", "--url", cluster_url])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "expected HOST:PORT of a master, not 'nowhere'" in err
    for argv in (["shards"], ["move", "0", "--to", masters[1]]):
        assert cli_run(["cluster", *argv, "--url", redis_server.url]) == 2
        err = capsys.readouterr().err
        assert "not a Redis Cluster" in err and len(err.strip().splitlines()) == 1, err
        assert cli_run(["cluster", *argv, "--url", ""]) == 2
        assert "need a Redis Cluster" in capsys.readouterr().err
    assert moves.places() == before and not slot_marks(redis_cluster)
    moves.close()


def test_cluster_nodes_are_read_with_their_slots_and_moves() -> None:
    text = (
        "aa 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-2 9 [5->-bb] [6-<-cc]\n"
        "bb 127.0.0.1:7001@17001,host master,fail - 0 0 2 connected\n"
        "cc 127.0.0.1:7002@17002 slave aa 0 0 1 connected\n"
    )
    a, b, c = parse_nodes(text)
    assert (a.address, a.master, a.failed, a.slots) == ("127.0.0.1:7000", True, False, {0, 1, 2, 9})
    assert a.migrating == {5: "bb"} and a.importing == {6: "cc"}
    assert (b.master, b.failed, b.slots, b.port) == (True, True, set(), 7001)
    assert not c.master and c.host == "127.0.0.1"


def test_a_move_cut_short_stays_migrating_and_the_same_move_finishes_it(
    redis_cluster: LocalCluster, cluster_engine: Engine
) -> None:
    engine = cluster_engine
    ids = engine.push_many([chain()] * 20)
    moves = ShardMoves(engine.redis, engine.keys)
    home = moves.places()[0]
    away = other_master(engine, home.master)
    with node(away) as target:
        target.config_set("maxmemory", "1")  # its RESTOREs are refused: OOM
        try:
            with pytest.raises(StateError, match="stays MIGRATING: run the same move again"):
                moves.move(0, away, batch=5)
        finally:
            target.config_set("maxmemory", "0")
    assert slot_marks(redis_cluster)  # MIGRATING on the source, IMPORTING on the target
    report = moves.move(0, away)
    assert report.keys > 0 and not slot_marks(redis_cluster)
    held = keys_in_slot(redis_cluster, home.slot)
    assert held[home.master] == 0 and held[away] > 0
    run_agent(engine, {"t": lambda task: task.index})
    assert {engine.status(w).state.value for w in ids} == {"succeeded"}
    assert_stats_agree(engine)
    moves.close()


def test_a_shard_moves_to_a_master_just_added_with_no_slots() -> None:
    cluster = LocalCluster(1).start()
    extra = EmbeddedRedis(port=cluster_port())
    try:
        extra.extra_args = ["--cluster-enabled", "yes",
                            "--cluster-config-file", f"nodes-{extra.port}.conf"]  # fmt: skip
        extra.start()
        new = node(f"127.0.0.1:{extra.port}")
        new.execute_command("CLUSTER", "MEET", "127.0.0.1", cluster.ports[0])
        with Engine.connect(cluster.url) as engine:
            ids = engine.push_many([chain()] * 10)
            moves = ShardMoves(engine.redis, engine.keys)
            wait_for(lambda: len([n for n in moves.nodes() if n.master]) == 2)
            wait_for(lambda: "cluster_state:ok" in str(new.execute_command("CLUSTER", "INFO")))
            report = moves.move(0, f"127.0.0.1:{extra.port}")
            assert report.keys > 0 and moves.places()[0].master == f"127.0.0.1:{extra.port}"
            run_agent(engine, {"t": lambda task: task.index})
            assert {engine.status(w).state.value for w in ids} == {"succeeded"}
            assert_stats_agree(engine)
            moves.close()
        new.close()
    finally:
        extra.stop()
        cluster.stop()
