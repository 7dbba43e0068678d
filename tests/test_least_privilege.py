# ruff: noqa: F811
"""Least privilege that holds in Redis, not only in redisflow's own tools: users made with
``redisflow acl`` on a real redis-server may run exactly their role's scripts (by SHA),
cannot read or change trigger secrets and schemes unless they are the operator, cannot
SELECT another database, and have no INFO."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from engine_helpers import ROOT, cli, one_line_error, run_agent, scan_keys
from own_server import admin, redis62, server  # noqa: F401 (fixtures, named in signatures)

from engine import EmbeddedRedis, Engine, Workflow
from engine.http import HttpConfig, create_app
from engine.http.auth import github_signature
from engine.http.errors import HttpError
from engine.http.triggers import new_trigger, verify_delivery
from engine.ops.acl import (
    AGENT_SCRIPTS,
    CHECK_SOURCE,
    OPERATOR_SCRIPTS,
    ROLE_SCRIPTS,
    ROLES,
    missing_permissions,
    script_shas,
    setuser_line,
)
from engine.store.scripts import SCRIPT_NAMES, script_sha, script_source
from engine.store.triggers import Trigger

SAMPLE_FILE_PATH = str(ROOT / "demos" / "task-list-sample.yaml")
SECRET = "gh-s3cret-0123456789"
JSON = "application/json"
TEMPLATE = "name: build\ntasks:\n  - name: compile\n"


def line_for(role: str, *extra: str, name: str = "") -> str:
    """The role's line as ``redisflow acl`` prints it."""
    out = cli("acl", "--role", role, *extra, *(["--user", name] if name else []))
    assert out.returncode == 0, out.stderr
    [line] = out.stdout.strip().splitlines()
    return line


def make_user(
    admin: redis.Redis, role: str, *extra: str, name: str = "", line: str | None = None
) -> str:
    """Create the role's user from the CLI's printed line (or ``line``); its URL."""
    user = name or f"rf-{role}"
    admin.execute_command(*(line or line_for(role, *extra, name=name)).split())
    admin.execute_command("ACL", "SETUSER", user, f">pw-{user}")
    port = admin.connection_pool.connection_kwargs["port"]
    db = extra[extra.index("--db") + 1] if "--db" in extra else "0"
    return f"redis://{user}:pw-{user}@127.0.0.1:{port}/{db}"


def env_for(url: str) -> dict[str, str]:
    return {**os.environ, "REDISFLOW_URL": url}


def dump_all(admin: redis.Redis) -> dict[str, Any]:
    return {k: admin.dump(k) for k in scan_keys(admin)}


def chain(name: str = "wf") -> Workflow:
    wf = Workflow(name)
    a = wf.task("a")
    wf.task("b", after=[a])
    return wf


# -- scripts: each role runs exactly its own ----------------------------------------------


def test_each_role_against_every_script(admin: redis.Redis) -> None:
    # the exact sources a client sends to Redis 7, loaded as after any first call
    for name in SCRIPT_NAMES:
        admin.script_load(script_source(name, shebang=True))
    admin.script_load(CHECK_SOURCE)
    prefix = "rf:{rf:0}"
    for role in ROLES:
        client = redis.Redis.from_url(make_user(admin, role), decode_responses=True)
        allowed = set(ROLE_SCRIPTS[role])
        for name in SCRIPT_NAMES:
            sha = script_sha(script_source(name, shebang=True))
            before = dump_all(admin)
            try:
                client.evalsha(sha, 1, f"{prefix}:x", prefix, 100)
                refused = None
            except redis.ResponseError as e:
                refused = e
            if name in allowed:
                # it ran (the junk arguments may make it fail, never for a permission)
                assert not isinstance(refused, redis.exceptions.NoPermissionError), (role, name)
            else:
                assert isinstance(refused, redis.exceptions.NoPermissionError), (role, name)
                assert "evalsha" in str(refused), (role, name, refused)
                assert dump_all(admin) == before, (role, name)
        # no EVAL (it runs any code), whatever the role
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.eval("return redis.call('PING')", 0)
        # the start-up check runs for the roles that run scripts
        if role == "reader":
            with pytest.raises(redis.exceptions.NoPermissionError):
                client.evalsha(script_sha(CHECK_SOURCE), 0)
        else:
            assert client.evalsha(script_sha(CHECK_SOURCE), 0) == []
        client.close()
    assert set(AGENT_SCRIPTS) == {
        "register", "claim", "complete", "heartbeat", "reap", "stop", "expand", "waits",
        "tasklog", "rollup",
    }  # fmt: skip
    assert "cancel" in OPERATOR_SCRIPTS and "claim" not in OPERATOR_SCRIPTS


