"""``redisflow trigger put|list|show|rm`` and ``redisflow serve`` as a user runs them."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from engine_helpers import BIN, ROOT, cli, one_line_error, scan_keys

from engine import Engine

TEMPLATE = "name: build\ntasks:\n  - name: compile\n"


@pytest.fixture()
def with_template(engine: Engine) -> Engine:
    engine.put_template(TEMPLATE)
    return engine


def _trigger_keys(engine: Engine) -> set[str]:
    return {k for k in scan_keys(engine.redis) if ":trig" in k}


@pytest.mark.same_on_cluster
@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ([], "needs a secret"),
        (["--secret-env", "RF_TEST_UNSET"], "RF_TEST_UNSET: the variable is unset or empty"),
        (["--secret-file", "/nonexistent/secret"], "cannot read it"),
    ],
)
def test_a_trigger_without_its_secret_is_refused(
    with_template: Engine, cli_env: dict[str, str], extra: list[str], says: str
) -> None:
    r = cli("trigger", "put", "gh", "--template", "build", "--auth", "github", *extra, env=cli_env)
    assert r.returncode == 2
    assert says in one_line_error(r)
    assert _trigger_keys(with_template) == set()


def test_bad_triggers_write_nothing(with_template: Engine, cli_env: dict[str, str]) -> None:
    env = {**cli_env, "GH_SECRET": "s3cret"}
    for args, says in (
        (["--template", "nope", "--auth", "github", "--secret-env", "GH_SECRET"], "nope"),
        (["--template", "build", "--auth", "none", "--secret-env", "GH_SECRET"], "no secret"),
        (["--template", "build", "--auth", "standard-webhooks", "--secret-env", "GH_SECRET"],
         "whsec_"),
        (["--template", "build", "--auth", "github", "--secret-env", "GH_SECRET",
          "--idempotency-header", "a b"], "header"),
    ):  # fmt: skip
        r = cli("trigger", "put", "gh", *args, env=env)
        assert r.returncode == 2, r.stderr
        assert says in one_line_error(r)
    r = cli("trigger", "put", "gh", "--template", "build", env=env)  # --auth is required
    assert r.returncode == 2
    assert _trigger_keys(with_template) == set()


def test_trigger_put_list_show_rm(
    with_template: Engine, cli_env: dict[str, str], tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    r = cli(
        "trigger", "put", "gh", "--template", "build", "--auth", "github",
        "--secret-file", str(secret), "--idempotency-header", "X-GitHub-Delivery", env=cli_env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "POST /v1/triggers/gh runs template build" in r.stdout
    assert with_template.trigger("gh").secret == "s3cret"
    r = cli("trigger", "put", "open", "--template", "build", "--auth", "none", env=cli_env)
    assert r.returncode == 0, r.stderr
    listed = json.loads(cli("trigger", "list", "--json", env=cli_env).stdout)
    assert [t["name"] for t in listed] == ["gh", "open"]
    assert all("secret" not in t for t in listed)
    shown = json.loads(cli("trigger", "show", "gh", "--json", env=cli_env).stdout)
    assert shown["idempotency_header"] == "X-GitHub-Delivery"
    assert shown["has_secret"] is True
    text = cli("trigger", "show", "gh", env=cli_env).stdout
    assert "s3cret" not in text
    assert "gh" in cli("trigger", "list", env=cli_env).stdout
    assert cli("trigger", "rm", "gh", env=cli_env).returncode == 0
    r = cli("trigger", "rm", "gh", env=cli_env)
    assert r.returncode == 2
    assert "does not exist" in one_line_error(r)
    assert [t.name for t in with_template.triggers()] == ["open"]


@pytest.mark.same_on_cluster
def test_serve_refuses_a_public_address_without_tokens(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    r = cli("serve", "--host", "0.0.0.0", env=cli_env)
    assert r.returncode == 2
    assert "without tokens" in one_line_error(r)
    bad = tmp_path / "tokens"
    bad.write_text("admin abcdefghijklmnopqrstuvwxyz\n")
    r = cli("serve", "--host", "0.0.0.0", "--token-file", str(bad), env=cli_env)
    assert r.returncode == 2
    assert f"{bad}:1" in one_line_error(r)


def test_the_longest_event_stream_is_set_with_max_stream(cli_env: dict[str, str]) -> None:
    from engine.http.server import Settings

    settings = Settings(url=None, namespace="rf", max_payload=1000, max_stream_s=90.0)
    assert settings.config().max_stream_s == 90.0
    assert Settings(url=None, namespace="rf", max_payload=1000).config().max_stream_s == 3600
    r = cli("serve", "--max-stream", "forever", env=cli_env)
    assert r.returncode == 2 and "--max-stream" in r.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.same_on_cluster
def test_serve_answers_until_stopped(
    with_template: Engine, cli_env: dict[str, str], tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("write write-token-0123456789\n")
    port = _free_port()
    proc = subprocess.Popen(
        [str(BIN / "redisflow"), "serve", "--port", str(port), "--token-file", str(tokens)],
        env=cli_env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            try:
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.05)
        auth = {"Authorization": "Bearer write-token-0123456789"}
        assert httpx.post(f"{base}/v1/templates/build/runs", json={}).status_code == 401
        r = httpx.post(f"{base}/v1/templates/build/runs", json={"v": 1}, headers=auth)
        assert r.status_code == 202
        assert with_template.status(r.json()["id"]).input == {"v": 1}
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
