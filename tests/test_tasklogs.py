"""Task logs, progress and run-time history: capture per attempt, caps, the budget,
removal with the workflow, reads, the CLI and HTTP."""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import threading
from pathlib import Path

import pytest
from engine_helpers import run_agent, scan_keys

from engine import Engine, Task, TaskFailed, Workflow, exec_handler, tasklogs
from engine.rollups import BOUNDS_MS, bucket_of, history
from engine.tasklogs import read_logs, read_progress

log = logging.getLogger("user.handler")


def chain(*names: str, type: str = "") -> Workflow:
    wf = Workflow("logs")
    prev = None
    for n in names:
        prev = wf.task(n, type=type, after=[prev] if prev else [])
    return wf


def texts(engine: Engine, wid: str, task: str | None = None) -> list[tuple[str, str, str]]:
    lines, _ = read_logs(engine, wid, task)
    return [(x.task, x.source, x.text) for x in lines]


def test_print_logging_and_stderr_are_kept_per_task(engine: Engine) -> None:
    def handle(task: Task) -> int:
        print(f"hello from {task.name}")
        log.warning("careful in %s", task.name)
        sys.stderr.write("partial ")
        sys.stderr.write("line\n")
        return 1

    wid = engine.push(chain("a", "b"))
    run_agent(engine, {"": handle})
    got = texts(engine, wid)
    assert ("a", "stdout", "hello from a") in got
    assert ("a", "log", "WARNING user.handler: careful in a") in got
    assert ("b", "stderr", "partial line") in got
    assert {t for t, _, _ in texts(engine, wid, "b")} == {"b"}


def test_info_records_reach_the_task_log(engine: Engine) -> None:
    wid = engine.push(chain("a"))
    run_agent(engine, {"": lambda t: log.info("rows=%d", 3)})
    assert texts(engine, wid) == [("a", "log", "INFO user.handler: rows=3")]


def test_a_task_that_writes_nothing_costs_no_key(engine: Engine) -> None:
    wid = engine.push(chain("a", "b"))
    run_agent(engine, {"": lambda t: None})
    shard = engine.keys.shard_of(wid)
    assert not engine.redis.exists(shard.task_logs(wid))
    assert not engine.redis.exists(shard.logs_budget)
    assert read_logs(engine, wid) == ([], "-")


def test_concurrent_thread_handlers_keep_their_own_lines(engine: Engine) -> None:
    names = [f"t{k}" for k in range(8)]
    wf = Workflow("wide")
    for n in names:
        wf.task(n)
    wid = engine.push(wf)
    gate = threading.Barrier(4, timeout=10)

    def handle(task: Task) -> None:
        for k in range(20):
            print(f"{task.name} line {k}")
            if k == 5:
                try:
                    gate.wait()  # four handlers interleave their prints here
                except threading.BrokenBarrierError:
                    pass

    run_agent(engine, {"": handle}, concurrency=4)
    lines, _ = read_logs(engine, wid)
    assert len(lines) == 8 * 20
    for x in lines:
        assert x.text.startswith(x.task + " "), x


def test_async_handlers_keep_their_own_lines(engine: Engine) -> None:
    wf = Workflow("async")
    for k in range(6):
        wf.task(f"t{k}")
    wid = engine.push(wf)

    async def handle(task: Task) -> None:
        for k in range(5):
            print(f"{task.name} {k}")
            logging.getLogger("a").warning("%s w%d", task.name, k)
            await asyncio.sleep(0)

    run_agent(engine, {"": handle})
    lines, _ = read_logs(engine, wid)
    assert len(lines) == 6 * 10
    for x in lines:
        assert re.search(rf"\b{x.task}\b", x.text), x


def test_exec_stderr_and_failed_attempts_are_kept_apart(engine: Engine, tmp_path: Path) -> None:
    script = tmp_path / "tool.py"
    script.write_text("import sys\nsys.stderr.write('working\\nalmost\\n')\nprint(2)\n")
    wid = engine.push(chain("x"))
    run_agent(engine, {"": exec_handler(f"{sys.executable} {script}")})
    assert texts(engine, wid) == [("x", "stderr", "working"), ("x", "stderr", "almost")]

    wf = Workflow("retried", retry_backoff=0.001)
    wf.task("flaky", max_attempts=2)
    wid = engine.push(wf)

    def flaky(task: Task) -> None:
        print(f"attempt {task.attempt}")
        if task.attempt == 1:
            raise TaskFailed("first time")

    run_agent(engine, {"": flaky}, idle_check_s=0.05)
    lines, _ = read_logs(engine, wid)
    assert [(x.attempt, x.text) for x in lines] == [(1, "attempt 1"), (2, "attempt 2")]


