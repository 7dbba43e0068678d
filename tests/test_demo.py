"""redisflow-demo runs end to end through its console script; figures are never asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from engine_helpers import scan_keys

from engine import Engine
from engine.connect.urls import open_client

FIELDS = {
    "shape",
    "workflows",
    "tasks",
    "agents",
    "push_s",
    "run_s",
    "total_s",
    "workflows_pushed_per_s",
    "tasks_per_s",
    "redis_peak_mb",
    "bytes_per_task",
    "latency_p50_ms",
    "latency_p99_ms",
    "ok",
}


def run_demo(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "REDISFLOW_URL"}
    return subprocess.run(
        [sys.executable, "-m", "demos.demo_main", "--url", url, "--json", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("shape", "workflows", "agents", "extra"),
    [
        ("fan10", 300, 2, []),
        ("chain9", 200, 1, ["--phases", "split"]),
        ("random", 100, 2, ["--seed", "3"]),
    ],
)
def test_demo_json(redis_url: str, shape: str, workflows: int, agents: int, extra: list[str]):
    proc = run_demo(
        redis_url, "--shape", shape, "--workflows", str(workflows), "--agents", str(agents), *extra
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1
    out = json.loads(lines[0])
    assert FIELDS <= out.keys()
    assert out["ok"] is True, out["problems"]
    assert out["shape"] == shape
    assert out["workflows"] == workflows
    assert out["agents"] == agents
    assert out["succeeded"] == out["tasks"] > 0
    assert out["latency_p50_ms"] is not None


@pytest.mark.slow
def test_demo_failures_are_counted(redis_url: str) -> None:
    proc = run_demo(redis_url, "--workflows", "100", "--agents", "1", "--fail-rate", "0.2")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["ok"] is True, out["problems"]
    assert out["failed"] > 0
    assert out["upstream_failed"] > 0  # the descendants of failures
    ended = out["succeeded"] + out["failed"] + out["upstream_failed"] + out["skipped"]
    assert ended == out["tasks"]


def test_demo_refuses_a_namespace_in_use(redis_url: str) -> None:
    with Engine.connect(redis_url) as engine:  # the layout the demo will use
        stats = engine.keys.shard(0).stats
    client = open_client(redis_url)
    client.hset(stats, "w:pushed", 1)
    proc = run_demo(redis_url, "--workflows", "10")
    assert proc.returncode == 2
    assert "already holds data" in proc.stderr
    assert client.hget(stats, "w:pushed") == b"1"  # nothing flushed


def test_demo_map_shape(redis_url: str) -> None:
    """`redisflow-demo --shape map`: one workflow whose items all run, the ready queue never
    above the window (no timing asserted)."""
    proc = subprocess.run(
        [sys.executable, "-m", "demos.demo_main", "--url", redis_url, "--json", "--shape", "map",
         "--items", "3000", "--window", "100", "--agents", "1", "--element-bytes", "100"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["state"] == "succeeded" and out["gathered"] == {"items": 3000}
    assert out["max_ready"] <= 100 and out["element_bytes"] == 100


@pytest.mark.slow
@pytest.mark.same_on_cluster
@pytest.mark.parametrize(
    "extra",
    [
        ["--distinct"],
        ["--distinct", "--input-bytes", "500"],
        ["--distinct", "payloads", "--task-io"],
        ["--task-io", "--concurrency", "4"],
        ["--task-io", "--async", "--concurrency", "8"],
        ["--async", "--shape", "diamond4", "--fail-rate", "0.1"],
    ],
)
def test_demo_realistic_work(redis_url: str, extra: list[str]) -> None:
    """Distinct inputs or payloads, a Redis round trip per task, async handlers."""
    proc = run_demo(redis_url, "--workflows", "60", "--agents", "2", *extra)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["ok"] is True, out["problems"]
    assert out["distinct"] == (
        "payloads" if "payloads" in extra else "input" if "--distinct" in extra else ""
    )
    assert out["task_io"] is ("--task-io" in extra)
    assert out["async_handlers"] is ("--async" in extra)
    if "--task-io" in extra:
        io = scan_keys(open_client(redis_url), match="rf:io:*")
        assert io  # the handlers' own keys, one per agent
    if "--fail-rate" not in extra:
        assert out["succeeded"] == out["tasks"]
    if "--input-bytes" in extra:
        assert out["input_bytes"] == 500
    elif extra == ["--distinct"]:
        assert out["input_bytes"] == 105


def test_demo_distinct_inputs_reach_the_handlers(redis_url: str) -> None:
    from demos.bench import shape_factory, workflow_input
    from engine import Engine

    make = shape_factory("diamond4", distinct="payloads")
    one, two = make(1), make(2)
    assert [t.payload for t in one.tasks] != [t.payload for t in two.tasks]
    assert len(json.dumps(workflow_input(12345))) >= 90
    for size in (300, 2000):  # --input-bytes: about that many bytes, each its own
        assert len(json.dumps(workflow_input(7, size), separators=(",", ":"))) == size
        assert workflow_input(7, size) != workflow_input(8, size)
    engine = Engine.connect(redis_url)
    try:
        wid = engine.push_many([make(3)], inputs=[workflow_input(3)])[0]
        assert engine.status(wid).input == workflow_input(3)
    finally:
        engine.close()


@pytest.mark.slow
def test_demo_handler_latency_at_a_rate(redis_url: str) -> None:
    proc = run_demo(
        redis_url, "--workflows", "20", "--rate", "40", "--handler-latency",
        "--latency-sample", "10",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["ok"] is True, out["problems"]
    assert out["rate"] == 40
    assert out["push_s"] >= 0.4  # 20 workflows at 40 a second
    sampled = out["handler_sampled_tasks"]  # about every second workflow's 10 tasks
    assert 0 < sampled < 200 and sampled % 10 == 0
    for name in ("dispatch_p50_ms", "dispatch_p99_ms", "step_p50_ms", "step_p99_ms"):
        assert out[name] is not None and out[name] >= 0, name


def test_demo_handler_latency_needs_plain_handlers(redis_url: str) -> None:
    proc = run_demo(redis_url, "--workflows", "10", "--handler-latency", "--async")
    assert proc.returncode == 2
    assert "plain handlers" in proc.stderr
