"""Connecting to a Redis Cluster: least-privilege users (``redisflow acl --cluster`` lines,
run on every node, let each role do its job there, sharded pub/sub and the cluster client's
commands included; the single-Redis line is refused naming the permission) and bad cluster
URLs refused in one line."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
import redis
from engine_helpers import cli, one_line_error, run_agent

from engine import Engine, Event, Workflow
from engine.connect.local_cluster import LocalCluster
from engine.ops.acl import ROLES, role_commands, setuser_line


@pytest.fixture()
def nodes(redis_cluster: LocalCluster, cluster_url: str) -> Iterator[list[redis.Redis]]:
    """An admin client on every node; the users made on them are deleted after."""
    clients = [redis.Redis(port=p, decode_responses=True) for p in redis_cluster.ports]
    yield clients
    for c in clients:
        for user in c.acl_users():
            if user != "default":
                c.acl_deluser(user)
        c.close()


def make_user(nodes: list[redis.Redis], cluster_url: str, role: str, cluster: bool) -> str:
    """The role's user on every node (as an operator runs the printed line on each)."""
    args = ["acl", "--role", role, *(["--cluster"] if cluster else [])]
    out = cli(*args)
    assert out.returncode == 0, out.stderr
    [line] = out.stdout.strip().splitlines()
    user = f"rf-{role}"
    for node in nodes:
        node.execute_command(*line.split())
        node.execute_command("ACL", "SETUSER", user, f">pw-{user}")
    return f"redis+cluster://{user}:pw-{user}@{urlsplit(cluster_url).netloc}"


def flow(name: str) -> Workflow:
    wf = Workflow(name)
    a = wf.task("a", type="t")
    wf.task("b", type="t", after=[a])
    return wf


def test_cluster_lines_add_sharded_pubsub_only_when_asked() -> None:
    single, sharded = set(role_commands("agent")), set(role_commands("agent", cluster=True))
    added = {"CLUSTER|SLOTS", "COMMAND", "SSUBSCRIBE", "SUNSUBSCRIBE", "SPUBLISH", "ASKING"}
    assert sharded - single == added
    # a reader publishes nothing, sharded or not
    assert "SPUBLISH" not in role_commands("reader", cluster=True)
    assert "+ssubscribe" in setuser_line("reader", cluster=True)
    assert "ssubscribe" not in setuser_line("reader")  # Redis 6.2 would refuse the line


def test_each_role_does_its_job_on_the_cluster(nodes: list[redis.Redis], cluster_url: str) -> None:
    # the first client (the admin's) stores the layout, as a deployment's setup does
    with Engine.connect(cluster_url) as admin:
        assert admin.keys.shards == 3
    urls = {role: make_user(nodes, cluster_url, role, True) for role in ("operator", "agent")}
    urls["reader"] = make_user(nodes, cluster_url, "reader", True)
    seen: list[Event] = []
    got = threading.Event()
    with (
        Engine.connect(urls["operator"]) as operator,
        Engine.connect(urls["agent"]) as agent_engine,
        Engine.connect(urls["reader"]) as reader,
    ):

        def on_event(event: Event) -> None:
            seen.append(event)
            if event.kind == "workflow.succeeded":
                got.set()

        listener = reader.listen(on_event)  # sharded subscriptions on every master
        try:
            wids = operator.push_many([flow(f"w{n}") for n in range(6)])
            assert len({operator.keys.shard_of(w).shard for w in wids}) == 3
            agent = run_agent(agent_engine, {"t": lambda task: "ok"})
            assert agent.processed == 12
            assert got.wait(10), "the reader heard no event over sharded pub/sub"
        finally:
            listener.close()
        assert reader.stats().workflows["succeeded"] == 6
        assert {s.id for s in reader.list(state="succeeded")} == set(wids)
        # the reader may not steer
        with pytest.raises(redis.exceptions.NoPermissionError):
            reader.cancel(wids[0])
    out = cli("agents", env={"REDISFLOW_URL": urls["reader"], "PATH": ""})
    assert out.returncode == 0, out.stderr
    assert "a1" in out.stdout


def test_a_single_redis_line_is_refused_on_the_cluster_naming_the_permission(
    nodes: list[redis.Redis], cluster_url: str
) -> None:
    with Engine.connect(cluster_url):
        pass
    url = make_user(nodes, cluster_url, "reader", cluster=False)
    # the cluster client cannot read the slot map: named as the permission it is
    with pytest.raises(redis.exceptions.NoPermissionError, match="cluster"):
        Engine.connect(url)
    out = cli("stats", env={"REDISFLOW_URL": url, "PATH": ""})
    assert out.returncode == 3
    assert "may not run CLUSTER" in one_line_error(out)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+cluster://", "a cluster URL names a node"),
        ("redis+cluster://127.0.0.1:99999", "the port must be a number from 1 to 65535"),
        ("http+cluster://127.0.0.1:7000", "invalid Redis URL"),
    ],
)
def test_a_bad_cluster_url_is_refused_in_one_line(url: str, says: str) -> None:
    out = cli("stats", "--url", url)
    assert out.returncode == 2
    assert says in one_line_error(out)


def test_a_cluster_url_on_a_plain_redis_says_so(redis_server: object) -> None:
    port = redis_server.port  # type: ignore[attr-defined]
    out = cli("stats", "--url", f"redis+cluster://127.0.0.1:{port}")
    assert out.returncode == 3
    assert "Cluster mode is not enabled" in one_line_error(out)


def test_the_cluster_lines_keep_scripts_and_trigger_secrets_per_role(
    nodes: list[redis.Redis], cluster_url: str
) -> None:
    from engine.http.triggers import new_trigger
    from engine.ops.acl import missing_permissions

    with Engine.connect(cluster_url):
        pass
    urls = {role: make_user(nodes, cluster_url, role, True) for role in ROLES}
    with (
        Engine.connect(urls["operator"]) as operator,
        Engine.connect(urls["agent"]) as agent_engine,
        Engine.connect(urls["reader"]) as reader,
    ):
        operator.put_template("name: build\ntasks:\n  - name: compile\n")
        operator.put_trigger(new_trigger("gh", "build", "github", "s3cret-0123456789"))
        assert operator.trigger("gh").secret == "s3cret-0123456789"
        wid = operator.push(flow("w"))
        assert missing_permissions(agent_engine, ["agent"]) == []
        with pytest.raises(redis.exceptions.NoPermissionError, match="script cancel"):
            agent_engine.cancel(wid)
        for engine in (agent_engine, reader):
            with pytest.raises(redis.exceptions.NoPermissionError):
                engine.trigger("gh")
            with pytest.raises(redis.exceptions.NoPermissionError):
                engine.redis.hget(operator.keys.shard(0).trigger("gh"), "s")
        for engine in (operator, agent_engine, reader):
            node = engine.redis.get_redis_connection(engine.redis.get_default_node())
            with pytest.raises(redis.exceptions.NoPermissionError, match="info"):
                node.info("memory")
        assert reader.status(wid).state.value == "running"
