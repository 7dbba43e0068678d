"""An --exec command's output is read as it comes: stdout up to --max-payload (a command
writing more is stopped and its attempt fails, saying why), stderr's head kept and the
rest counted. The agent never holds a command's whole output."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import BIN, run_agent

from engine import Engine, Workflow, exec_handler
from engine.runtime import handlers as handlers_mod
from engine.runtime.handlers import EXEC_STDERR_KEEP
from engine.runtime.tasklogs import read_logs

MB = 1 << 20


def writer(tmp_path: Path, stderr_mb: int, stdout_mb: int, code: int = 0) -> str:
    """A command writing ``stderr_mb`` MiB to stderr, then ``stdout_mb`` MiB to stdout;
    once all is written it leaves a file ``done`` and exits with ``code``."""
    script = tmp_path / "writer.py"
    script.write_text(
        "import sys\n"
        "sys.stdin.buffer.read()\n"
        "err = b'e' * 1048575 + b'\\n'\n"
        f"for _ in range({stderr_mb}):\n"
        "    sys.stderr.buffer.write(err)\n"
        "sys.stderr.buffer.flush()\n"
        "out = b'o' * 1048576\n"
        f"for _ in range({stdout_mb}):\n"
        "    sys.stdout.buffer.write(out)\n"
        "sys.stdout.buffer.flush()\n"
        f"open({str(tmp_path / 'done')!r}, 'w').close()\n"
        f"sys.exit({code})\n"
    )
    return shlex.join([sys.executable, str(script)])


class Watched:
    """Every stream head the exec handler keeps, and the most each ever held."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.heads: list[Any] = []
        self.peaks: dict[int, int] = {}
        self.seen: dict[int, int] = {}
        real = handlers_mod._Head
        watched = self

        class Head(real):  # type: ignore[misc, valid-type]
            def __init__(self, cap: int, stop_over: bool = False) -> None:
                super().__init__(cap, stop_over)
                watched.heads.append(self)

            def take(self, chunk: bytes) -> bool:
                more: bool = super().take(chunk)
                key = id(self)
                watched.seen[key] = watched.seen.get(key, 0) + len(chunk)
                held = sum(len(c) for c in self.chunks)
                watched.peaks[key] = max(watched.peaks.get(key, 0), held)
                return more

        monkeypatch.setattr(handlers_mod, "_Head", Head)


def test_exec_output_is_never_held_whole(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 MiB of stderr and 50 MiB of stdout: the buffers never pass their caps, the
    command is stopped once its stdout passes the limit, the attempt fails saying so."""
    watched = Watched(monkeypatch)
    wf = Workflow("loud")
    wf.task("a")
    wid = engine.push(wf)
    limit = MB
    run_agent(engine, {"": exec_handler(writer(tmp_path, 200, 50), max_output=limit)})
    task = engine.status(wid).task("a")
    assert task.state == "failed"
    assert f"output passed the {limit}-byte limit (--max-payload)" in (task.error or "")
    assert not (tmp_path / "done").exists()  # stopped before it wrote all of it
    out, err = watched.heads
    # all of stderr was read and counted (and a traceback: its stdout was closed)
    assert watched.seen[id(err)] >= 200 * MB
    assert err.dropped == watched.seen[id(err)] - EXEC_STDERR_KEEP
    assert watched.peaks[id(err)] == EXEC_STDERR_KEEP
    assert watched.peaks[id(out)] == limit and out.over


def test_a_failed_commands_stderr_keeps_its_head_and_says_how_much_more(
    engine: Engine, tmp_path: Path
) -> None:
    wf = Workflow("loud")
    wf.task("a")
    wid = engine.push(wf)
    run_agent(engine, {"": exec_handler(writer(tmp_path, 20, 0, code=1))})
    task = engine.status(wid).task("a")
    assert task.state == "failed"
    error = task.error or ""
    dropped = 20 * MB - EXEC_STDERR_KEEP
    assert error.startswith("e" * 1000)
    assert error.endswith(f"... {dropped} more bytes of stderr not kept (the first 64512 are)")
    assert len(error) < 65536
    logged = [line.text for line in read_logs(engine, wid)[0] if line.source == "stderr"]
    assert logged[-1] == error.splitlines()[-1]


def test_output_within_the_limit_is_the_tasks_output(engine: Engine, tmp_path: Path) -> None:
    script = tmp_path / "ok.py"
    script.write_text(
        "import json, sys\n"
        "sys.stdin.read()\n"
        "print('a' * 5000, file=sys.stderr)\n"
        "print(json.dumps({'k': 'v' * 990}))\n"
    )
    wf = Workflow("fits")
    wf.task("a")
    wid = engine.push(wf)
    run_agent(engine, {"": exec_handler(f"{sys.executable} {script}", max_output=1000)})
    assert engine.status(wid).task("a").output == {"k": "v" * 990}


@pytest.mark.skipif(sys.platform != "linux", reason="peak memory of a child: Linux")
def test_the_agents_memory_stays_small_whatever_a_command_writes(
    engine: Engine, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    """``redisflow-agent --exec`` with a command writing 200 MiB of stderr and 50 MiB of
    stdout: the agent's peak resident memory stays far below what it read (it held the
    whole of both before)."""
    wf = Workflow("loud")
    wf.task("a")
    wid = engine.push(wf)
    agent = [str(BIN / "redisflow-agent"), "--exec", writer(tmp_path, 200, 50), "--until-idle"]
    # the peak RSS of the agent (and of its command, a small writer), in KiB
    measure = (
        "import resource, subprocess, sys\n"
        "r = subprocess.run(sys.argv[1:], capture_output=True)\n"
        "assert r.returncode == 0, r.stderr[-2000:]\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", measure, *agent],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    peak_mb = int(done.stdout) / 1024
    assert peak_mb < 150, f"the agent peaked at {peak_mb:.0f} MiB"
    task = engine.status(wid).task("a")
    assert task.state == "failed"
    assert "output passed the 1048576-byte limit (--max-payload)" in (task.error or "")
