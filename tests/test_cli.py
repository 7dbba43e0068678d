"""The console scripts, run as processes: bad input, exit codes, --json, the demos."""

from __future__ import annotations

import json
import os
import re
import socket
import sys
from pathlib import Path

import pytest
from engine_helpers import ROOT, cli, one_line_error, snapshot, spawn_agent, stop_process

from engine import Engine, Workflow
from engine.connect.embedded import free_port

DEMOS = ROOT / "demos"

BAD_FILES: dict[str, tuple[str, str, str]] = {
    # case: (file name, content, pattern the one-line message must match)
    "cycle": (
        "cycle.yaml",
        "name: loop\ntasks:\n  - {name: a, after: [c]}\n  - {name: b, after: [a]}\n"
        "  - {name: c, after: [b]}\n",
        r"cycle.yaml:1: workflow 'loop' has a cycle: (a -> b -> c -> a|b -> c -> a -> b|"
        r"c -> a -> b -> c)$",
    ),
    "unknown parent": (
        "unknown.yaml",
        "name: w\ntasks:\n  - name: a\n  - name: b\n    after: [ghost]\n",
        r"unknown.yaml:4: task 'b' depends on unknown task 'ghost'$",
    ),
    "task list edges disagree": (
        "tasks.yaml",
        "Name: w\nTasks:\n  - Name: a\n    Children: [b]\n  - Name: b\n    Parents: []\n",
        r"tasks.yaml:3: task 'a' lists 'b' as a child, but 'b' does not list 'a' "
        r"among its Parents$",
    ),
    "duplicate names": (
        "dup.yaml",
        "name: w\ntasks:\n  - name: a\n  - name: b\n  - name: a\n",
        r"dup.yaml:5: duplicate task name 'a' \(first defined at \S*dup.yaml:3\)$",
    ),
    "empty workflow": (
        "empty.yaml",
        "name: w\ntasks: []\n",
        r"empty.yaml:1: workflow 'w' has no tasks$",
    ),
    "malformed YAML": (
        "broken.yaml",
        "name: w\ntasks:\n  - name: a\n    after: [x\n  - name: b\n",
        r"broken.yaml:\d+:\d+: invalid YAML: ",
    ),
    "malformed JSON": (
        "broken.json",
        '{\n  "name": "w",\n  "tasks": [\n    {"name": "a",}\n  ]\n}\n',
        r"broken.json:4:\d+: invalid JSON: ",
    ),
    "payload over the limit": (
        "big.yaml",
        "name: w\ntasks:\n  - name: a\n    payload: 0123456789abcdef\n",
        r"big.yaml:3: task 'a': payload is 18 bytes, over the 16-byte limit$",
    ),
}


def seed_keyspace(engine: Engine) -> None:
    """Something to compare against: bad input must leave it exactly as it is."""
    wf = Workflow("existing")
    wf.task("a", payload={"k": 1})
    wf.task("b", after=["a"])
    engine.push(wf)


@pytest.mark.same_on_cluster
@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_files_exit_2_with_one_line_and_write_nothing(
    case: str, engine: Engine, cli_env: dict[str, str], tmp_path: Path
) -> None:
    name, content, pattern = BAD_FILES[case]
    path = tmp_path / name
    path.write_text(content)
    seed_keyspace(engine)
    before = snapshot(engine.redis)
    result = cli("push", str(path), "--max-payload", "16", env=cli_env)
    assert result.returncode == 2, result.stderr
    err = one_line_error(result)
    assert re.search(pattern, err), err
    assert result.stdout == ""
    assert snapshot(engine.redis) == before


