"""What ships for operators' own tools: the Grafana dashboard and the Prometheus alert
rules under deploy/ (every metric they name is one a real /metrics scrape exports;
promtool checks the rules, fires each alert from series, and lints a scrape), the
gauges added for them, and ``redisflow-agent --log-format json``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from engine_helpers import ROOT, agent_thread, cli, promtool, run_agent, wait_for
from prometheus_client.parser import text_string_to_metric_families
from test_http_server import Client, client  # noqa: F401 - the fixture

from engine import Engine, Task, Workflow
from engine.store.layout import is_cluster

DASHBOARD = ROOT / "deploy" / "grafana" / "redisflow.json"
RULES = ROOT / "deploy" / "prometheus" / "redisflow-alerts.yml"
RULES_TEST = ROOT / "tests" / "prometheus" / "alerts.test.yml"
METRIC = re.compile(r"\bredisflow_[a-z0-9_]+\b")
# what a family of each type exposes as samples (prometheus_client's text format types a
# counter by its sample's name, `_total` included)
SUFFIXES = {"gauge": ("",), "counter": ("",), "histogram": ("_bucket", "_sum", "_count")}


def run_promtool(*args: str, stdin: str | None = None, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [promtool(), *args], input=stdin, capture_output=True, text=True, cwd=cwd, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _exported(text: str) -> set[str]:
    """Every sample name a scrape's families expose, from its ``# TYPE`` lines (a family
    with no series yet is typed all the same)."""
    names: set[str] = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M):
        names.update(name + suffix for suffix in SUFFIXES[kind])
    return names


def _dashboard_exprs() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in board["panels"] for t in p.get("targets", [])]


@pytest.fixture()
def api(client: Client) -> httpx.Client:  # noqa: F811
    """An open server (no tokens) on the test's Redis."""
    return client()


# -- the files that ship -----------------------------------------------------------------


@pytest.mark.same_on_cluster
def test_dashboard_and_rules_name_only_metrics_the_server_exports(api: httpx.Client) -> None:
    scraped = api.get("/metrics")
    assert scraped.status_code == 200
    exported = _exported(scraped.text)
    # the whole files: queries, variables, descriptions and annotations alike
    for path in (DASHBOARD, RULES):
        named = set(METRIC.findall(path.read_text()))
        assert named, path
        unknown = sorted(named - exported)
        assert not unknown, f"{path.name} names metrics /metrics does not export: {unknown}"
    # every panel that plots has a query, on the dashboard's data source variable
    board = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        if panel["type"] != "row":
            assert panel["targets"], panel["title"]
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]


def test_the_dashboards_queries_parse(tmp_path: Path) -> None:
    """Each query as a recording rule (Grafana's variables given values), for promtool."""
    values = {"$__rate_interval": "5m", "$job": ".*", "$type": ".*", "$template": ".*"}
    rules = []
    for n, expr in enumerate(_dashboard_exprs()):
        for var, value in values.items():
            expr = expr.replace(var, value)
        assert "$" not in expr, expr
        rules.append({"record": f"dashboard:query_{n}", "expr": expr})
    path = tmp_path / "dashboard.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    assert "SUCCESS" in run_promtool("check", "rules", str(path))


def test_promtool_checks_the_alert_rules() -> None:
    out = run_promtool("check", "rules", str(RULES))
    assert re.search(r"SUCCESS: \d+ rules found", out), out