@pytest.mark.parametrize("command", ["pause", "release", "cancel", "retry", "cleanup", "push"])
def test_an_agent_cannot_steer_with_the_stock_cli(admin: redis.Redis, command: str) -> None:
    with Engine.connect(make_user(admin, "operator")) as operator:
        wid = operator.push(chain())
        if command == "release":
            operator.pause(wid)
        if command == "cleanup":
            operator.cancel(wid)
    before = dump_all(admin)
    args = [command, SAMPLE_FILE_PATH if command == "push" else wid]
    out = cli(*args, env=env_for(make_user(admin, "agent")))
    assert out.returncode == 3, (out.stdout, out.stderr)
    err = one_line_error(out)
    script = "push" if command == "push" else command
    assert f"Redis user 'rf-agent' may not run EVALSHA of this redisflow's script {script}" in err
    assert "redisflow acl" in err
    assert dump_all(admin) == before


def test_the_agent_role_runs_everything_an_agent_does(admin: redis.Redis) -> None:
    """register, claim, complete, heartbeat, stop, expand (a map), a timeout (reap, then
    complete as the late attempt's agent): all with the agent's user."""
    import time

    with Engine.connect(make_user(admin, "operator")) as operator:
        wf = Workflow("fan")
        split = wf.task("split")
        wf.task("each", map=split["items"])
        fan = operator.push(wf)
        late = Workflow("slow")
        late.task("nap", timeout=0.3)
        slow = operator.push(late)
    with Engine.connect(make_user(admin, "agent")) as agent_engine:

        def handler(task: Any) -> Any:
            if task.name == "nap":
                time.sleep(1.0)
            return {"items": [1, 2, 3]} if task.name == "split" else task.item

        agent = run_agent(agent_engine, {"": handler}, heartbeat_s=0.1)
        assert agent.processed >= 4
        agent_engine.maintain()
    with Engine.connect(make_user(admin, "reader")) as reader:
        assert reader.status(fan).state.value == "succeeded"
        nap = reader.status(slow).tasks[0]
        assert nap.state.value == "failed" and "timed out" in str(nap.error)


def test_an_agent_whose_line_is_from_another_version_is_told_to_run_acl_again(
    admin: redis.Redis,
) -> None:
    # an older redisflow's line: its claim.lua had another SHA
    claim = script_sha(script_source("claim", shebang=True))
    stale = line_for("agent").replace(claim, "0" * 40)
    url = make_user(admin, "agent", line=stale)
    run = ("--id", "x", "--handler", "demos.handlers:noop", "--until-idle")
    out = cli(*run, env=env_for(url), tool="redisflow-agent")
    assert out.returncode == 3, out.stderr
    err = one_line_error(out)
    assert "Redis user 'rf-agent' may not run EVALSHA of this redisflow's script claim" in err
    assert "run `redisflow acl` again after an upgrade" in err
    assert scan_keys(admin) == set()  # refused before it registered
    # a line without even the check's SHA: the same advice, no script named
    check = script_sha(CHECK_SOURCE)
    make_user(admin, "agent", line=line_for("agent").replace(check, "0" * 40))
    out = cli(*run, env=env_for(url), tool="redisflow-agent")
    assert out.returncode == 3, out.stderr
    assert "may not run EVALSHA of this redisflow's scripts (NOPERM)" in one_line_error(out)