@pytest.mark.same_on_cluster
def test_a_bad_file_among_good_ones_pushes_none(
    engine: Engine, cli_env: dict[str, str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: w\ntasks:\n  - {name: a, after: [a]}\n")
    before = snapshot(engine.redis)
    result = cli("push", str(DEMOS / "task-list-sample.yaml"), str(bad), env=cli_env)
    assert result.returncode == 2
    assert "depends on itself" in one_line_error(result)
    assert snapshot(engine.redis) == before


@pytest.mark.same_on_cluster
def test_missing_file(engine: Engine, cli_env: dict[str, str], tmp_path: Path) -> None:
    seed_keyspace(engine)
    before = snapshot(engine.redis)
    result = cli("push", str(tmp_path / "nope.yaml"), env=cli_env)
    assert result.returncode == 2
    assert one_line_error(result) == f"redisflow: {tmp_path / 'nope.yaml'}: no such file"
    assert snapshot(engine.redis) == before


@pytest.mark.same_on_cluster
@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["status"], r"the following arguments are required: WID\|key:KEY"),
        (["list", "--state", "bogus"], r"invalid choice: 'bogus'"),
        (["list", "--limit", "0"], r"--limit: must be at least 1, not 0"),
        (["cleanup", "--finished", "--older-than", "soon"], r"not a duration: 'soon'"),
        (["cleanup"], r"cleanup needs a workflow id or --finished"),
        (["status", "999"], r"workflow 999 does not exist"),
        (["pause", "999"], r"workflow 999 does not exist"),
        (["frobnicate"], r"invalid choice: 'frobnicate'"),
        (["stats", "--url", "notaurl"], r"invalid Redis URL: expected redis://"),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    args: list[str], pattern: str, cli_env: dict[str, str]
) -> None:
    result = cli(*args, env=cli_env)
    assert result.returncode == 2
    assert re.search(pattern, one_line_error(result))


def test_wrong_state_operations_exit_2(engine: Engine, cli_env: dict[str, str]) -> None:
    wf = Workflow("w")
    wf.task("a")
    wid = engine.push(wf)
    for args, pattern in (
        (["release", wid], r"only a paused or scheduled workflow can be released"),
        (["retry", wid], r"only a failed workflow can be retried"),
        (["retry", wid, "--task", "a"], r"only a failed task can be retried"),
        (["retry", wid, "--task", "zz"], r"has no task 'zz' \(its tasks: a\)"),
        (["cleanup", wid], r"only a finished workflow can be cleaned up"),
    ):
        before = snapshot(engine.redis)
        result = cli(*args, env=cli_env)
        assert result.returncode == 2, args
        assert re.search(pattern, one_line_error(result)), args
        assert snapshot(engine.redis) == before
    assert cli("cancel", wid, env=cli_env).returncode == 0
    result = cli("pause", wid, env=cli_env)
    assert result.returncode == 2
    assert f"workflow {wid} is cancelled" in one_line_error(result)


def closed_port() -> int:
    port = free_port()
    with socket.socket() as s:  # nothing listens there: connecting is refused
        assert s.connect_ex(("127.0.0.1", port)) != 0
    return port


@pytest.mark.parametrize(
    "args",
    [
        ["stats"],
        ["list", "--json"],
        ["status", "1"],
        ["push", str(DEMOS / "task-list-sample.yaml")],
        ["cancel", "1"],
    ],
)
def test_unreachable_redis_exits_3(args: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "REDISFLOW_URL"}
    url = f"redis://127.0.0.1:{closed_port()}/0"
    result = cli(*args, "--url", url, env=env)
    assert result.returncode == 3
    err = one_line_error(result)
    assert "cannot reach Redis" in err and url in err


def test_unreachable_redis_from_the_agent_exits_3() -> None:
    url = f"redis://127.0.0.1:{closed_port()}/0"
    # it keeps trying for --connect-timeout (10 s by default): one second says the same
    result = cli(
        "--url", url, "--exec", "true", "--connect-timeout", "1",
        tool="redisflow-agent", env=dict(os.environ),
    )  # fmt: skip
    assert result.returncode == 3
    assert "cannot reach Redis" in one_line_error(result)


@pytest.mark.same_on_cluster
def test_agent_usage_errors_exit_2(cli_env: dict[str, str]) -> None:
    for args, pattern in (
        ([], r"one of the arguments --handler --exec is required"),
        (["--handler", "no_such_module:fn"], r"cannot import 'no_such_module'"),
        (["--handler", "nocolon"], r"expected module:function"),
        (["--exec", "true", "--concurrency", "0"], r"--concurrency: must be at least 1"),
        (["--exec", "true", "--lease", "0"], r"--lease: must be above 0"),
        (["--exec", "true", "--batch", "x"], r"--batch: not a whole number: 'x'"),
        (["--exec", "true", "--id", " "], r"--id must not be empty"),
    ):
        result = cli(*args, tool="redisflow-agent", env=cli_env)
        assert result.returncode == 2, args
        assert re.search(pattern, one_line_error(result)), args


