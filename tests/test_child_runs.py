"""Child workflows on a real redis-server: a run: task starts a template's run and ends
with its result; failure and retry; cancel, pause and cleanup of the parent reach the
child; the recursion limit; bad input refused with nothing written."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from engine_helpers import (
    Hand,
    assert_stats_agree,
    cli,
    one_line_error,
    run_agent,
    spawn_agent,
    stop_process,
    wait_for,
)

from engine import DefinitionError, Engine, Task, TaskFailed, Workflow
from engine.runtime.child_runs import MAX_DEPTH, build_input
from engine.runtime.wait_keeper import WaitKeeper
from engine.spec.flow import RunRequest
from engine.spec.loader import load_text
from engine.spec.wait_tasks import wait_line

ENRICH = """
name: enrich
tasks:
  - name: lookup
  - name: score
    after: [lookup]
"""


def parent(version: int | None = None, attempts: int = 1) -> Workflow:
    wf = Workflow("order")
    fetch = wf.task("fetch")
    run: dict[str, object] = {
        "template": "enrich",
        "input": {
            "id": "$input.id",
            "rows": "$fetch.rows",
            "tag": "$$literal",
            "k": [1, "$payload"],
        },
    }
    if version is not None:
        run["version"] = version
    child = wf.task("enrich", payload="p", after=[fetch], run=run, max_attempts=attempts)
    wf.task("ship", after=[child])
    return wf


def work(engine: Engine, fail: set[str] | None = None) -> list[Task]:
    """Agents and the keeper until nothing moves."""
    seen: list[Task] = []

    def handler(t: Task) -> object:
        seen.append(t)
        if fail and t.name in fail:
            raise TaskFailed(f"{t.name} broke")
        if t.name == "fetch":
            return {"rows": [1, 2, 3]}
        if t.name == "score":
            return {"score": 7, "input": t.input}
        return {"done": t.name}

    for _ in range(6):
        run_agent(engine, {"": handler})
        WaitKeeper(engine).step()
    return seen


def test_a_child_run_ends_its_task_with_its_result(engine: Engine) -> None:
    engine.put_template(ENRICH)
    wid = engine.push(parent(), input={"id": 42})
    work(engine)
    st = engine.status(wid)
    assert st.state == "succeeded", st.to_dict()
    task = st.task("enrich")
    assert task.child is not None
    child = engine.status(task.child)
    assert child.state == "succeeded"
    assert child.parent == f"{wid}:1:1" and child.depth == 1
    assert child.input == {"id": 42, "rows": [1, 2, 3], "tag": "$literal", "k": [1, "p"]}
    # its one final task's output
    assert task.output == {"score": 7, "input": child.input}
    assert engine.list(template="enrich")[0].id == task.child
    assert_stats_agree(engine)


def test_a_failed_child_fails_the_task_and_a_retry_starts_a_new_child(engine: Engine) -> None:
    engine.put_template(ENRICH)
    wid = engine.push(parent(attempts=2), input={"id": 1})
    work(engine, fail={"score"})
    st = engine.status(wid)
    assert st.state == "failed"
    task = st.task("enrich")
    assert task.failures == 2 and task.attempts == 2
    assert task.error is not None and "failed: task score: score broke" in task.error
    children = engine.list(template="enrich")
    assert len(children) == 2  # one per attempt
    assert {c.state for c in children} == {"failed"}
    assert st.task("ship").state == "upstream_failed"


def test_cancelling_the_parent_cancels_its_running_child(engine: Engine) -> None:
    engine.put_template(ENRICH)
    wid = engine.push(parent(), input={"id": 1})
    run_agent(
        engine, {"": lambda t: {"rows": []}}, agent_id="only-fetch", until_idle=True
    ) if False else None
    # fetch runs; the keeper starts the child; nothing runs the child's tasks
    from engine_helpers import Hand

    hand = Hand(engine, "h")
    [fetch] = hand.claim()
    hand.succeed(fetch, {"rows": []})
    WaitKeeper(engine).step()
    WaitKeeper(engine).step()
    child = engine.status(wid).task("enrich").child
    assert child is not None and engine.state(child) == "running"
    engine.pause(wid)
    assert engine.state(child) == "paused"
    engine.release(wid)
    assert engine.state(child) == "running"
    engine.cancel(wid)
    assert engine.state(child) == "cancelled"
    assert engine.status(wid).task("enrich").state == "cancelled"
    engine.cleanup(wid)
    assert engine.list(template="enrich") == []  # the child went with it
    assert_stats_agree(engine)


def test_a_parent_past_its_deadline_has_its_child_cancelled_by_the_keeper(engine: Engine) -> None:
    engine.put_template(ENRICH)
    wf = parent()
    wid = engine.push(wf, input={"id": 1})
    hand = Hand(engine, "h")
    [fetch] = hand.claim()
    hand.succeed(fetch, {"rows": []})
    WaitKeeper(engine).step()
    child = engine.status(wid).task("enrich").child
    assert child is not None
    engine.store.calls.cancel(wid, "test")  # the script alone: as a deadline ends a run
    assert engine.state(child) == "running"
    WaitKeeper(engine).step()  # the orphan is cancelled
    assert engine.state(child) == "cancelled"


def test_runaway_recursion_stops_at_the_depth_limit(engine: Engine) -> None:
    engine.put_template("name: loop\ntasks:\n  - name: again\n    run: loop\n")
    wid = engine.run("loop").id
    for _ in range(MAX_DEPTH + 3):
        WaitKeeper(engine).step()
    runs = engine.list(template="loop", limit=100)
    assert len(runs) == MAX_DEPTH + 1  # the first run and 16 nested children
    st = max((engine.status(r.id) for r in runs), key=lambda s: s.depth)
    assert st.depth == MAX_DEPTH
    assert st.state == "failed"
    again = st.task("again")
    assert "child runs nest at most 16 deep" in (again.error or "")
    assert "its task starts no child" in (again.error or "")
    # no child started: none is named (not "child run  ended")
    assert again.child is None and "child" not in (again.signal or {})
    line = wait_line(again.wait, again.signal, again.state)
    assert line.startswith("no child run started; ended at "), line
    # every level above failed with its child
    assert engine.state(wid) == "failed"


def test_bad_child_definitions_are_refused_with_nothing_written(engine: Engine) -> None:
    wf = Workflow("w")
    wf.task("c", run="nope")
    with pytest.raises(DefinitionError, match="run: no template named 'nope'"):
        engine.push(wf)
    engine.put_template(ENRICH)
    wf = Workflow("w")
    wf.task("c", run={"template": "enrich", "version": 9})
    with pytest.raises(DefinitionError, match="has no version 9 .its latest is 1"):
        engine.push(wf)
    wf = Workflow("w")
    a = wf.task("a")
    wf.task("c", run={"template": "enrich", "input": "$b.x"}, after=[a])
    wf.task("b")
    with pytest.raises(
        DefinitionError, match="names 'b', which is not input, payload or a task upstream"
    ):
        engine.push(wf)
    with pytest.raises(DefinitionError, match="run has unknown field 'inputs'"):
        Workflow("w").task("c", run={"template": "enrich", "inputs": 1})
    both = "name: w\ntasks:\n  - name: c\n    run: enrich\n    wait: {sleep: 1}\n"
    with pytest.raises(DefinitionError, match="wait and run are two kinds"):
        engine.push(load_text(both, "w.yaml")[0])
    assert engine.stats().workflows_pushed == 0


def test_the_reference_syntax() -> None:
    outputs = {"fetch": {"rows": [{"id": 5}]}}
    assert build_input("$fetch.rows.0.id", None, None, outputs) == 5
    assert build_input({"a": "$input"}, {"x": 1}, None, outputs) == {"a": {"x": 1}}
    assert build_input(["$missing.x", "$$x", "plain"], None, None, outputs) == [None, "$x", "plain"]


# -- the engine's keys, and runs that are not the task's child ------------------------------

BOMB = """
name: bomb
tasks:
  - name: a
    run: bomb
  - name: b
    run: bomb
  - name: c
    run: bomb
