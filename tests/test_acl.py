# ruff: noqa: F811
"""Least-privilege users from ``redisflow acl`` on a real redis-server, and what a user
missing a permission sees: one line, exit 3, and nothing written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import redis
from engine_helpers import ROOT, Hand, cli, one_line_error, run_agent, scan_keys
from own_server import admin, server  # noqa: F401 (fixtures, named in signatures)

from engine import Engine, Workflow
from engine.ops.acl import ROLE_SCRIPTS, ROLES, permission_message, role_commands, setuser_line
from engine.store.scripts import SCRIPT_NAMES, script_commands

SAMPLE = str(ROOT / "demos" / "task-list-sample.yaml")


def make_user(admin: redis.Redis, role: str, namespace: str = "rf", name: str = "") -> str:
    """Create the user of ``role`` from the CLI's printed line; returns its URL."""
    args = ["acl", "--role", role, "--namespace", namespace]
    out = cli(*args, *(["--user", name] if name else []))
    assert out.returncode == 0, out.stderr
    [line] = out.stdout.strip().splitlines()
    admin.execute_command(*line.split())
    user = name or f"{namespace}-{role}"
    admin.execute_command("ACL", "SETUSER", user, ">pw-" + user)
    port = admin.connection_pool.connection_kwargs["port"]
    return f"redis://{user}:pw-{user}@127.0.0.1:{port}/0"


def sample(name: str = "wf") -> Workflow:
    wf = Workflow(name)
    a = wf.task("a", payload=1)
    wf.task("b", payload=2, after=[a])
    return wf


def env_for(url: str) -> dict[str, str]:
    import os

    return {**os.environ, "REDISFLOW_URL": url}


def test_script_commands_are_read_from_every_call() -> None:
    # Every redis.call names its command literally, except write_all's, whose callers do:
    # so the commands found are every command a script can run.
    lua = ROOT / "engine" / "store" / "lua"
    paths = [p for p in lua.rglob("*.lua") if p.stem != "move_slot"]  # an admin's: no role
    assert len(paths) > 20
    for path in paths:
        for m in re.finditer(r"redis\.p?call\(([^,)]*)", path.read_text()):
            assert m.group(1).startswith("'") or (path.name, m.group(1)) == ("queues.lua", "cmd")
    # heartbeat: its lease, and the lease clock (lease_clock: leases moved on after a
    # stalled Redis, with an event), and whether an operator asked it to drain (HEXISTS)
    assert script_commands("heartbeat") == {
        "TIME", "ZSCORE", "ZADD", "HMGET", "HSET", "ZRANGE", "HINCRBY", "XADD", "PUBLISH",
        "HEXISTS",
    }  # fmt: skip
    assert {"XADD", "PUBLISH", "HINCRBY", "INCRBY", "SADD"} <= script_commands("push")
    assert "ZPOPMIN" in script_commands("claim")
    assert all("TIME" in script_commands(n) for n in SCRIPT_NAMES)
    # Redis 7.0.15 crashes in redis.acl_check_cmd('SET') without arguments (the guard)
    assert not any("SET" in script_commands(n) for n in SCRIPT_NAMES)


def test_roles_are_least_privilege() -> None:
    agent, operator, reader, keeper = (set(role_commands(r)) for r in ROLES)
    assert not {"PUSH", "INCRBY"} & agent  # the agent never pushes
    # the keeper pushes child runs and cancels them, by script; it writes nothing else
    assert set(ROLE_SCRIPTS["keeper"]) == {"waits", "push", "child", "cancel"}
    assert "INCRBY" in keeper and not {"ZPOPMIN", "HSETNX"} & keeper
    assert "~rf!*" not in setuser_line("keeper") and "~rf!*" in setuser_line("operator")
    assert "ZPOPMIN" not in operator  # nor does the operator claim
    assert not {"EVALSHA", "XADD", "HSET", "DEL", "PUBLISH"} & reader
    assert not {"FLUSHALL", "FLUSHDB", "KEYS", "CONFIG", "SHUTDOWN"} & (agent | operator)
    line = setuser_line("reader", "ns1")
    assert "~ns1:*" in line and "&ns1:*" in line and "-@all" in line
    with pytest.raises(ValueError):
        setuser_line("reader", "bad ns")