def run_json(*args: str, env: dict[str, str]) -> object:
    result = cli(*args, "--json", env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.same_on_cluster
def test_every_read_command_speaks_json(engine: Engine, cli_env: dict[str, str]) -> None:
    pushed = run_json("push", str(DEMOS / "task-list-sample.yaml"), env=cli_env)
    [wid] = pushed["ids"]
    agent = cli(
        "--id", "cli-agent", "--handler", "demos.handlers:echo", "--until-idle",
        tool="redisflow-agent", env=cli_env,
    )  # fmt: skip
    assert agent.returncode == 0, agent.stderr
    assert "4 tasks done, 0 rejected" in agent.stderr

    status = run_json("status", wid, env=cli_env)
    assert (status["id"], status["state"], status["succeeded"]) == (wid, "succeeded", 4)
    node3 = next(t for t in status["tasks"] if t["name"] == "TestNode3")
    assert node3["output"]["payload"] == "Node3"
    assert node3["output"]["parents"]["TestNode2"]["payload"] == "Node2"
    assert node3["agent"] == "cli-agent" and node3["state"] == "succeeded"

    listed = run_json("list", env=cli_env)
    assert listed["total"] == 1 and listed["workflows"][0]["id"] == wid
    assert run_json("list", "--state", "running", env=cli_env)["workflows"] == []
    assert run_json("list", "--name", "TestWorkflow", env=cli_env)["total"] == 1

    [agent_row] = run_json("agents", env=cli_env)
    assert (agent_row["id"], agent_row["state"], agent_row["types"]) == (
        "cli-agent",
        "stopped",
        [""],
    )

    stats = run_json("stats", env=cli_env)
    assert stats["tasks"]["succeeded"] == 4 and stats["workflows"]["succeeded"] == 1
    assert stats["tasks_pushed"] == 4

    events = run_json("events", env=cli_env)
    kinds = [e["kind"] for e in events]
    assert "workflow.pushed" in kinds and "workflow.succeeded" in kinds
    assert kinds.count("task.succeeded") == 4

    cleaned = run_json("cleanup", "--finished", "--older-than", "7d", env=cli_env)
    assert cleaned == {"cleaned": 0}
    assert run_json("cleanup", wid, env=cli_env) == {"cleaned": 1, "id": wid}


def test_steering_commands(engine: Engine, cli_env: dict[str, str]) -> None:
    wf = Workflow("steer")
    wf.task("a")
    wid = engine.push(wf)
    assert run_json("pause", wid, env=cli_env) == {"id": wid, "op": "pause", "count": 1}
    assert engine.state(wid) == "paused"
    result = cli("release", wid, env=cli_env)
    assert result.returncode == 0 and f"workflow {wid}: release done" in result.stdout
    assert run_json("cancel", wid, env=cli_env)["count"] == 1
    assert engine.state(wid) == "cancelled"
    result = cli("cleanup", "--finished", env=cli_env)
    assert result.returncode == 0 and "cleaned up 1 finished workflows" in result.stdout
    assert engine.count() == 0


@pytest.mark.same_on_cluster
def test_human_readable_read_commands(engine: Engine, cli_env: dict[str, str]) -> None:
    wf = Workflow("plain")
    wf.task("a", payload="p")
    wid = engine.push(wf)
    for args, expected in (
        (["status", wid], "workflow " + wid),
        (["list"], "plain"),
        (["stats"], "pushed     1 workflow, 1 task"),
        (["events"], "workflow.pushed"),
        (["agents"], ""),
    ):
        result = cli(*args, env=cli_env)
        assert result.returncode == 0, (args, result.stderr)
        assert expected in result.stdout, args


def test_push_wait_exit_codes(engine: Engine, cli_env: dict[str, str], tmp_path: Path) -> None:
    agent = spawn_agent("--id", "waiter", "--exec", f"{sys.executable} demos/upper.py", env=cli_env)
    try:
        ok = cli("push", str(DEMOS / "task-list-sample.yaml"), "--wait", env=cli_env)
        assert ok.returncode == 0, ok.stderr
        wid = ok.stdout.split()[0]
        assert f"workflow {wid}: succeeded" in ok.stderr
        assert engine.status(wid).task("TestNode4").output == "NODE4"
        bad = tmp_path / "fails.yaml"
        bad.write_text("name: f\ntasks:\n  - {name: a, payload: fail}\n  - {name: b, after: [a]}\n")
        failed = cli("push", str(bad), "--wait", "--json", env=cli_env)
        assert failed.returncode == 1
        out = json.loads(failed.stdout)
        [fid] = out["ids"]
        assert out["states"] == {fid: "failed"}
        st = engine.status(fid)
        assert st.task("a").error == "asked to fail" and st.task("b").state == "upstream_failed"
    finally:
        stop_process(agent, 15)
    assert agent.returncode == 0


def test_push_copies(engine: Engine, cli_env: dict[str, str]) -> None:
    sample = str(DEMOS / "task-list-sample.yaml")
    result = cli("push", sample, "--copies", "3", "--json", env=cli_env)
    assert result.returncode == 0, result.stderr
    ids = json.loads(result.stdout)["ids"]
    assert len(set(ids)) == 3
    assert {engine.status(w).name for w in ids} == {"TestWorkflow"}
    [digest] = {engine.redis.hget(engine.keys.shard_of(w).workflow(w), "d") for w in ids}
    # the definition is stored once on each shard holding copies, counting them
    refs = [engine.redis.hget(s.definition(digest), "r") for s in engine.keys.all_shards()]
    assert sum(int(r) for r in refs if r is not None) == 3
    refused = cli("push", str(DEMOS / "task-list-sample.yaml"), "--copies", "0", env=cli_env)
    assert refused.returncode == 2 and "--copies" in refused.stderr


def test_push_wait_timeout_exits_5(engine: Engine, cli_env: dict[str, str]) -> None:
    result = cli(
        "push", str(DEMOS / "task-list-sample.yaml"), "--wait", "--timeout", "0.2", env=cli_env
    )
    assert result.returncode == 5  # its own code: not "failed" (1)
    assert "gave up after 0.2s; still unfinished" in result.stderr
    assert "Traceback" not in result.stderr


# -- the demo files, end to end -------------------------------------------------------------


def test_task_list_sample_through_the_cli(engine: Engine, cli_env: dict[str, str]) -> None:
    wid = cli("push", str(DEMOS / "task-list-sample.yaml"), env=cli_env).stdout.strip()
    agent = cli(
        "--id", "sampleApp", "--exec", f"{sys.executable} demos/upper.py", "--until-idle",
        tool="redisflow-agent", env=cli_env,
    )  # fmt: skip
    assert agent.returncode == 0, agent.stderr
    status = run_json("status", wid, env=cli_env)
    assert status["state"] == "succeeded"
    assert {t["name"]: t["output"] for t in status["tasks"]} == {
        "TestNode1": "NODE1",
        "TestNode2": "NODE2",
        "TestNode3": "NODE3",
        "TestNode4": "NODE4",
    }


def test_steps_book_word_counts_through_the_cli(engine: Engine, cli_env: dict[str, str]) -> None:
    """The steps manager's file as written: book-split's sections are counted one task per section
    (a map), sum-splits gathers them; the sum equals a direct count of the book."""
    path = DEMOS / "steps-book-word-counts.yaml"
    wid = cli("push", str(path), env=cli_env).stdout.strip()
    types = ["book-split", "segment-word-counts", "sum-splits", "store-title"]
    agent = cli(
        "--id", "books", "--handler", "demos.handlers:book_word_counts", "--until-idle",
        *[arg for s in types for arg in ("--type", s)],
        tool="redisflow-agent", env=cli_env,
    )  # fmt: skip
    assert agent.returncode == 0, agent.stderr
    status = run_json("status", wid, env=cli_env)
    assert status["state"] == "succeeded", status
    out = {t["name"]: t["output"] for t in status["tasks"]}
    from demos.handlers import BOOK_FILE, count_words, read_book

    book = read_book()
    assert len(book["sections"]) >= 9  # three chapters of several paragraphs each
    # a direct count: the chapters' text without the title and the headings
    text = BOOK_FILE.read_text()
    body = text[text.index("\nCHAPTER ") :]
    words = count_words(re.sub(r"^CHAPTER .*$", "", body, flags=re.MULTILINE))
    assert out["sum-splits"]["words"] == sum(words.values())
    assert out["sum-splits"]["top"] == dict(words.most_common(5))
    assert out["store-title"] == book["title"]
    # the manager's gather: one answer per section, listed under the itemListKey
    assert len(out["section-counts"]["sections"]) == len(book["sections"])
    assert sum(sum(c.values()) for c in out["section-counts"]["sections"]) == sum(words.values())
    items = [e for e in engine.events(500) if e.kind == "item.succeeded"]
    assert len(items) == len(book["sections"])


def test_steps_sub_task_of_two_steps_through_the_cli(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    """A sub-task of two steps per section (clean, then count): the same sum as a direct
    count, each section's two steps run in order, one output per section."""
    path = DEMOS / "steps-book-steps.yaml"
    wid = cli("push", str(path), env=cli_env).stdout.strip()
    types = ["book-split", "segment-clean", "segment-word-counts", "sum-splits", "store-title"]
    agent = cli(
        "--id", "books", "--handler", "demos.handlers:book_word_counts", "--until-idle",
        *[arg for s in types for arg in ("--type", s)],
        tool="redisflow-agent", env=cli_env,
    )  # fmt: skip
    assert agent.returncode == 0, agent.stderr
    status = run_json("status", wid, env=cli_env)
    assert status["state"] == "succeeded", status
    out = {t["name"]: t["output"] for t in status["tasks"]}
    from demos.handlers import BOOK_FILE, count_words, read_book

    text = BOOK_FILE.read_text()
    body = text[text.index("\nCHAPTER ") :]
    words = count_words(re.sub(r"^CHAPTER .*$", "", body, flags=re.MULTILINE))
    assert out["sum-splits"]["words"] == sum(words.values())
    assert len(out["section-counts"]["sections"]) == len(read_book()["sections"])
    steps = [e for e in engine.events(2000) if e.kind == "step.succeeded"]
    assert len(steps) == 2 * len(read_book()["sections"])


def test_native_report_demo_through_the_cli(engine: Engine, cli_env: dict[str, str]) -> None:
    path = DEMOS / "report.yaml"
    if not path.exists():
        pytest.skip("demos/report.yaml not there yet")
    wid = cli("push", str(path), env=cli_env).stdout.strip()
    agent = cli(
        "--id", "reporter", "--handler", "demos.handlers:echo", "--type", "io", "--type", "",
        "--until-idle", tool="redisflow-agent", env=cli_env,
    )  # fmt: skip
    assert agent.returncode == 0, agent.stderr
    status = run_json("status", wid, env=cli_env)
    assert status["state"] == "succeeded"
    gen = next(t for t in status["tasks"] if t["name"] == "gen-report")
    assert set(gen["output"]["parents"]) == {"import-csv", "import-xml"}


def test_without_a_url_a_private_redis_comes_and_goes() -> None:
    env = {k: v for k, v in os.environ.items() if k != "REDISFLOW_URL"}
    result = cli("stats", "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["workflows_pushed"] == 0
    m = re.search(r"private Redis at redis://127\.0\.0\.1:(\d+)", result.stderr)
    assert m, result.stderr
    with socket.socket() as s:  # stopped with the command
        assert s.connect_ex(("127.0.0.1", int(m.group(1)))) != 0


@pytest.mark.same_on_cluster
def test_exec_timeout_fails_a_slow_command(tmp_path: Path, cli_env: dict[str, str]) -> None:
    """--exec-timeout fails an attempt whose command runs too long, naming the timeout."""
    wf = tmp_path / "slow.yaml"
    wf.write_text("name: slow\ntasks:\n  - name: nap\n")
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(30)\n")
    wid = cli("push", str(wf), env=cli_env).stdout.strip()
    command = f"{sys.executable} {slow}"
    agent = cli(
        "--exec",
        command,
        "--exec-timeout",
        "0.5",
        "--until-idle",
        env=cli_env,
        tool="redisflow-agent",
    )
    assert agent.returncode == 0, agent.stderr
    task = json.loads(cli("status", wid, "--json", env=cli_env).stdout)["tasks"][0]
    assert task["state"] == "failed"
    assert "timed out after 0.5s" in task["error"]