"""


def test_the_engines_key_prefixes_are_refused_in_users_keys(
    engine: Engine, cli_env: dict[str, str], tmp_path: Path
) -> None:
    engine.put_template(ENRICH)
    wid = engine.push(parent(), input={"id": 1})
    plain = Workflow("w")
    plain.task("a")
    for key in (f"child:{wid}/1/1", "trigger:gh:delivery-1"):
        with pytest.raises(DefinitionError, match=f"{key[:6]}.*the engine reserves"):
            engine.push(plain, key=key)
        with pytest.raises(DefinitionError, match="the engine reserves"):
            engine.run("enrich", key=key)
        with pytest.raises(DefinitionError, match="the engine reserves"):
            engine.push_runs([RunRequest(engine.compile_template("enrich")[0], None, key=key)])
    # a parent link that is not the key's does not open it either
    with pytest.raises(DefinitionError, match="the engine reserves"):
        engine.run("enrich", key=f"child:{wid}/1/1", parent=f"{wid}:1:2", depth=1)
    flow = tmp_path / "w.yaml"
    flow.write_text("name: w\ntasks:\n  - name: a\n")
    for args in (
        ("push", str(flow), "--key", f"child:{wid}/1/1"),
        ("run", "enrich", "--key", "trigger:gh:x"),
    ):
        out = cli(*args, env=cli_env)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert "which the engine reserves for its own runs" in one_line_error(out)
    assert engine.stats().workflows_pushed == 1  # the parent alone
    assert engine.list(template="enrich") == []


def test_http_refuses_the_engines_key_prefixes(engine: Engine) -> None:
    import httpx
    from test_http_server import serving

    from engine.http import HttpConfig, create_app

    engine.put_template(ENRICH)
    with serving(create_app(engine, HttpConfig())) as base, httpx.Client(base_url=base) as http:
        for key in ("child:1/1/1", "trigger:gh:x"):
            r = http.post("/v1/templates/enrich/runs", json={}, headers={"Idempotency-Key": key})
            assert r.status_code == 400, r.text
            assert "the engine reserves" in r.json()["error"]
            r = http.post(
                "/v1/workflows",
                json={"name": "w", "tasks": [{"name": "a"}]},
                headers={"Idempotency-Key": key},
            )
            assert r.status_code == 400, r.text
            assert "the engine reserves" in r.json()["error"]
        ok = http.post("/v1/templates/enrich/runs", json={}, headers={"Idempotency-Key": "o-1"})
        assert ok.status_code == 202, ok.text
    assert engine.stats().workflows_pushed == 1


@pytest.mark.parametrize("taker", ["another template", "the same template, no parent"])
def test_a_run_holding_a_childs_key_is_not_taken_for_the_child(engine: Engine, taker: str) -> None:
    """A run that holds the key before the keeper pushes (one pushed by an earlier release,
    or written into Redis by hand) fails the task with the reason: it is not linked, and
    the parent does not wait for it forever."""
    engine.put_template(ENRICH)
    engine.put_template("name: other\ntasks:\n  - name: x\n")
    wid = engine.push(parent(), input={"id": 1})
    hand = Hand(engine, "h")
    [fetch] = hand.claim()
    hand.succeed(fetch, {"rows": []})
    key = f"child:{wid}/1/1"
    squatter = engine.run("other" if taker == "another template" else "enrich").id
    engine.redis.set(engine.keys.shard(engine.keys.shard_for(key)).idem(key), squatter)
    WaitKeeper(engine).step()
    task = engine.status(wid).task("enrich")
    assert task.state == "failed", task
    assert task.child is None
    assert f"its key {key} names run {squatter}, which is not this task's child" in (
        task.error or ""
    )
    assert engine.state(wid) == "failed"
    assert engine.status(squatter).parent is None
    assert engine.state(squatter) == "running"  # left as it is: not the task's to steer


def test_a_keepers_retry_finds_its_own_child(engine: Engine) -> None:
    """The key does what it is for: a keeper that pushed the child and died before the
    link is followed by one that finds that child and links it (no second child, no
    second count)."""
    engine.put_template(ENRICH)
    wid = engine.push(parent(), input={"id": 1})
    hand = Hand(engine, "h")
    [fetch] = hand.claim()
    hand.succeed(fetch, {"rows": []})
    member = f"{wid}:1:1"
    first = engine.run(
        "enrich", {"id": 1}, key=f"child:{wid}/1/1", parent=member, depth=1, root=str(wid)
    )
    assert engine.store.calls.child_count(str(wid), member, 5) == "ok"  # as the dead keeper did
    WaitKeeper(engine).step()
    task = engine.status(wid).task("enrich")
    assert task.state == "suspended" and task.child == first.id
    assert engine.list(template="enrich")[0].id == first.id
    assert len(engine.list(template="enrich")) == 1
    assert engine.redis.scard(engine.keys.shard_of(wid).descendants(wid)) == 1
    work(engine)
    assert engine.state(wid) == "succeeded"


# -- a template that runs itself -----------------------------------------------------------


def spawn_all(engine: Engine, most: int) -> int:
    """Keeper passes until no run is added (or more than ``most`` exist); how many runs
    of template bomb there are."""
    seen = -1
    for _ in range(50):
        runs = len(engine.list(template="bomb", limit=1000))
        if runs == seen or runs > most:
            return runs
        seen = runs
        WaitKeeper(engine).step()
    raise AssertionError("the keeper went on starting runs")


def test_a_template_that_runs_itself_stops_at_the_bound_on_descendants(engine: Engine) -> None:
    engine.put_template(BOMB)
    engine.max_descendants = 20  # (Engine(max_descendants=20); --max-descendants 20)
    root = engine.run("bomb").id
    runs = spawn_all(engine, 21 + 3)
    assert runs == 21  # the root and 20 under it
    # children's ends reach their parents over further passes (on a cluster, a pass may
    # see a child's end only after its parent on another shard was looked at)
    for _ in range(50):
        if all(r.state != "running" for r in engine.list(template="bomb", limit=100)):
            break
        WaitKeeper(engine).step()
    assert engine.redis.scard(engine.keys.shard_of(root).descendants(root)) == 20
    statuses = [engine.status(r.id) for r in engine.list(template="bomb", limit=100)]
    assert {s.root for s in statuses if s.id != root} == {root}
    why = f"child runs under run {root} are at most 20 (max_descendants): run "
    refused = [t for s in statuses for t in s.tasks if (t.error or "").startswith(why)]
    assert refused, [t.error for s in statuses for t in s.tasks]
    for t in refused:  # none started: none named
        assert t.child is None and t.signal is not None and "child" not in t.signal
    # nothing waits forever: every run ended, the root failed with its children
    assert all(s.state == "failed" for s in statuses), [(s.id, s.state) for s in statuses]
    engine.cleanup(root)
    assert engine.list(template="bomb") == []
    assert not engine.redis.exists(engine.keys.shard_of(root).descendants(root))


def test_the_agents_flag_bounds_its_keeper(engine: Engine, cli_env: dict[str, str]) -> None:
    engine.put_template(BOMB)
    root = engine.run("bomb").id
    agent = spawn_agent(
        "--id", "a1", "--type", "none", "--handler", "demos.handlers:noop",
        "--max-descendants", "7", env=cli_env,
    )  # fmt: skip
    try:
        wait_for(lambda: engine.state(root) == "failed", timeout=60)
    finally:
        stop_process(agent, signal.SIGTERM)
    assert len(engine.list(template="bomb", limit=100)) == 8
    bad = cli("--id", "a2", "--handler", "demos.handlers:noop", "--max-descendants", "0",
              env=cli_env, tool="redisflow-agent")  # fmt: skip
    assert bad.returncode == 2 and "--max-descendants" in bad.stderr
    with pytest.raises(DefinitionError, match="max_descendants must be a whole number from 1"):
        Engine(engine.redis, max_descendants=0)


def test_a_template_that_reaches_itself_is_warned_of_at_put(
    engine: Engine, cli_env: dict[str, str], tmp_path: Path
) -> None:
    info = engine.put_template(BOMB)
    assert info.new and info.warnings == [
        "template bomb runs itself through run: (bomb -> bomb): each run starts child runs "
        "until a limit ends them (at most 16 deep, 10,000 under one run), failing them there"
    ]
    assert engine.put_template(ENRICH).warnings == []
    # through other stored templates; a version that does not run it does not warn
    assert engine.put_template("name: a\ntasks:\n  - name: x\n    run: b\n").warnings == []
    info = engine.put_template("name: b\ntasks:\n  - name: y\n    run: a\n")
    assert len(info.warnings) == 1 and "(b -> a -> b)" in info.warnings[0]
    pinned = "name: c\ntasks:\n  - name: y\n    run: {template: c, version: 1}\n"
    engine.put_template("name: c\ntasks:\n  - name: y\n")
    assert engine.put_template(pinned).warnings == []
    # the CLI says so on stderr (and in --json), and stores it
    path = tmp_path / "loop.yaml"
    path.write_text("name: loop\ntasks:\n  - name: again\n    run: loop\n")
    out = cli("template", "put", str(path), env=cli_env)
    assert out.returncode == 0, out.stderr
    assert "template loop: stored version 1" in out.stdout
    assert "warning: template loop runs itself through run: (loop -> loop)" in out.stderr
    out = cli("template", "put", str(path), "--json", env=cli_env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["warnings"][0].startswith("template loop runs itself")


def test_http_template_put_warns_of_a_template_that_runs_itself(engine: Engine) -> None:
    import httpx
    from test_http_server import serving

    from engine.http import HttpConfig, create_app

    body = {"name": "bomb", "tasks": [{"name": "a", "run": "bomb"}]}
    with serving(create_app(engine, HttpConfig())) as base, httpx.Client(base_url=base) as http:
        r = http.put("/v1/templates/bomb", json=body)
        assert r.status_code == 201, r.text
        assert "(bomb -> bomb)" in r.json()["warnings"][0]
        r = http.put("/v1/templates/plain", json={"name": "plain", "tasks": [{"name": "a"}]})
        assert r.json() == {"name": "plain", "version": 1, "new": True}
