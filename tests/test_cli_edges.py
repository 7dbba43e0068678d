"""The CLI's edges: another protocol on the port, a closed pipe, options before the
command, piped output, writes without a Redis, waits no agent can end, cleanup's question."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_helpers import BIN, ROOT, cli, one_line_error

from engine import Engine, Workflow
from engine.cli import common as cli_common
from engine.cli import main as cli_main
from engine.cli.http_cmds import HTTP_EXTRA
from engine.core.model import (
    AgentInfo,
    AgentState,
    TaskState,
    TaskStatus,
    WorkflowState,
    WorkflowStatus,
)
from engine.core.unserved import unserved, unserved_line

DEMOS = ROOT / "demos"
LONG = "a-task-whose-name-is-long-enough-to-be-cut-in-a-narrow-table"


def no_url_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "REDISFLOW_URL"}


@pytest.fixture()
def http_port() -> Iterator[int]:
    """A port where something other than Redis answers (an HTTP-like reply)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def answer() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.recv(1024)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


def test_another_protocol_on_the_port_is_one_line_exit_3(http_port: int) -> None:
    url = f"redis://127.0.0.1:{http_port}/0"
    result = cli("list", "--url", url, env=no_url_env())
    assert result.returncode == 3
    err = one_line_error(result)
    assert f"cannot reach Redis at {url}" in err and "not the Redis protocol" in err