def test_an_agent_running_a_scheduler_is_one_user_with_both_roles(admin: redis.Redis) -> None:
    line = line_for("agent", "--role", "operator", name="sched")
    with Engine.connect(make_user(admin, "agent", name="sched", line=line)) as both:
        assert missing_permissions(both, ["agent", "operator"]) == []
    with Engine.connect(make_user(admin, "agent")) as agent_only:
        assert missing_permissions(agent_only, ["agent"]) == []
        lacking = missing_permissions(agent_only, ["agent", "operator"])
        assert "EVALSHA push" in lacking and "EVALSHA tick" in lacking and "INCRBY" in lacking
        assert "EVALSHA claim" not in lacking


# -- trigger secrets: sealed from readers and agents, checked at every delivery -----------


@pytest.fixture()
def served(admin: redis.Redis) -> Iterator[tuple[Engine, Any]]:
    """A trigger ``gh`` (github) put by the operator's user, and a test client of the HTTP
    server running as the operator's user (as ``redisflow serve`` does)."""
    import httpx
    from test_http_server import serving

    operator = Engine.connect(make_user(admin, "operator"))
    operator.put_template(TEMPLATE)
    operator.put_trigger(new_trigger("gh", "build", "github", SECRET))
    app = create_app(operator, HttpConfig(max_wait_s=5))
    with serving(app) as base, httpx.Client(base_url=base, timeout=30) as http:
        yield operator, http
    operator.close()


def test_readers_and_agents_cannot_read_a_trigger_secret(
    admin: redis.Redis, served: tuple[Engine, Any]
) -> None:
    operator, _ = served
    sealed = operator.keys.shard(0).trigger("gh")
    assert admin.hget(sealed, "s") == SECRET
    # no key under the namespace's pattern (what readers and agents reach) holds it
    assert not any(SECRET.encode() in (admin.dump(k) or b"") for k in scan_keys(admin, "rf:*"))
    for role in ("reader", "agent"):
        client = redis.Redis.from_url(make_user(admin, role), decode_responses=True)
        with pytest.raises(redis.exceptions.NoPermissionError, match="key"):
            client.hget(sealed, "s")  # both roles have HGET: refused by the key
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.hmget(sealed, ["a", "s"])
        with pytest.raises(redis.exceptions.NoPermissionError):  # (a reader: no HSET at all)
            client.hset(sealed, "a", "none")
        client.close()
    assert admin.hget(sealed, "a") == "github"


def test_a_forged_delivery_after_tampering_is_refused(
    admin: redis.Redis, served: tuple[Engine, Any]
) -> None:
    operator, http = served
    shard = operator.keys.shard(0)
    agent = redis.Redis.from_url(make_user(admin, "agent"), decode_responses=True)
    with pytest.raises(redis.exceptions.NoPermissionError):
        agent.hset(shard.trigger("gh"), "a", "none")
    # what an agent can write: the namespace's keys, where triggers used to live
    agent.hset(shard.legacy_trigger("gh"), mapping={"t": "build", "a": "none", "s": ""})
    agent.hset(shard.legacy_trigger("evil"), mapping={"t": "build", "a": "none", "s": ""})
    agent.zadd(shard.legacy_triggers, {"evil": 1, "gh": 1})
    agent.close()
    pushed = operator.stats().workflows_pushed
    forged = http.post("/v1/triggers/gh", json={"ref": "main"})
    assert forged.status_code == 401, forged.text
    r = http.post("/v1/triggers/evil", json={})
    assert r.status_code == 401, r.text
    assert "put it again with a new secret" in r.json()["error"]
    assert operator.stats().workflows_pushed == pushed
    body = b'{"ref": "main"}'
    signed = {"X-Hub-Signature-256": github_signature(SECRET, body), "Content-Type": JSON}
    assert http.post("/v1/triggers/gh", content=body, headers=signed).status_code == 202


