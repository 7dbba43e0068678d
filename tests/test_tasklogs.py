"""Task logs, progress and run-time history: capture per attempt, caps, the budget,
removal with the workflow, reads, the CLI and HTTP."""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from engine_helpers import Hand, promtool, run_agent, scan_keys
from own_server import admin, server  # noqa: F401 - fixtures, named in signatures
from test_http_server import Client, client  # noqa: F401 - the fixture

from engine import Engine, Task, TaskFailed, Workflow, exec_handler
from engine.runtime import tasklogs
from engine.runtime.rollups import BOUNDS_MS, Rollups, bucket_of, history
from engine.runtime.tasklogs import read_logs, read_progress

log = logging.getLogger("user.handler")


@pytest.fixture()
def api(client: Client) -> httpx.Client:  # noqa: F811
    return client()


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


def test_a_line_without_an_end_is_held_cut(engine: Engine) -> None:
    """A handler writing megabytes with no newline grows the agent by a line's cap only,
    and the line is kept cut, as every long line is."""
    held: list[int] = []

    def handle(task: Task) -> None:
        for _ in range(2000):
            sys.stdout.write("x" * 1000)  # 2 MB, never a newline
            capture = tasklogs.current()
            assert capture is not None
            held.append(max(len(p) for p in capture._partial.values()))

    wid = engine.push(chain("a"))
    run_agent(engine, {"": handle})
    assert held and max(held) <= tasklogs.MAX_LINE + 1
    lines, _ = read_logs(engine, wid)
    assert [(x.source, x.text) for x in lines] == [("stdout", "x" * tasklogs.MAX_LINE)]


def test_the_budget_refuses_and_removal_gives_it_back(engine: Engine) -> None:
    wid = engine.push(chain("a"))
    run_agent(engine, {"": lambda t: print("x" * 100)}, log_budget=50)
    shard = engine.keys.shard_of(wid)
    assert read_logs(engine, wid)[0] == []
    assert engine.redis.hget(shard.logs_budget, "dropped") == "1"

    wid = engine.push(chain("a"))
    run_agent(engine, {"": lambda t: print("x" * 100)})
    assert engine.store.logs.log_usage()[0] > 100
    wid2 = engine.push(chain("b"))
    run_agent(engine, {"": lambda t: print("y")})
    engine.cleanup(wid)
    engine.cleanup(wid2)
    assert engine.store.logs.log_usage()[0] == 0
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


# -- the CLI --------------------------------------------------------------------------


def test_cli_logs_and_stats_by(engine: Engine, cli_env: dict[str, str]) -> None:
    import json

    from engine_helpers import cli

    wid = engine.push(chain("extract", "load", type="etl"))
    run_agent(engine, {"etl": lambda t: print(f"{t.name} done")})
    r = cli("logs", wid, env=cli_env)
    assert r.returncode == 0, r.stderr
    assert "extract#1 extract done" in r.stdout and "load#1 load done" in r.stdout
    r = cli("logs", wid, "--task", "load", "--json", env=cli_env)
    got = json.loads(r.stdout)
    assert [x["text"] for x in got["lines"]] == ["load done"] and got["cursor"]
    r = cli("logs", wid, "--follow", env=cli_env)  # finished: prints all, then ends
    assert r.returncode == 0 and r.stdout.count(" done") == 2
    r = cli("logs", wid, "--task", "nope", env=cli_env)
    assert r.returncode != 0 and "no task 'nope'" in r.stderr and "Traceback" not in r.stderr
    r = cli("stats", "--by", "type", "--json", env=cli_env)
    stats = json.loads(r.stdout)
    assert [(s["name"], s["succeeded"]) for s in stats["hour"]] == [("etl", 2)]
    r = cli("stats", "--by", "type", env=cli_env)
    assert r.returncode == 0 and "etl" in r.stdout
    r = cli("stats", "--by", "nothing", env=cli_env)
    assert r.returncode == 2


def test_a_running_task_is_followed_live(engine: Engine, cli_env: dict[str, str]) -> None:
    import json

    from engine_helpers import agent_thread, cli, wait_for

    wid = engine.push(chain("slow"))
    release = threading.Event()

    def handle(task: Task) -> None:
        print("started")
        task.progress(0.4, "rows 4,000/10,000")
        release.wait(30)
        print("finished")

    with agent_thread(engine, {"": handle}):
        # the agent's own thread sends a running task's lines and progress
        wait_for(lambda: read_progress(engine, wid), what="progress")
        wait_for(lambda: read_logs(engine, wid)[0], what="the first line")
        r = cli("status", wid, env=cli_env)
        assert "40% rows 4,000/10,000" in r.stdout, r.stdout
        r = cli("status", wid, "--json", env=cli_env)
        assert json.loads(r.stdout)["progress"]["0"]["fraction"] == 0.4
        follower = tasklogs.follow_logs(engine, wid, poll_s=0.05)
        assert next(follower).text == "started"
        release.set()
        assert [x.text for x in follower] == ["finished"]
    lines, _ = read_logs(engine, wid)
    assert [x.text for x in lines] == ["started", "finished"]


# -- HTTP -----------------------------------------------------------------------------


