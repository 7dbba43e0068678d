"""Templates, idempotent push, concurrency keys (the `queued` state) and retention per
workflow, on a real redis-server."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import (
    Hand,
    agent_thread,
    assert_stats_agree,
    cli,
    one_line_error,
    run_agent,
    snapshot,
    wait_for,
)

from engine import DefinitionError, Engine, NotFoundError, StateError, Task, Workflow
from engine.spec.flow import concurrency_from
from engine.store.codec import compile_workflow

GATED = """\
name: deploy
concurrency: {key: scope, limit: 1}
tasks:
  - name: build
  - name: ship
    after: [build]
"""


def gated(limit: int = 1, key: str = "scope") -> Workflow:
    wf = Workflow("deploy", concurrency={"key": key, "limit": limit})
    a = wf.task("build")
    wf.task("ship", after=[a])
    return wf


def gates(engine: Engine) -> dict[str, int]:
    """Every shard's gates (each gate lives on the shard its runs are pushed to)."""
    return {
        g: int(n)
        for shard in engine.keys.all_shards()
        for g, n in engine.redis.hgetall(shard.gates).items()
    }


def states(engine: Engine, wids: list[str]) -> list[str]:
    return [engine.state(w).value for w in wids]


# -- templates ---------------------------------------------------------------------------


def test_a_template_keeps_versions_and_runs_record_theirs(engine: Engine) -> None:
    v1 = engine.put_template("name: report\ntasks:\n  - name: a\n", source="report.yaml")
    assert (v1.name, v1.version, v1.latest, v1.runs) == ("report", 1, 1, 0)
    again = engine.put_template("name: report\ntasks:\n  - name: a\n", source="report.yaml")
    assert again.version == 1  # the same text stores nothing new
    v2 = engine.put_template("name: report\ntasks:\n  - name: a\n  - name: b\n")
    assert v2.version == 2 and v2.latest == 2
    first = engine.run("report", {"day": 1}, version=1)
    second = engine.run("report", {"day": 2})
    assert (first.version, second.version) == (1, 2)
    assert [t.name for t in engine.status(first.id).tasks] == ["a"]
    assert [t.name for t in engine.status(second.id).tasks] == ["a", "b"]
    assert engine.status(second.id).input == {"day": 2}
    assert engine.list_ids(template="report") == [second.id, first.id]
    assert engine.list_ids(template="report", oldest_first=True) == [first.id, second.id]
    assert engine.count(template="report") == 2
    (info,) = engine.templates()
    assert (info.name, info.version, info.runs) == ("report", 2, 2)
    assert engine.template("report", 1).text == "name: report\ntasks:\n  - name: a\n"
    engine.remove_template("report")
    assert engine.templates() == []
    assert engine.state(first.id) == "running"  # its runs stay
    with pytest.raises(NotFoundError, match="no template named 'report'"):
        engine.run("report")


def test_a_bad_template_writes_nothing(engine: Engine) -> None:
    before = snapshot(engine.redis)
    cycle = "name: loop\ntasks:\n  - {name: a, after: [b]}\n  - {name: b, after: [a]}\n"
    with pytest.raises(DefinitionError, match="cycle"):
        engine.put_template(cycle, source="loop.yaml")
    with pytest.raises(DefinitionError, match="has no name"):
        engine.put_template("tasks:\n  - name: a\n", source="anon.yaml")
    with pytest.raises(DefinitionError, match="template name"):
        engine.put_template("name: a b\ntasks:\n  - name: a\n")
    with pytest.raises(DefinitionError, match="concurrency limit"):
        engine.put_template("name: c\nconcurrency: {key: k, limit: 0}\ntasks:\n  - name: a\n")
    with pytest.raises(NotFoundError):
        engine.run("nothing-here")
    assert snapshot(engine.redis) == before