def test_each_role_does_its_job(admin: redis.Redis) -> None:
    operator = Engine.connect(make_user(admin, "operator"))
    agent_engine = Engine.connect(make_user(admin, "agent"))
    reader = Engine.connect(make_user(admin, "reader"))
    try:
        # operator: push, pause, release, cancel, retry, cleanup, read
        wid = operator.push(sample())
        operator.pause(wid)
        operator.release(wid)
        doomed = operator.push(sample("doomed"))
        operator.cancel(doomed)
        operator.cleanup(doomed)
        # agent: register, claim, complete, heartbeat, housekeeping (reap)
        failing = operator.push(sample("failing"))
        fails = {"n": 0}

        def handler(task: object) -> str:
            if getattr(task, "workflow_id", "") == failing and fails["n"] == 0:
                fails["n"] += 1
                raise RuntimeError("once")
            return "ok"

        agent = run_agent(agent_engine, {"": handler}, heartbeat_s=0.1)
        assert agent.processed >= 3
        assert agent_engine.maintain() is not None
        assert operator.status(wid).state.value == "succeeded"
        assert operator.status(failing).state.value == "failed"
        operator.retry(failing)
        run_agent(agent_engine, {"": handler})
        assert operator.status(failing).state.value == "succeeded"
        assert operator.cleanup_finished() == 2
        # reader: status, list, stats, events, agents
        kept = operator.push(sample("kept"))
        assert reader.status(kept).state.value == "running"
        assert [s.id for s in reader.list()] == [kept]
        assert reader.stats().workflows["running"] == 1
        assert reader.events(10)
        assert [a.id for a in reader.agents()] == ["a1"]
        for args in (["status", kept], ["list"], ["stats"], ["events"], ["agents"]):
            out = cli(*args, env=env_for(make_url(reader)))
            assert out.returncode == 0, out.stderr
    finally:
        for e in (operator, agent_engine, reader):
            e.close()


def make_url(engine: Engine) -> str:
    from engine.connect.urls import url_of

    return url_of(engine.redis)


def test_a_reader_cannot_steer(admin: redis.Redis) -> None:
    with Engine.connect(make_user(admin, "operator")) as operator:
        wid = operator.push(sample())
        done = operator.push(sample())
        operator.cancel(done)
    before = {k: admin.dump(k) for k in scan_keys(admin)}
    env = env_for(make_user(admin, "reader"))
    for args in (["push", SAMPLE], ["pause", wid], ["cancel", wid], ["cleanup", done]):
        out = cli(*args, env=env)
        assert out.returncode == 3, (args, out.stderr)
        err = one_line_error(out)
        assert "Redis user 'rf-reader' may not run" in err and "redisflow acl" in err, err
    assert {k: admin.dump(k) for k in scan_keys(admin)} == before


def test_namespaces_cannot_read_each_other(admin: redis.Redis) -> None:
    with Engine.connect(make_user(admin, "operator", "team1"), namespace="team1") as one:
        one.push(sample())
    two_url = make_user(admin, "operator", "team2")
    with Engine.connect(two_url, namespace="team2") as two:
        two.push(sample())
        assert [s.name for s in two.list()] == ["wf"]
    # team2's user reads team1's keys: refused by key, not by command
    with Engine.connect(two_url, namespace="team1") as snoop:
        with pytest.raises(redis.exceptions.NoPermissionError):
            snoop.status("1")
        with pytest.raises(redis.exceptions.NoPermissionError):
            snoop.push(sample())
    client = redis.Redis.from_url(two_url, decode_responses=True)
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.hgetall("team1:{team1:0}:stats")
    client.close()
    assert admin.hget("team1:{team1:0}:stats", "w:pushed") == "1"


