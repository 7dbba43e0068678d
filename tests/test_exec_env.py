"""An --exec command's environment: an allow-list of the agent's (PATH, HOME, LANG,
LC_*, ...), plus what --exec-env or REDISFLOW_EXEC_ENV name; never the agent's Redis URL,
HTTP tokens or webhook secrets unless named in full."""

from __future__ import annotations

import shlex
import sys
from typing import Any

import pytest
from engine_helpers import cli, one_line_error

from engine import Engine, Task, Workflow, exec_handler
from engine.runtime.handlers import exec_environment

# prints the environment it got, as JSON
SHOW_ENV = shlex.join(
    [
        sys.executable,
        "-c",
        "import json, os, sys; sys.stdin.read(); print(json.dumps(dict(os.environ)))",
    ]
)
SECRETS = {
    "REDISFLOW_URL": "redis://:hunter2@127.0.0.1:1/0",
    "REDISFLOW_HTTP_WRITE_TOKEN": "write-token-secret",
    "REDISFLOW_PASSWORD": "hunter2",
    "GITHUB_WEBHOOK_SECRET": "whsec_secret",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
}


def test_the_default_environment_is_an_allow_list() -> None:
    source = {
        "PATH": "/bin",
        "HOME": "/h",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "TZ": "UTC",
        "PYTHONPATH": "/p",
        "MY_API_KEY": "k",
        **SECRETS,
    }
    got = exec_environment(source=source)
    assert got == {k: source[k] for k in ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "PYTHONPATH")}
    assert exec_environment(["MY_API_KEY"], source)["MY_API_KEY"] == "k"
    assert "AWS_SECRET_ACCESS_KEY" in exec_environment(["AWS_*"], source)
    # REDISFLOW_* only by its full name: no pattern passes it, not even *
    for pattern in ("*", "REDISFLOW_*", "REDIS*"):
        assert not any(k.startswith("REDISFLOW_") for k in exec_environment([pattern], source))
    assert exec_environment(["REDISFLOW_URL"], source)["REDISFLOW_URL"] == SECRETS["REDISFLOW_URL"]
    assert "MY_API_KEY" in exec_environment(["*"], source)


def run_handler(handler: Any) -> dict[str, str]:
    task = Task(workflow_id="1", index=0, name="a", type="", payload=None, attempt=1)
    out = handler(task)
    assert isinstance(out, dict), out
    return out


def test_exec_handler_leaves_the_agents_secrets_out(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**SECRETS, "MY_OWN": "mine"}.items():
        monkeypatch.setenv(name, value)
    got = run_handler(exec_handler(SHOW_ENV))
    assert not set(SECRETS) & set(got), got
    assert "MY_OWN" not in got and "PATH" in got
    given = run_handler(exec_handler(SHOW_ENV, env={"ONLY": "this"}))
    assert given["ONLY"] == "this" and "PATH" not in given  # (Python may add LC_CTYPE)


def run_agent(
    engine: Engine, redis_url: str, *extra: str, env: dict[str, str] | None = None
) -> dict[str, str]:
    """Run one task through ``redisflow-agent --exec``: the environment its command got."""
    wf = Workflow("env")
    wf.task("a")
    wid = engine.push(wf)
    base = {"PATH": "/usr/bin:/bin", **SECRETS, "REDISFLOW_URL": redis_url, **(env or {})}
    out = cli("--exec", SHOW_ENV, "--until-idle", *extra, tool="redisflow-agent", env=base)
    assert out.returncode == 0, out.stderr
    status = engine.status(wid)
    assert status.state.value == "succeeded", status
    seen: dict[str, str] = status.tasks[0].output
    return seen


def test_an_exec_command_does_not_see_the_agents_secrets(engine: Engine, redis_url: str) -> None:
    seen = run_agent(engine, redis_url, env={"MY_TOKEN": "t", "MY_ALLOWED": "yes"})
    assert not set(SECRETS) & set(seen), sorted(seen)
    assert "MY_TOKEN" not in seen and "MY_ALLOWED" not in seen
    assert seen["PATH"] == "/usr/bin:/bin"


def test_exec_env_names_what_else_passes(engine: Engine, redis_url: str) -> None:
    seen = run_agent(
        engine,
        redis_url,
        "--exec-env",
        "MY_ALLOWED",
        "--exec-env",
        "REDISFLOW_URL",
        env={"MY_TOKEN": "t", "MY_ALLOWED": "yes", "REDISFLOW_EXEC_ENV": "EXTRA_*, OTHER"},
    )
    assert seen["MY_ALLOWED"] == "yes" and seen["REDISFLOW_URL"] == redis_url
    assert "MY_TOKEN" not in seen and "REDISFLOW_HTTP_WRITE_TOKEN" not in seen
    seen = run_agent(engine, redis_url, env={"EXTRA_A": "1", "REDISFLOW_EXEC_ENV": "EXTRA_*"})
    assert seen["EXTRA_A"] == "1" and "REDISFLOW_URL" not in seen


def test_exec_env_usage_errors_exit_2(cli_env: dict[str, str]) -> None:
    for args, pattern in (
        (["--handler", "demos.handlers:noop", "--exec-env", "X"], "--exec-env goes with --exec"),
        (["--exec", "true", "--exec-env", "A-B"], "--exec-env 'A-B': expected"),
    ):
        out = cli(*args, tool="redisflow-agent", env=cli_env)
        assert out.returncode == 2, out.stderr
        assert pattern in one_line_error(out)