def test_an_attempt_keeps_its_cap_and_says_so(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tasklogs, "MAX_LINES", 5)
    wid = engine.push(chain("a"))
    run_agent(engine, {"": lambda t: [print(k) for k in range(12)] and None})
    lines, _ = read_logs(engine, wid)
    assert [x.text for x in lines[:5]] == ["0", "1", "2", "3", "4"]
    assert len(lines) == 6 and "7 more line(s) dropped" in lines[5].text


def test_the_budget_refuses_and_removal_gives_it_back(engine: Engine) -> None:
    wid = engine.push(chain("a"))
    run_agent(engine, {"": lambda t: print("x" * 100)}, log_budget=50)
    shard = engine.keys.shard_of(wid)
    assert read_logs(engine, wid)[0] == []
    assert engine.redis.hget(shard.logs_budget, "dropped") == "1"

    wid = engine.push(chain("a"))
    run_agent(engine, {"": lambda t: print("x" * 100)})
    assert engine.store.log_usage()[0] > 100
    wid2 = engine.push(chain("b"))
    run_agent(engine, {"": lambda t: print("y")})
    engine.cleanup(wid)
    engine.cleanup(wid2)
    assert engine.store.log_usage()[0] == 0
    assert not scan_keys(engine.redis, f"*:w:{wid}*") and not scan_keys(
        engine.redis, f"*:w:{wid2}*"
    )


def test_retention_deletes_logs_and_progress(engine: Engine) -> None:
    wf = chain("a")
    wf.ttl = 0.001
    wid = engine.push(wf)

    def handle(task: Task) -> None:
        task.progress(0.5, "half")
        print("bye")

    run_agent(engine, {"": handle})
    engine.maintain()
    assert not scan_keys(engine.redis, f"*:w:{wid}*")


def test_progress_is_kept_and_read(engine: Engine) -> None:
    wid = engine.push(chain("a"))

    def handle(task: Task) -> None:
        for k in range(1, 11):
            task.progress(k / 10, f"rows {k},000/10,000")

    run_agent(engine, {"": handle})
    p = read_progress(engine, wid)
    assert p["0"]["fraction"] == 1.0 and p["0"]["message"] == "rows 10,000/10,000"
    with pytest.raises(ValueError, match="fraction"):
        Task("1", 0, "a", "", None, 1).progress(1.5)


def test_follow_reads_until_the_workflow_ends(engine: Engine) -> None:
    wid = engine.push(chain("a", "b"))
    run_agent(engine, {"": lambda t: print(t.name)})
    assert [x.text for x in tasklogs.follow_logs(engine, wid)] == ["a", "b"]
    lines, cursor = read_logs(engine, wid)
    assert read_logs(engine, wid, after=cursor) == ([], cursor)


def test_unknown_task_or_workflow(engine: Engine) -> None:
    from engine.errors import NotFoundError

    wid = engine.push(chain("a"))
    with pytest.raises(NotFoundError, match="no task 'zz'"):
        read_logs(engine, wid, "zz")
    with pytest.raises(NotFoundError):
        read_logs(engine, "999999")


def test_history_by_type_and_template(engine: Engine) -> None:
    wid = engine.push(chain("a", "b", type="etl"))
    run_agent(engine, {"etl": lambda t: None})
    h = history(engine, "type")
    assert h["hour"]["etl"].succeeded == 2 and h["day"]["etl"].succeeded == 2
    assert sum(h["day"]["etl"].hourly) == 2
    assert h["hour"]["etl"].quantile(0.5) is not None
    assert engine.state(wid).value == "succeeded"


def test_duration_buckets_agree_with_lua() -> None:
    text = (Path(__file__).parent.parent / "engine/store/lua/lib/history.lua").read_text()
    body = text.split("local HIST_MS = {", 1)[1].split("}", 1)[0]
    assert tuple(int(x) for x in re.findall(r"\d+", body)) == BOUNDS_MS
    assert bucket_of(5) == 0 and bucket_of(5.1) == 1 and bucket_of(10**9) == len(BOUNDS_MS)