@pytest.mark.single_redis  # a cluster has one database: its URLs name none
def test_a_database_redis_does_not_have_is_one_line_exit_3(redis_url: str) -> None:
    """``redis://HOST:PORT/99`` on a server with 16 databases: the CLI, an agent, the HTTP
    server (one process or workers) and the console each say so in one line, exit 3."""
    url = redis_url.rsplit("/", 1)[0] + "/99"
    env = no_url_env()
    port = str(_free_port())
    for tool, args in (
        ("redisflow", ["list"]),
        ("redisflow", ["status", "1"]),
        ("redisflow-agent", ["--exec", "true", "--until-idle"]),
        ("redisflow", ["serve", "--port", port]),
        ("redisflow", ["serve", "--port", port, "--workers", "2"]),
        ("redisflow-tui", []),
    ):
        result = cli(*args, "--url", url, env=env, tool=tool)
        assert result.returncode == 3, (tool, args, result.stderr[-2000:])
        err = one_line_error(result)
        assert f"Redis at {url} has no database 99" in err, (tool, args, err)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    "args",
    [
        ["list", "--json"],
        ["list"],
        ["agents", "--json"],
        ["template", "list"],
        ["schedule", "list"],
        ["status", "{wid}"],
    ],
)
def test_a_closed_pipe_ends_quietly(
    args: list[str], engine: Engine, cli_env: dict[str, str]
) -> None:
    wf = Workflow("piped")
    wf.task("a")
    wid = engine.push(wf)
    args = [a.format(wid=wid) for a in args]
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written: every write fails
    try:
        proc = subprocess.run(
            [str(BIN / "redisflow"), *args],
            env=cli_env,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    assert proc.stderr == ""
    assert proc.returncode == 141


def test_options_before_the_command(engine: Engine, redis_url: str) -> None:
    wf = Workflow("before")
    wf.task("a")
    wid = engine.push(wf)
    env = no_url_env()
    result = cli("--url", redis_url, "--json", "list", env=env)
    assert result.returncode == 0, result.stderr
    assert [w["id"] for w in json.loads(result.stdout)["workflows"]] == [wid]
    after = cli("--url", "redis://127.0.0.1:1/0", "status", wid, "--url", redis_url, env=env)
    assert after.returncode == 0, after.stderr  # given after the command too: that one wins
    templates = cli("--url", redis_url, "template", "list", "--json", env=env)
    assert json.loads(templates.stdout) == {"templates": []}
    refused = cli("--url", redis_url, "plan", str(DEMOS / "report.yaml"), env=env)
    assert refused.returncode == 2
    assert "--url does not apply to `redisflow plan`" in one_line_error(refused)


def test_piped_output_is_never_cut(engine: Engine, cli_env: dict[str, str], tmp_path: Path) -> None:
    wf = Workflow("piped-output")
    wf.task(LONG, payload={"note": "x" * 150})
    wf.task("second", after=[LONG])
    wid = engine.push(wf)
    env = {**cli_env, "COLUMNS": "40"}  # as narrow as a terminal can be: ignored in a pipe
    status = cli("status", wid, env=env)
    assert status.returncode == 0, status.stderr
    assert "…" not in status.stdout
    [row] = [line for line in status.stdout.splitlines() if line.startswith("second")]
    assert "all_success: 0/1 succeeded, 1 pending → waiting" in row  # the output/error column
    assert f"{LONG} " in status.stdout
    path = tmp_path / "plan.yaml"
    path.write_text(f"name: p\ntasks:\n  - name: {LONG}\n  - {{name: b, after: [{LONG}]}}\n")
    plan = cli("plan", str(path), "--assume", f"{LONG}=failed", env=env)
    assert plan.returncode == 0, plan.stderr
    [row] = [line for line in plan.stdout.splitlines() if line.startswith("b ")]
    assert "all_success: 0/1 succeeded, 1 failed → upstream_failed" in row  # words not broken


def test_a_narrow_terminal_cuts_or_drops_no_column(
    engine: Engine,
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rich.console import Console

    wf = Workflow("narrow")
    wf.task(LONG)
    wf.task("second", after=[LONG])
    wid = engine.push(wf)
    screen = io.StringIO()
    monkeypatch.setattr(cli_common, "terminal", lambda: True)
    monkeypatch.setattr(cli_common._LazyConsole, "_console", Console(file=screen, width=60))
    assert cli_main.run(["status", wid, "--url", redis_url]) == 0
    shown = screen.getvalue()
    assert "…" not in shown
    [row] = [line for line in shown.splitlines() if line.startswith("second")]
    assert LONG in row and "all_success: 0/1 succeeded, 1 pending → waiting" in row
    assert max(len(line) for line in shown.splitlines()) > 60  # the terminal wraps it


@pytest.mark.parametrize(
    "args",
    [
        ["push", str(DEMOS / "report.yaml")],
        ["template", "put", str(DEMOS / "deploy.yaml")],
        ["run", "deploy"],
    ],
)
def test_a_write_without_a_redis_is_refused(args: list[str]) -> None:
    result = cli(*args, env=no_url_env())
    assert result.returncode == 2
    err = one_line_error(result)
    assert "neither --url nor REDISFLOW_URL" in err and "export REDISFLOW_URL" in err
    assert "private Redis at" not in result.stderr  # refused before starting one


def test_a_schedule_put_without_a_redis_is_refused(tmp_path: Path) -> None:
    result = cli(
        "schedule", "put", "--name", "n", "--template", "t", "--every", "1h", env=no_url_env()
    )
    assert result.returncode == 2
    assert "`redisflow schedule put` writes to Redis" in one_line_error(result)


def test_a_push_that_waits_may_use_a_private_redis() -> None:
    result = cli("push", str(DEMOS / "report.yaml"), "--wait", "--timeout", "0.1", env=no_url_env())
    assert result.returncode == 5, result.stderr  # waited (no agent there): timed out
    assert "private Redis at" in result.stderr


def slow_file(tmp_path: Path) -> Path:
    path = tmp_path / "slow.yaml"
    path.write_text("name: s\ntasks:\n  - {name: resize, type: slow}\n")
    return path


def test_a_wait_no_agent_can_end_says_so_and_times_out_with_exit_5(
    engine: Engine, cli_env: dict[str, str], tmp_path: Path
) -> None:
    result = cli("push", str(slow_file(tmp_path)), "--wait", "--timeout", "0.3", env=cli_env)
    assert result.returncode == 5
    wid = result.stdout.strip()
    assert f"workflow {wid}: no live agent serves type 'slow' (ready: resize)" in result.stderr
    assert "gave up after 0.3s; still unfinished" in result.stderr
    assert "Traceback" not in result.stderr
    status = cli("status", wid, env=cli_env)
    assert "no live agent serves type 'slow' (ready: resize)" in status.stdout
    as_json = json.loads(cli("status", wid, "--json", env=cli_env).stdout)
    assert as_json["unserved"] == {"slow": ["resize"]}


def agent(types: list[str], state: AgentState) -> AgentInfo:
    return AgentInfo("a1", types, 1, state, 0.1, 30.0, 5.0, [])


def test_unserved_counts_live_agents_only() -> None:
    st = WorkflowStatus("7", "w", WorkflowState.RUNNING, 2, 0, 0, 0, 0.0, None)
    st.tasks = [
        TaskStatus(0, "a", "slow", TaskState.READY),
        TaskStatus(1, "b", "", TaskState.READY),
    ]
    assert unserved(st, []) == {"slow": ["a"], "": ["b"]}
    assert unserved(st, [agent(["slow", ""], AgentState.ONLINE)]) == {}
    assert unserved(st, [agent(["slow"], AgentState.STALE)]) == {"": ["b"]}
    assert unserved(st, [agent(["slow", ""], AgentState.DEAD)]) == {"slow": ["a"], "": ["b"]}
    assert unserved_line({"slow": ["a"]}) == "no live agent serves type 'slow' (ready: a)"
    st.state = WorkflowState.PAUSED  # held on purpose: nothing to say
    assert unserved(st, []) == {}


class Terminal(io.StringIO):
    """Stdin as a terminal, with the operator's answer."""

    def isatty(self) -> bool:
        return True


def finished(engine: Engine, n: int) -> list[str]:
    wf = Workflow("done")
    wf.task("a")
    wids = [engine.push(wf) for _ in range(n)]
    for wid in wids:
        engine.cancel(wid)
    return wids


def test_cleanup_finished_asks_on_a_terminal(
    engine: Engine,
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    wids = finished(engine, 3)
    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    assert cli_main.run(["cleanup", "--finished", "--url", redis_url]) == 1
    err = capsys.readouterr().err
    assert "delete 3 finished workflows? [y/N]" in err and "nothing deleted" in err
    assert engine.count_finished() == 3
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    assert cli_main.run(["cleanup", "--finished", "--url", redis_url]) == 0
    assert "cleaned up 3 finished workflows" in capsys.readouterr().out
    assert engine.count_finished() == 0
    finished(engine, 2)
    monkeypatch.setattr("sys.stdin", Terminal(""))  # --yes: nothing asked, nothing read
    assert cli_main.run(["cleanup", "--finished", "--yes", "--url", redis_url]) == 0
    assert "[y/N]" not in capsys.readouterr().err
    assert engine.count_finished() == 0
    assert all(w for w in wids)


def test_cleanup_finished_in_a_script_does_not_ask(engine: Engine, cli_env: dict[str, str]) -> None:
    finished(engine, 2)
    result = cli("cleanup", "--finished", env=cli_env)  # stdin is not a terminal
    assert result.returncode == 0, result.stderr
    assert "cleaned up 2 finished workflows" in result.stdout


def test_install_lines_name_the_http_extra() -> None:
    assert "pip install -e '.[http]'" in HTTP_EXTRA
    readme = (ROOT / "README.md").read_text()
    assert "pip install -e '.[embedded,console,http]'" in readme
    makefile = (ROOT / "Makefile").read_text()
    assert 'PYTHONWARNINGS="ignore:Editable installation" $(BIN)/pip install' in makefile
