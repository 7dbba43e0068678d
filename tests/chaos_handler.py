"""The handler chaos agents run (``--handler chaos_handler:run``): it logs every run.

The payload says how the task behaves: ``w`` the workflow's unique tag, ``f`` how many
first attempts fail (-1: every attempt), ``s`` milliseconds of work. Each run appends a
start line (with the parents' outputs it was given) and an end line to the agent
process's own log, so a test can check ordering and fencing afterwards.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from engine import Task

_fd: int | None = None


def _log(kind: str, me: str, task: Task, extra: Any) -> None:
    global _fd
    if _fd is None:
        path = os.path.join(os.environ["RF_CHAOS_LOG"], f"{me}-{os.getpid()}.log")
        _fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    w = task.payload["w"]
    line = f"{kind} {time.time():.6f} {me} {w} {task.name} {task.attempt} {json.dumps(extra)}\n"
    os.write(_fd, line.encode())  # one write per line: whole lines, even across threads


def run(task: Task) -> dict[str, Any]:
    """Log the start, work, fail the first ``f`` attempts, log the end."""
    me = os.environ["RF_CHAOS_ME"]
    saw = {p: None if out is None else [out["by"], out["a"]] for p, out in task.parents.items()}
    _log("S", me, task, saw)
    time.sleep(task.payload["s"] / 1000)
    fails = task.payload["f"]
    if fails < 0 or task.attempt <= fails:
        _log("F", me, task, None)
        raise RuntimeError(f"chaos: attempt {task.attempt} fails on purpose")
    _log("E", me, task, None)
    return {"by": me, "a": task.attempt, "saw": saw}