def test_each_alert_fires_from_series(tmp_path: Path) -> None:
    """promtool's unit tests (tests/prometheus/alerts.test.yml), on a copy of the rules
    without annotations (promtool compares them verbatim); every alert is tested."""
    doc = yaml.safe_load(RULES.read_text())
    alerts = set()
    for group in doc["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
            alerts.add(rule["alert"])
    (tmp_path / RULES.name).write_text(yaml.safe_dump(doc))
    shutil.copy(RULES_TEST, tmp_path / RULES_TEST.name)
    tests = yaml.safe_load(RULES_TEST.read_text())["tests"]
    fired = {
        t["alertname"] for case in tests for t in case["alert_rule_test"] if t.get("exp_alerts")
    }
    assert fired == alerts, f"alerts no series fires: {sorted(alerts - fired)}"
    assert "SUCCESS" in run_promtool("test", "rules", RULES_TEST.name, cwd=tmp_path)


# -- the gauges added for them -----------------------------------------------------------


def _flaky(task: Task) -> None:
    if task.name == "b":
        raise RuntimeError("out of luck")


def test_agents_load_attempts_deadlines_and_memory(engine: Engine, api: httpx.Client) -> None:
    nightly = Workflow("nightly")
    nightly.task("a", type="etl")
    nightly.task("b", type="etl")
    engine.push(nightly)
    run_agent(engine, {"etl": _flaky})

    # a live agent holding a task of its type; a ready task of a type no agent serves
    release = threading.Event()
    held = Workflow("held")
    held.task("long", type="etl")
    lonely = Workflow("lonely", deadline=3600)
    lonely.task("waits", type="lonely")
    try:
        with agent_thread(engine, {"etl": lambda t: release.wait(30)}, agent_id="busy"):
            engine.push(held)
            late = engine.push(lonely)
            wait_for(lambda: engine.gauges().stats.tasks.get("running", 0) == 1)
            m = _samples(api.get("/metrics").text)
            assert m[("redisflow_agents_serving", (("type", "etl"),))] == 1
            assert m[("redisflow_agents_serving", (("type", "lonely"),))] == 0
            assert m[("redisflow_agent_running_tasks", (("agent", "busy"),))] == 1
            assert m[("redisflow_agent_concurrency", (("agent", "busy"),))] == 1
            assert m[("redisflow_workflows_past_deadline", ())] == 0
            release.set()
    finally:
        release.set()

    attempts = "redisflow_task_attempts_total"
    m = _samples(api.get("/metrics").text)
    assert m[(attempts, (("outcome", "succeeded"), ("type", "etl")))] == 2
    assert m[(attempts, (("outcome", "failed"), ("type", "etl")))] == 1
    assert ("redisflow_agent_running_tasks", (("agent", "busy"),)) not in m  # stopped
    assert m[("redisflow_agents_serving", (("type", "lonely"),))] == 0

    # the run's deadline moved two minutes into the past; no agent runs housekeeping
    shard = engine.keys.shard_of(late)
    sec, _ = engine.redis.time()
    engine.redis.zadd(shard.deadlines, {late: (int(sec) - 120) * 1000})
    text = api.get("/metrics").text
    m = _samples(text)
    assert m[("redisflow_workflows_past_deadline", ())] == 1
    assert 120 <= m[("redisflow_deadline_lag_seconds", ())] < 180

    used = {k[1]: v for k, v in m.items() if k[0] == "redisflow_redis_memory_used_bytes"}
    limits = {k[1]: v for k, v in m.items() if k[0] == "redisflow_redis_memory_max_bytes"}
    assert used and set(used) == set(limits)
    assert all(v > 0 for v in used.values())
    if not is_cluster(engine.redis):
        [(node, limit)] = limits.items()
        assert node[0][1].endswith(f":{engine.redis.connection_pool.connection_kwargs['port']}")
        assert limit == int(engine.redis.config_get("maxmemory")["maxmemory"])

    # promtool's lint of a scrape where every family has series
    run_promtool("check", "metrics", stdin=text)


# -- redisflow-agent --log-format json ---------------------------------------------------

HANDLER = """
import logging

def work(task):
    logging.getLogger("shop").warning("charging %s", task.payload)
    return task.payload
"""


def test_agent_json_log_lines(engine: Engine, cli_env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "json_log_handler.py").write_text(HANDLER)
    wf = Workflow("orders")
    wf.task("charge", payload="order-7", type="pay")
    wid = engine.push(wf)
    env = {**cli_env, "PYTHONPATH": str(tmp_path)}
    done = cli(
        "--handler", "json_log_handler:work", "--type", "pay", "--until-idle", "-v",
        "--log-format", "json", tool="redisflow-agent", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines: list[dict[str, Any]] = [json.loads(line) for line in done.stderr.splitlines()]
    for line in lines:  # every line is one object with the four fields
        assert {"time", "level", "logger", "message"} <= set(line), line
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["time"])
    [charged] = [line for line in lines if line["logger"] == "shop"]
    assert charged["message"] == "charging order-7"
    assert charged["level"] == "WARNING"
    assert (charged["workflow_id"], charged["task"], charged["key"]) == (wid, "charge", "0")
    assert (charged["type"], charged["attempt"]) == ("pay", 1)
    # a record outside a task says none
    last = lines[-1]
    assert last["logger"] == "redisflow.agent" and " done, 0 rejected" in last["message"]
    assert "workflow_id" not in last
    assert engine.status(wid).state == "succeeded"