def test_template_and_run_commands(engine: Engine, cli_env: dict[str, str], tmp_path: Path) -> None:
    f = tmp_path / "deploy.yaml"
    f.write_text(GATED)
    out = cli("template", "put", str(f), env=cli_env)
    assert out.returncode == 0 and "version 1" in out.stdout, out.stderr
    listed = cli("template", "list", "--json", env=cli_env)
    assert json.loads(listed.stdout)["templates"][0]["name"] == "deploy"
    shown = cli("template", "show", "deploy", env=cli_env)
    assert GATED in shown.stdout
    run1 = cli("run", "deploy", "--input", '{"scope": "eu"}', "--key", "r-1", env=cli_env)
    run2 = cli("run", "deploy", "--input", '{"scope": "eu"}', "--key", "r-1", env=cli_env)
    assert run1.returncode == run2.returncode == 0
    assert run1.stdout == run2.stdout and "nothing pushed" in run2.stderr
    run3 = cli("run", "deploy", "--input", '{"scope": "eu"}', env=cli_env)
    wid3 = run3.stdout.strip()
    assert engine.state(wid3) == "queued"  # the first run holds scope eu
    page = cli("list", "--template", "deploy", "--oldest", "--json", env=cli_env)
    ids = [w["id"] for w in json.loads(page.stdout)["workflows"]]
    assert ids == [run1.stdout.strip(), wid3]
    for args, message in (
        (("run", "nope"), "no template named 'nope'"),
        (("run", "deploy", "--input", '{"region": 1}'), "no field 'scope'"),
        (("template", "show", "deploy", "--version", "7"), "no version 7"),
        (("template", "put", str(tmp_path / "missing.yaml")), "no such file"),
    ):
        bad = cli(*args, env=cli_env)
        assert bad.returncode == 2, bad.stderr
        assert message in one_line_error(bad)


def test_run_copies(engine: Engine, cli_env: dict[str, str]) -> None:
    """``run --copies N``: N runs of the template's version with the input, one definition
    stored; with --key (one run) refused, nothing written."""
    engine.put_template("name: tick\ntasks:\n  - name: a\n", name="tick")
    engine.put_template("name: tick\ntasks:\n  - name: a\n  - name: b\n", name="tick")
    out = cli("run", "tick", "--copies", "3", "--version", "1", "--input", '{"n": 1}',
              "--json", env=cli_env)  # fmt: skip
    assert out.returncode == 0, out.stderr
    ids = json.loads(out.stdout)["ids"]
    assert len(set(ids)) == 3
    for wid in ids:
        status = engine.status(wid)
        assert status.input == {"n": 1} and [t.name for t in status.tasks] == ["a"]  # v1
        assert status.template == "tick"
    assert {w.id for w in engine.list(template="tick")} == set(ids)
    before = snapshot(engine.redis)
    for args, message in (
        (("--copies", "2", "--key", "k"), "--key names one run: run without --copies, not 2"),
        (("--copies", "0"), "0"),
    ):
        bad = cli("run", "tick", *args, env=cli_env)
        assert bad.returncode == 2, bad.stderr
        assert message in one_line_error(bad)
    assert snapshot(engine.redis) == before


# -- idempotent push ---------------------------------------------------------------------


