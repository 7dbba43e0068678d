"""Child workflows on a real redis-server: a run: task starts a template's run and ends
with its result; failure and retry; cancel, pause and cleanup of the parent reach the
child; the recursion limit; bad input refused with nothing written."""

from __future__ import annotations

import pytest
from engine_helpers import Hand, assert_stats_agree, run_agent

from engine import DefinitionError, Engine, Task, TaskFailed, Workflow
from engine.child_runs import MAX_DEPTH, build_input
from engine.loader import load_text
from engine.wait_keeper import WaitKeeper

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
    engine.store.cancel(wid, "test")  # the script alone: as a deadline ends a run
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
    assert "child runs nest at most 16 deep" in (st.task("again").error or "")
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