def test_a_trigger_stored_the_old_way_is_refused_until_put_again(
    admin: redis.Redis, served: tuple[Engine, Any]
) -> None:
    operator, http = served
    shard = operator.keys.shard(0)
    admin.hset(shard.legacy_trigger("old"), mapping={"t": "build", "a": "github", "s": SECRET})
    admin.zadd(shard.legacy_triggers, {"old": 1})
    assert operator.trigger("old").legacy
    assert [(t.name, t.legacy) for t in operator.triggers()] == [("gh", False), ("old", True)]
    body = b"{}"
    signed = {"X-Hub-Signature-256": github_signature(SECRET, body), "Content-Type": JSON}
    r = http.post("/v1/triggers/old", content=body, headers=signed)
    assert r.status_code == 401 and "stored before trigger secrets were sealed" in r.text
    operator.put_trigger(new_trigger("old", "build", "github", "a-new-secret-0123"))
    assert not admin.exists(shard.legacy_trigger("old"))
    assert admin.zscore(shard.legacy_triggers, "old") is None
    signed = {
        "X-Hub-Signature-256": github_signature("a-new-secret-0123", body),
        "Content-Type": JSON,
    }
    assert http.post("/v1/triggers/old", content=body, headers=signed).status_code == 202


def test_every_delivery_checks_the_stored_scheme_failing_closed() -> None:
    body = b"{}"
    headers = {"x-hub-signature-256": github_signature(SECRET, body)}
    refused = [
        Trigger("t", "build", "", SECRET),  # no scheme
        Trigger("t", "build", "open", ""),  # unknown scheme
        Trigger("t", "build", "github", ""),  # a scheme needing a secret, without one
        Trigger("t", "build", "none", SECRET),  # none with a secret: never made so
        Trigger("t", "build", "github", SECRET, legacy=True),  # readable by every role
    ]
    for trigger in refused:
        with pytest.raises(HttpError) as e:
            verify_delivery(trigger, headers, body, 0)
        assert e.value.status == 401, trigger
    verify_delivery(Trigger("t", "build", "github", SECRET), headers, body, 0)


def test_namespaces_cannot_reach_each_others_sealed_keys() -> None:
    for bad in ("a!b", "a{b", "a}b"):
        with pytest.raises(ValueError, match="namespace"):
            setuser_line("operator", bad)
    assert "~team!*" in setuser_line("operator", "team")
    assert "!" not in setuser_line("agent", "team") and "!" not in setuser_line("reader", "team")


# -- SELECT and INFO ----------------------------------------------------------------------


def test_no_role_may_select_another_database(admin: redis.Redis) -> None:
    for role in ROLES:
        client = redis.Redis.from_url(make_user(admin, role), decode_responses=True)
        client.execute_command("SELECT", "0")
        with pytest.raises(redis.exceptions.NoPermissionError, match="select"):
            client.execute_command("SELECT", "1")
        client.close()
    # a user made for database 2 works there, and only there
    with Engine.connect(make_user(admin, "operator", "--db", "2", name="op2")) as op:
        wid = op.push(chain())
    with Engine.connect(make_user(admin, "reader", "--db", "2", name="rd2")) as rd:
        assert rd.status(wid).state.value == "running"
        with pytest.raises(redis.exceptions.NoPermissionError, match="select"):
            rd.redis.execute_command("SELECT", "0")
    assert "&__keyspace@2__:rf:*" in line_for("reader", "--db", "2")