def test_a_key_raced_by_eight_threads_makes_one_workflow(engine: Engine, redis_url: str) -> None:
    wf = gated(limit=100)
    ids: list[str] = []
    existing: list[bool] = []
    start = threading.Barrier(8)

    def push() -> None:
        with Engine.connect(redis_url) as mine:
            start.wait()
            pushed = mine.push_runs([_request(wf, {"scope": "x"}, "order-8812")])[0]
            ids.append(pushed.id)
            existing.append(pushed.existing)

    threads = [threading.Thread(target=push) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(set(ids)) == 1 and len(ids) == 8
    assert sorted(existing) == [False] + [True] * 7
    assert engine.count() == 1
    assert_stats_agree(engine)


def _request(wf: Workflow, input: Any, key: str | None = None) -> Any:
    from engine.spec.flow import RunRequest

    return RunRequest(wf, input, key=key)


def test_a_key_lives_as_long_as_its_workflow(engine: Engine) -> None:
    wf = Workflow("once")
    wf.task("a")
    first = engine.push(wf, key="k")
    assert engine.push(wf, {"other": "input"}, key="k") == first
    run_agent(engine, {"": lambda t: None})
    assert engine.push(wf, key="k") == first  # finished but kept: still the same
    engine.cleanup(first)
    again = engine.push(wf, key="k")
    assert again != first and engine.state(again) == "running"
    with pytest.raises(DefinitionError, match="idempotency key"):
        engine.push(wf, key="")


def test_push_key_on_the_command_line(cli_env: dict[str, str], tmp_path: Path) -> None:
    f = tmp_path / "one.yaml"
    f.write_text("name: one\ntasks:\n  - name: a\n")
    a = cli("push", str(f), "--key", "nightly-2026-11-22", env=cli_env)
    b = cli("push", str(f), "--key", "nightly-2026-11-22", env=cli_env)
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout
    two = cli("push", str(f), "--copies", "2", "--key", "k", env=cli_env)
    assert two.returncode == 2 and "--key names one run" in one_line_error(two)


# -- concurrency keys --------------------------------------------------------------------


def test_runs_over_the_limit_wait_queued_and_start_oldest_first(engine: Engine) -> None:
    wf = gated(limit=2)
    wids = [engine.push(wf, {"scope": "eu"}) for _ in range(5)]
    other = engine.push(wf, {"scope": "us"})
    assert states(engine, wids) == ["running", "running", "queued", "queued", "queued"]
    assert engine.state(other) == "running"  # another key, another gate
    assert engine.count("queued") == 3
    assert gates(engine) == {"c/deploy/eu": 2, "c/deploy/us": 1}
    hand = Hand(engine)
    hand.register()
    # the first eu run ends: the oldest queued one (wids[2]) starts, no other
    for t in hand.claim(count=10):
        if t.workflow_id == wids[0]:
            hand.succeed(t)
    for t in hand.claim(count=10):
        if t.workflow_id == wids[0]:
            hand.succeed(t)
    assert states(engine, wids) == ["succeeded", "running", "running", "queued", "queued"]
    assert gates(engine)["c/deploy/eu"] == 2
    assert_stats_agree(engine)


def test_every_end_path_gives_the_slot_back(engine: Engine) -> None:
    wf = gated(limit=1)
    fails = Workflow("deploy", concurrency={"key": "scope", "limit": 1}, deadline=0.5)
    fails.task("build")
    hand = Hand(engine)
    hand.register()

    # failed
    a = engine.push(wf, {"scope": "s"})
    b = engine.push(wf, {"scope": "s"})
    hand.fail(hand.claim_one())
    assert states(engine, [a, b]) == ["failed", "running"]
    # a failed run retried while the key is busy is refused, then runs once it is free
    with pytest.raises(StateError, match="at its limit"):
        engine.retry(a)
    # cancelled (running), and a queued one cancelled leaves its queue
    c = engine.push(wf, {"scope": "s"})
    d = engine.push(wf, {"scope": "s"})
    assert states(engine, [c, d]) == ["queued", "queued"]
    engine.cancel(d)
    engine.cancel(b)
    assert states(engine, [b, c, d]) == ["cancelled", "running", "cancelled"]
    # succeeded: then the failed one can be retried, and holds the slot again
    for _ in range(2):
        hand.succeed(hand.claim_one())
    assert engine.state(c) == "succeeded" and gates(engine) == {}
    engine.retry(a)
    assert engine.state(a) == "running" and gates(engine) == {"c/deploy/s": 1}
    for t in hand.claim(count=10):
        hand.succeed(t)
    for t in hand.claim(count=10):
        hand.succeed(t)
    assert engine.state(a) == "succeeded" and gates(engine) == {}
    # past a deadline
    e = engine.push(fails, {"scope": "s"})
    f = engine.push(fails, {"scope": "s"})
    assert states(engine, [e, f]) == ["running", "queued"]
    time.sleep(0.6)
    engine.maintain()
    assert engine.status(e).reason == "deadline"
    assert engine.state(f) == "running"  # its deadline counts from its start
    # cleaned up: nothing to give back twice
    for wid in (a, b, c, d, e):
        engine.cleanup(wid)
    assert gates(engine) == {"c/deploy/s": 1}
    engine.cancel(f)
    assert gates(engine) == {}
    shard = engine.keys.shard_of(f)  # the gate's shard
    assert engine.redis.exists(shard.gate_queue("c/deploy/s")) == 0
    assert_stats_agree(engine)


def test_a_scheduled_run_over_its_limit_waits_queued(engine: Engine) -> None:
    wf = gated(limit=1)
    a = engine.push(wf, {"scope": "s"})
    later = engine.push(wf, {"scope": "s"}, start_in=60)
    assert engine.state(later) == "scheduled"
    engine.release(later)  # its time comes (release starts it now): the key is busy
    assert engine.state(later) == "queued"
    engine.cancel(a)
    assert engine.state(later) == "running"


def test_agents_racing_never_run_more_than_the_limit(engine: Engine) -> None:
    limit = 2
    wf = gated(limit=limit)
    keys = ["a", "b", "c"]
    wids = [engine.push(wf, {"scope": keys[n % 3]}) for n in range(24)]
    by_wid = {w: keys[n % 3] for n, w in enumerate(wids)}
    running: Counter[str] = Counter()
    most: Counter[str] = Counter()
    lock = threading.Lock()

    def work(task: Task) -> None:
        key = by_wid[task.workflow_id]
        if task.name == "build":
            with lock:
                running[key] += 1
                most[key] = max(most[key], running[key])
        time.sleep(0.01)
        if task.name == "ship":
            with lock:
                running[key] -= 1

    with (
        agent_thread(engine, {"": work}, "a1", concurrency=4),
        agent_thread(engine, {"": work}, "a2", concurrency=4),
    ):
        wait_for(lambda: engine.count("succeeded") == len(wids), 60, "every run to end")
    assert max(most.values()) <= limit
    assert set(most) == set(keys)
    assert gates(engine) == {}
    assert_stats_agree(engine)


# -- retention per workflow --------------------------------------------------------------


def test_a_workflow_with_its_own_ttl_goes_then_and_not_before(engine: Engine) -> None:
    short = Workflow("short", ttl=0.3)
    short.task("a")
    long = Workflow("long", ttl=3600)
    long.task("a")
    plain = Workflow("plain")
    plain.task("a")
    s, lg, p = engine.push(short), engine.push(long), engine.push(plain)
    run_agent(engine, {"": lambda t: None})
    time.sleep(0.4)
    engine.maintain()
    assert engine.count() == 2  # the short one went, with the deployment's default
    engine.retention_s = 0.2  # the deployment keeps finished workflows 0.2 s
    time.sleep(0.3)
    engine.maintain()
    engine.maintain()
    assert engine.list_ids() == [lg]  # its own ttl is longer than the deployment's
    assert p and s
    assert_stats_agree(engine)


def test_ttl_in_a_file_is_checked() -> None:
    from engine.spec.loader import load_text

    (wf,) = load_text("name: t\nttl: 7d\ntasks:\n  - name: a\n")
    assert wf.ttl == 7 * 86400
    bad = Workflow("t", ttl=-1)
    bad.task("a")
    with pytest.raises(DefinitionError, match="ttl must be"):
        compile_workflow(bad)


def test_a_concurrency_option_that_is_no_name_is_refused_in_words() -> None:
    with pytest.raises(DefinitionError, match=r"f\.yaml:3: concurrency has unknown option\(s\) 5"):
        concurrency_from({"key": "a", "limit": 1, 5: 1}, "f.yaml:3")
