"""TLS (rediss:// with --tls-ca/--tls-cert/--tls-key) against a redis-server with a CA
made here, and credentials kept out of every message."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from engine_helpers import ROOT, cli, one_line_error

from engine import EmbeddedRedis, Engine, Workflow
from engine.connect.embedded import free_port
from engine.connect.urls import redact, url_of, with_tls
from engine.errors import UnreachableError

SAMPLE = str(ROOT / "demos" / "task-list-sample.yaml")


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl CLI to make certificates")
    d = tmp_path_factory.mktemp("tls")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=rf-ca",
            "-keyout", "ca.key", "-out", "ca.crt", cwd=d)  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name in ("server", "client"):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
                "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)  # fmt: skip
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "2", "-extfile", "san.ext",
                "-out", f"{name}.crt", cwd=d)  # fmt: skip
    return d


@pytest.fixture(scope="module")
def tls_server(certs: Path) -> Iterator[tuple[EmbeddedRedis, int]]:
    port = free_port()
    args = ["--tls-port", str(port), "--tls-cert-file", str(certs / "server.crt")]
    args += [
        "--tls-key-file",
        str(certs / "server.key"),
        "--tls-ca-cert-file",
        str(certs / "ca.crt"),
    ]
    args += ["--tls-auth-clients", "yes"]
    server = EmbeddedRedis(extra_args=args)
    try:
        server.start()  # a binary built without TLS refuses the options and exits
    except UnreachableError as e:
        pytest.skip(f"redis-server cannot serve TLS here: {e}")
    plain = redis.Redis(port=server.port)
    plain.config_set("requirepass", "s3cret-pw")  # after start(), whose PING has no password
    plain.close()
    yield server, port
    server.stop()


def tls_env(certs: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDISFLOW_")}
    env["REDISFLOW_TLS_CA"] = str(certs / "ca.crt")
    env["REDISFLOW_TLS_CERT"] = str(certs / "client.crt")
    env["REDISFLOW_TLS_KEY"] = str(certs / "client.key")
    return env


def test_every_command_over_tls(tls_server: tuple[EmbeddedRedis, int], certs: Path) -> None:
    _, port = tls_server
    url = f"rediss://:s3cret-pw@127.0.0.1:{port}/0"
    env = tls_env(certs)
    out = cli("push", SAMPLE, "--url", url, env=env)
    assert out.returncode == 0, out.stderr
    wid = out.stdout.strip()
    out = cli("--url", url, "--id", "t", "--handler", "demos.handlers:noop", "--until-idle",
              env=env, tool="redisflow-agent")  # fmt: skip
    assert out.returncode == 0, out.stderr
    out = cli("status", wid, "--json", "--url", url, env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["state"] == "succeeded"
    # the options, not the environment
    files = ["--tls-ca", str(certs / "ca.crt"), "--tls-cert", str(certs / "client.crt")]
    files += ["--tls-key", str(certs / "client.key")]
    out = cli("stats", "--url", url, *files, env={"PATH": os.environ["PATH"]})
    assert out.returncode == 0, out.stderr
    # without the CA the server is not trusted: unreachable, one line, no password
    bare = {k: v for k, v in env.items() if k != "REDISFLOW_TLS_CA"}
    out = cli("stats", "--url", url, env=bare)
    assert out.returncode == 3
    err = one_line_error(out)
    assert "s3cret-pw" not in err and "rediss://:***@127.0.0.1" in err, err


def test_the_demo_passes_tls_and_password_to_its_agents(
    tls_server: tuple[EmbeddedRedis, int], certs: Path
) -> None:
    _, port = tls_server
    url = f"rediss://:s3cret-pw@127.0.0.1:{port}/0"
    proc = subprocess.run(
        [sys.executable, "-m", "demos.demo_main", "--url", url, "--json", "--flush",
         "--workflows", "20", "--agents", "1", "--shape", "diamond4"],
        capture_output=True, text=True, timeout=120, env=tls_env(certs), cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["ok"] is True
    assert "s3cret-pw" not in proc.stdout + proc.stderr


def test_tls_options_need_a_rediss_url(redis_url: str) -> None:
    out = cli("stats", "--url", redis_url, "--tls-ca", "/nonexistent")
    assert out.returncode == 2
    assert "rediss://" in one_line_error(out)
    with pytest.raises(ValueError):
        with_tls("rediss://h:1/0", cert="c.pem")


def test_a_password_never_shows(redis_server: EmbeddedRedis) -> None:
    port = free_port()  # nothing listens there
    url = f"redis://alice:hunter2@127.0.0.1:{port}/0"
    with pytest.raises(UnreachableError) as info:
        Engine.connect(url)
    assert "hunter2" not in str(info.value)
    assert f"redis://alice:***@127.0.0.1:{port}/0" in str(info.value)
    out = cli("stats", "--url", url)
    assert out.returncode == 3 and "hunter2" not in out.stderr + out.stdout
    assert redact("rediss://:pw@h:1/0?ssl_ca_certs=/x") == "rediss://:***@h:1/0"
    assert redact("redis://h:1/0") == "redis://h:1/0"


def test_the_full_url_keeps_what_connecting_needs(redis_server: EmbeddedRedis) -> None:
    client = redis.Redis.from_url(redis_server.url)
    client.execute_command("ACL", "SETUSER", "bob", "on", ">p@ss:w/rd", "~*", "&*", "+@all")
    try:
        url = f"redis://bob:p%40ss%3Aw%2Frd@127.0.0.1:{redis_server.port}/0"
        with Engine.connect(url) as engine:
            assert engine.url == f"redis://bob:***@127.0.0.1:{redis_server.port}/0"
            with Engine.connect(url_of(engine.redis)) as again:
                assert again.redis.acl_whoami() == "bob"
        tls = redis.Redis.from_url("rediss://:pw@h:6380/2?ssl_ca_certs=/ca.pem")
        assert url_of(tls) == "rediss://:pw@h:6380/2?ssl_ca_certs=%2Fca.pem"
        with Engine.connect(redis_server.url) as plain:
            wf = Workflow("w")
            wf.task("a")
            assert plain.status(plain.push(wf)).state.value == "running"
    finally:
        client.acl_deluser("bob")
        client.close()