def test_no_role_has_info_and_everything_still_works(admin: redis.Redis) -> None:
    admin.config_set("maxmemory-policy", "allkeys-lru")  # what INFO would warn about
    urls = {role: make_user(admin, role) for role in ROLES}
    for url in urls.values():
        client = redis.Redis.from_url(url)
        with pytest.raises(redis.exceptions.NoPermissionError, match="info"):
            client.info("memory")
        client.close()
    env = env_for(urls["operator"])
    assert cli("push", SAMPLE_FILE_PATH, env=env).returncode == 0
    out = cli(
        "--id", "x", "--handler", "demos.handlers:noop", "--until-idle",
        env=env_for(urls["agent"]), tool="redisflow-agent",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "WARNING" not in out.stderr
    out = cli("list", env=env_for(urls["reader"]))
    assert out.returncode == 0 and "succeeded" in out.stdout, out.stderr


def test_the_lines_hold_no_eval_info_or_whole_select() -> None:
    for role in ROLES:
        for cluster in (False, True):
            words = setuser_line(role, cluster=cluster).split()
            assert not {"+eval", "+evalsha", "+info", "+select", "+@all"} & set(words)
            assert [w for w in words if w.startswith("+select")] == ["+select|0"]
    # each script in both forms a client sends to one Redis: 7 (#!lua) and 6.2
    claim = {script_sha(script_source("claim", shebang=s)) for s in (True, False)}
    assert claim <= set(script_shas("agent"))
    assert script_shas("reader") == []
    assert script_shas("agent", cluster=True) == [
        *(script_sha(script_source(n, shebang=True, sharded=True)) for n in AGENT_SCRIPTS),
        script_sha(CHECK_SOURCE),
    ]


# -- Redis 6.2: the same lines --------------------------------------------------------------


def test_the_lines_work_on_redis_6_2(redis62: EmbeddedRedis) -> None:
    admin62 = redis.Redis.from_url(redis62.url, decode_responses=True)
    admin62.flushall()
    assert admin62.info("server")["redis_version"].startswith("6.2.")
    try:
        urls = {role: make_user(admin62, role) for role in ROLES}
        with Engine.connect(urls["operator"]) as operator:
            wid = operator.push(chain())
        with Engine.connect(urls["agent"]) as agent_engine:
            assert run_agent(agent_engine, {"": lambda t: "ok"}).processed == 2
            with pytest.raises(redis.exceptions.NoPermissionError, match="script cancel"):
                agent_engine.cancel(wid)
        with Engine.connect(urls["reader"]) as reader:
            assert reader.status(wid).state.value == "succeeded"
        assert re.search(r"\bINFO\b", str(admin62.acl_getuser("rf-agent"))) is None
    finally:
        for user in admin62.acl_users():
            if user != "default":
                admin62.acl_deluser(user)
        admin62.flushall()
        admin62.close()


# -- the wait keeper: child runs without the operator's role --------------------------------


def test_an_agent_of_the_keeper_role_starts_child_runs_and_reads_no_trigger_secret(
    admin: redis.Redis,
) -> None:
    """The documented setup for workflows with run: tasks, `acl --role agent --role keeper
    --user NAME`: its agent starts, links, reports and cancels child runs; it has no sealed
    key pattern, reads no trigger secret and runs none of the operator's steering."""
    from engine.runtime.wait_keeper import WaitKeeper

    line = line_for("agent", "--role", "keeper", name="kp")
    assert "!" not in line and "__keyspace" not in line
    assert line_for("keeper").split()[:3] == ["ACL", "SETUSER", "rf-keeper"]
    operator = Engine.connect(make_user(admin, "operator"))
    operator.put_template("name: child\ntasks:\n  - name: inside\n")
    operator.put_template("name: stuck\ntasks:\n  - name: inside\n    type: nobody\n")
    operator.put_trigger(new_trigger("gh", "child", "github", SECRET))
    done = Workflow("parent")
    done.task("kid", after=[done.task("a")], run="child")
    wid = operator.push(done)
    late = Workflow("late")
    late.task("kid", run="stuck")
    orphaned = operator.push(late)
    url = make_user(admin, "agent", name="kp", line=line)
    with Engine.connect(url) as kp:
        assert missing_permissions(kp, ["agent", "keeper"]) == []
        assert "EVALSHA pause" in missing_permissions(kp, ["operator"])
        for _ in range(4):
            run_agent(kp, {"": lambda t: "ok"})
            WaitKeeper(kp).step()
        st = kp.status(wid)
        assert st.state.value == "succeeded", st.to_dict()
        kid = st.task("kid").child
        assert kid is not None and kp.status(kid).parent == f"{wid}:1:1"
        stuck = kp.status(orphaned).task("kid").child
        assert stuck is not None and kp.state(stuck) == "running"
        operator.store.calls.cancel(orphaned, "test")  # the script alone: as a deadline ends it
        WaitKeeper(kp).step()  # the keeper cancels the orphan
        assert kp.state(stuck) == "cancelled"
        with pytest.raises(redis.exceptions.NoPermissionError, match="script pause"):
            kp.pause(wid)
        sealed = kp.keys.shard(0).trigger("gh")
        with pytest.raises(redis.exceptions.NoPermissionError, match="key"):
            kp.redis.hget(sealed, "s")
        with pytest.raises(redis.exceptions.NoPermissionError):
            kp.redis.hset(sealed, "a", "none")
    assert admin.hget(sealed, "s") == SECRET and admin.hget(sealed, "a") == "github"
    operator.close()