def test_http_task_logs(engine: Engine, api: httpx.Client) -> None:
    wid = engine.push(chain("fetch", "total"))
    run_agent(engine, {"": lambda t: print(f"{t.name} ok")})
    r = api.get(f"/v1/workflows/{wid}/tasks/total/logs")
    assert r.status_code == 200, r.text
    body = r.json()
    assert [(x["task"], x["text"]) for x in body["lines"]] == [("total", "total ok")]
    again = api.get(f"/v1/workflows/{wid}/tasks/total/logs", params={"after": body["cursor"]})
    assert again.json()["lines"] == []
    # finished: a wait answers at once
    assert api.get(f"/v1/workflows/{wid}/tasks/fetch/logs?wait=5").json()["lines"]
    assert api.get(f"/v1/workflows/{wid}/tasks/nope/logs").status_code == 404
    assert api.get("/v1/workflows/99999/tasks/a/logs").status_code == 404
    for bad in ("after=x", "limit=0", "wait=31", "limit=１"):
        assert api.get(f"/v1/workflows/{wid}/tasks/fetch/logs?{bad}").status_code == 400, bad


def test_a_logs_wait_is_cut_to_the_servers_max_wait(engine: Engine) -> None:
    """``?wait=30`` on a server started with a shorter --max-wait waits that long, as every
    other ``?wait=`` does (a client whose timeout is under 30 s still gets its answer)."""
    from test_http_server import serving

    from engine.http import HttpConfig, create_app

    wid = engine.push(chain("fetch"))  # no agent: it runs on, with no line yet
    with (
        serving(create_app(engine, HttpConfig(max_wait_s=0.2))) as base,
        httpx.Client(base_url=base, timeout=10) as http,
    ):
        r = http.get(f"/v1/workflows/{wid}/tasks/fetch/logs?wait=30")
    assert r.status_code == 200 and r.json()["lines"] == []


