# ruff: noqa: F811
"""Redis memory limits: a full server refuses whole scripts, never half of one; an eviction
policy that would drop workflows is reported loudly."""

from __future__ import annotations

import os

import pytest
import redis
from engine_helpers import ROOT, cli, one_line_error, scan_keys
from own_server import admin, server  # noqa: F401 (fixtures, named in signatures)

from engine import EmbeddedRedis, Engine, Workflow
from engine.connect.health import server_warnings
from engine.store.scripts import script_source, supports_shebang

SAMPLE = str(ROOT / "demos" / "task-list-sample.yaml")


def sample() -> Workflow:
    wf = Workflow("wf")
    a = wf.task("a", payload="x" * 100)
    wf.task("b", after=[a])
    return wf


def over_the_limit(admin: redis.Redis) -> None:
    """Put used memory just over a small maxmemory (policy noeviction)."""
    admin.config_set("maxmemory-policy", "noeviction")
    used = int(admin.info("memory")["used_memory"])
    admin.config_set("maxmemory", used - 256 * 1024)


def test_scripts_declare_flags_on_redis_7(admin: redis.Redis) -> None:
    if int(admin.info("server")["redis_version"].split(".")[0]) < 7:
        pytest.skip("Redis 6.2 reads no #!lua line")
    assert supports_shebang(admin)
    assert script_source("push", True).startswith("#!lua\n")
    assert script_source("cleanup", True).startswith("#!lua flags=allow-oom\n")
    assert not script_source("push").startswith("#!")


def test_a_full_redis_refuses_whole_scripts(admin: redis.Redis, server: EmbeddedRedis) -> None:
    with Engine.connect(server.url) as engine:
        wid = engine.push(sample())
        done = engine.push(sample())
        engine.cancel(done)
        over_the_limit(admin)
        before = {k: admin.dump(k) for k in scan_keys(admin)}
        env = {**os.environ, "REDISFLOW_URL": server.url}
        for args in (["push", SAMPLE], ["pause", wid], ["cancel", wid]):
            out = cli(*args, env=env)
            assert out.returncode == 3, out.stderr
            err = one_line_error(out)
            assert "Redis is out of memory" in err and "nothing was written" in err, err
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            engine.retry(wid)
        assert {k: admin.dump(k) for k in scan_keys(admin)} == before
        # cleanup frees memory, so it runs even now
        engine.cleanup(done)
        assert engine.status(wid).state.value == "running"


def test_an_eviction_policy_is_a_loud_warning(admin: redis.Redis, server: EmbeddedRedis) -> None:
    assert server_warnings(admin) == []
    admin.config_set("maxmemory-policy", "allkeys-lru")
    [warning] = server_warnings(admin)
    assert "allkeys-lru" in warning and "workflows are lost" in warning
    env = {**os.environ, "REDISFLOW_URL": server.url}
    out = cli(
        "--id", "w", "--handler", "demos.handlers:noop", "--until-idle",
        env=env, tool="redisflow-agent",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "redisflow-agent: WARNING: Redis maxmemory-policy is allkeys-lru" in out.stderr


def test_memory_near_the_limit_is_a_warning(admin: redis.Redis) -> None:
    used = int(admin.info("memory")["used_memory"])
    admin.config_set("maxmemory", int(used * 1.05))
    assert any("of maxmemory" in w for w in server_warnings(admin))