def test_a_push_without_xadd_writes_nothing(admin: redis.Redis) -> None:
    url = make_user(admin, "operator", name="no-xadd")
    admin.execute_command("ACL", "SETUSER", "no-xadd", "-xadd")
    out = cli("push", SAMPLE, env=env_for(url))
    assert out.returncode == 3, out.stderr
    err = one_line_error(out)
    assert err == (
        "redisflow: Redis user 'no-xadd' may not run XADD (NOPERM): grant it or see `redisflow acl`"
    )
    assert scan_keys(admin) == set()


@pytest.mark.parametrize("missing", ["xadd", "publish", "hincrby", "hset", "zadd", "srem"])
def test_no_script_writes_half_on_a_missing_permission(admin: redis.Redis, missing: str) -> None:
    with Engine.connect(make_user(admin, "operator")) as operator:
        operator.push(sample())
        operator.push(sample())
    with Engine.connect(make_user(admin, "agent", name="lacking")) as agent_engine:
        hand = Hand(agent_engine)
        running = hand.claim_one()
        admin.execute_command("ACL", "SETUSER", "lacking", f"-{missing}")
        before = {k: admin.dump(k) for k in scan_keys(admin)}
        steps = {
            "register": hand.register,
            "claim": hand.claim,
            "complete": lambda: hand.succeed(running),
            "heartbeat": hand.heartbeat,
            "stop": hand.stop,
            "reap": agent_engine.maintain,
        }
        for name, step in steps.items():
            if missing.upper() not in script_commands(name):
                continue
            with pytest.raises(redis.exceptions.NoPermissionError, match=missing.upper()):
                step()
            assert {k: admin.dump(k) for k in scan_keys(admin)} == before, name


def test_an_agent_without_a_permission_exits_3_with_one_line(admin: redis.Redis) -> None:
    url = make_user(admin, "agent", name="mute")
    admin.execute_command("ACL", "SETUSER", "mute", "-xadd")
    out = cli(
        "--id", "x", "--handler", "demos.handlers:noop", "--until-idle",
        env=env_for(url), tool="redisflow-agent",
    )  # fmt: skip
    assert out.returncode == 3, out.stderr
    assert "may not run XADD" in one_line_error(out)
    assert scan_keys(admin) == set()


def test_permission_message_without_a_command_name() -> None:
    assert permission_message(None, None) == (
        "Redis user 'default' lacks a permission redisflow needs (NOPERM): see `redisflow acl`"
    )


def test_acl_cli_rejects_bad_input() -> None:
    out = cli("acl", "--role", "agent", "--role", "reader", "--namespace", "n", "--db", "-1")
    assert out.returncode == 2
    one_line_error(out)
    # several roles with --user: one user holding all of them (an agent with --scheduler)
    out = cli("acl", "--role", "agent", "--role", "operator", "--user", "x")
    assert out.returncode == 0, out.stderr
    [line] = out.stdout.splitlines()
    assert line.split()[2] == "x" and "+zpopmin" in line and "+incrby" in line
    out = cli("acl", "--role", "agent", "--role", "reader", "--namespace", "n")
    assert out.returncode == 0
    assert [ln.split()[2] for ln in out.stdout.splitlines()] == ["n-agent", "n-reader"]


def test_docs_table_matches_the_roles() -> None:
    doc = (ROOT / "docs" / "security.md").read_text()
    for role in ROLES:
        row = next(ln for ln in doc.splitlines() if ln.startswith(f"| {role} "))
        listed = {c.replace("\\|", "|") for c in re.findall(r"`([A-Z|\\]+)`", row)}
        assert listed == set(role_commands(role)), role
        scripts = row.rstrip(" |").rsplit("|", 1)[1]
        assert re.findall(r"`([a-z]+)`", scripts) == list(ROLE_SCRIPTS[role]), role
    assert Path(SAMPLE).exists()