def test_metrics_have_run_time_histograms(engine: Engine, api: httpx.Client) -> None:
    import subprocess

    from prometheus_client.parser import text_string_to_metric_families

    flow = {"name": "nightly", "tasks": [{"name": "a", "type": "etl"},
            {"name": "b", "type": "etl", "after": ["a"]}]}  # fmt: skip
    assert api.put("/v1/templates/nightly", json=flow).status_code == 201
    for _ in range(2):
        assert api.post("/v1/templates/nightly/runs", json={}).status_code == 202
    run_agent(engine, {"etl": lambda t: None})
    text = api.get("/metrics").text
    m = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }
    assert m[("redisflow_task_duration_seconds_count", (("type", "etl"),))] == 4
    assert m[("redisflow_task_duration_seconds_bucket", (("le", "+Inf"), ("type", "etl")))] == 4
    assert m[("redisflow_queue_wait_seconds_count", (("type", "etl"),))] == 4
    assert m[("redisflow_template_run_duration_seconds_count", (("template", "nightly"),))] == 2
    runs = "redisflow_template_runs_total"
    assert m[(runs, (("outcome", "succeeded"), ("template", "nightly")))] == 2
    assert m[(runs, (("outcome", "failed"), ("template", "nightly")))] == 0
    h = history(engine, "template")
    assert h["hour"]["nightly"].succeeded == 2
    checked = subprocess.run(
        [promtool(), "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_agent_cli_log_budget_and_exec_stderr(
    engine: Engine, cli_env: dict[str, str], tmp_path: Path
) -> None:
    from engine_helpers import cli

    r = cli("--log-budget-mb", "-1", "--exec", "true", tool="redisflow-agent", env=cli_env)
    assert (
        r.returncode == 2
        and "--log-budget-mb: not a size in MiB (0 to 1,048,576): '-1'" in r.stderr
    )
    script = tmp_path / "tool.sh"
    script.write_text("#!/bin/sh\necho 'from the tool' >&2\necho 7\n")
    script.chmod(0o755)
    wid = engine.push(chain("t"))
    r = cli("--exec", str(script), "--until-idle", "--log-budget-mb", "1",
            tool="redisflow-agent", env=cli_env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert texts(engine, wid) == [("t", "stderr", "from the tool")]
    assert engine.status(wid).tasks[0].output == 7


def test_an_agent_killed_mid_task_keeps_its_attempts_apart(
    engine: Engine, cli_env: dict[str, str], tmp_path: Path
) -> None:
    import os
    import signal

    from engine_helpers import spawn_agent, wait_for

    (tmp_path / "stuck.py").write_text(
        "import time\n"
        "def run(task):\n"
        "    print(f'attempt {task.attempt} started')\n"
        "    while True:\n"
        "        time.sleep(0.05)\n"
    )
    wid = engine.push(chain("job"))
    proc = spawn_agent("--id", "doomed", "--handler", "stuck:run", "--lease", "3",
                       env=cli_env, cwd=tmp_path, log=tmp_path / "agent.log")  # fmt: skip
    try:
        # its running task's first line was sent live: then the agent dies, unannounced
        wait_for(lambda: read_logs(engine, wid)[0], what="the first attempt's line")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def second(task: Task) -> None:
        print(f"attempt {task.attempt} started")
        log.warning("attempt %d done", task.attempt)

    run_agent(engine, {"": second}, maintain_s=0.2)  # its housekeeping hands the task on
    lines, _ = read_logs(engine, wid)
    assert [(x.attempt, x.text) for x in lines] == [
        (1, "attempt 1 started"),
        (2, "attempt 2 started"),
        (2, "WARNING user.handler: attempt 2 done"),
    ]
    assert engine.status(wid).tasks[0].attempts == 2


def test_logs_and_history_over_several_shards(redis_url: str) -> None:
    with Engine.connect(redis_url, shards=3) as engine:
        wids = [engine.push(chain("a", "b", type="etl")) for _ in range(6)]
        assert len({engine.keys.shard_of(w).shard for w in wids}) == 3
        run_agent(engine, {"etl": lambda t: print(f"{t.workflow_id}/{t.name}")}, concurrency=3)
        for w in wids:
            assert [x.text for x in read_logs(engine, w)[0]] == [f"{w}/a", f"{w}/b"]
        assert history(engine, "type")["hour"]["etl"].succeeded == 12
        kept = engine.store.logs.log_usage()[0]
        engine.cleanup(wids[0])
        assert 0 < engine.store.logs.log_usage()[0] < kept


def test_least_privilege_roles_write_and_read_logs_and_history(admin: Any) -> None:  # noqa: F811
    from test_least_privilege import make_user

    with Engine.connect(make_user(admin, "operator")) as operator:
        operator.put_template('{"name": "t", "tasks": [{"name": "a", "type": "etl"}]}')
        wid = operator.run("t").id
    with Engine.connect(make_user(admin, "agent")) as agent_engine:

        def handle(task: Task) -> None:
            task.progress(1.0, "all")
            print("hello")

        agent = run_agent(agent_engine, {"etl": handle})
        assert agent.processed == 1
    with Engine.connect(make_user(admin, "reader")) as reader:
        assert [x.text for x in read_logs(reader, wid)[0]] == ["hello"]
        assert [x.text for x in tasklogs.follow_logs(reader, wid)] == ["hello"]
        assert read_progress(reader, wid)["0"]["message"] == "all"
        assert history(reader, "type")["hour"]["etl"].succeeded == 1
        assert history(reader, "template")["hour"]["t"].succeeded == 1
        assert reader.store.logs.log_usage()[0] > 0
        assert reader.store.logs.history_totals()["y|etl|ok"] == 1
    with Engine.connect(make_user(admin, "operator")) as operator:
        operator.cleanup(wid)
        assert operator.store.logs.log_usage()[0] == 0


def test_http_long_poll_follows_a_running_task(engine: Engine, api: httpx.Client) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from engine_helpers import agent_thread, wait_for

    wid = engine.push(chain("slow"))
    release = threading.Event()

    def handle(task: Task) -> None:
        print("first")
        release.wait(30)
        print("second")

    url = f"/v1/workflows/{wid}/tasks/slow/logs"
    with agent_thread(engine, {"": handle}), ThreadPoolExecutor(1) as pool:
        first = wait_for(lambda: api.get(url).json()["lines"], what="the first line")
        cursor = api.get(url).json()["cursor"]
        waiting = pool.submit(api.get, url, params={"after": cursor, "wait": 30}, timeout=40)
        release.set()
        got = waiting.result().json()
    assert [x["text"] for x in first] == ["first"]
    assert [x["text"] for x in got["lines"]] == ["second"]


def test_the_process_logging_and_streams_are_given_back(engine: Engine) -> None:
    root = logging.getLogger()
    level, handlers, out, err = root.level, list(root.handlers), sys.stdout, sys.stderr
    root.setLevel(logging.WARNING)
    try:
        engine.push(chain("a"))
        run_agent(engine, {"": lambda t: None})
        assert (root.level, root.handlers) == (logging.WARNING, handlers)
        assert (sys.stdout, sys.stderr) == (out, err)
    finally:
        root.setLevel(level)


def test_queue_waits_come_with_the_claim_and_go_to_the_history(engine: Engine) -> None:
    """A claim row says how long its task waited ready (from Redis's clock): at least
    the time the test let pass; the history counts it per type, in log-spaced buckets."""
    wf = Workflow("waited")
    wf.task("a", type="etl")
    engine.push(wf)
    time.sleep(0.06)  # a lower bound only: the wait is at least this long
    [task] = Hand(engine, "h").claim("etl")
    assert task._waited_ms >= 60
    r = Rollups()
    r.add("etl", True, 0.002, now=120.0, waited_ms=task._waited_ms)
    r.add("etl", False, 0.002, now=120.0, waited_ms=3)
    fields = r.take(force=True)[2]
    assert fields["q|etl|ok"] == 2 and fields["q|etl|ms"] == task._waited_ms + 3
    assert fields["q|etl|b0"] == 1  # 3 ms: the first bucket (up to 5 ms)
    assert sum(v for f, v in fields.items() if f.startswith("q|etl|b")) == 2
    assert fields["y|etl|ok"] == 1 and fields["y|etl|bad"] == 1
