"""Maps whose items run several steps (a small workflow per item), and the errors of
tolerated failed items handed to the gather, on a real Redis."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from engine_helpers import Hand, assert_stats_agree, cli, run_agent, scan_keys
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import DefinitionError, Engine, Task, TaskFailed, Workflow
from engine.spec.loader import load_file


def per_item(**options: Any) -> Workflow:
    """split -> sections (per item: fetch -> [count, words] -> merge) -> total."""
    steps = Workflow("per-section")
    fetch = steps.task("fetch", type="io")
    count = steps.task("count", after=[fetch], **options)
    words = steps.task("words", after=[fetch])
    steps.task("merge", after=[count, words])
    wf = Workflow("book", retry_backoff=0.001)
    split = wf.task("split")
    sections = wf.task("sections", map=split["sections"], steps=steps, concurrency=3)
    wf.task("total", after=[sections])
    return wf


def book(n: int, fail: set[int] = frozenset(), log: list | None = None):  # type: ignore[assignment]
    def run(task: Task) -> Any:
        if log is not None:
            log.append((task.name, task.item_index))
        if task.name == "split":
            return {"sections": [f"s{i} " * (i + 1) for i in range(n)]}
        if task.name == "fetch":
            return {"text": task.item.strip()}
        if task.name == "count":
            if task.item_index in fail:
                raise TaskFailed(f"cannot count {task.item_index}")
            return len(task.parents["fetch"]["text"].split())
        if task.name == "words":
            return sorted(set(task.parents["fetch"]["text"].split()))
        if task.name == "merge":
            return {"n": task.parents["count"], "words": task.parents["words"]}
        return task.parents["sections"]

    return run


def test_each_item_runs_its_steps_in_order_and_the_gather_gets_the_last_outputs(
    engine: Engine,
) -> None:
    wid = engine.push(per_item())
    log: list[tuple[str, int | None]] = []
    run = book(7, log=log)
    run_agent(engine, {"": run, "io": run})
    st_ = engine.status(wid)
    assert st_.state == "succeeded", st_
    assert st_.task("total").output == [{"n": i + 1, "words": [f"s{i}"]} for i in range(7)]
    for i in range(7):
        mine = [name for name, k in log if k == i]
        assert sorted(mine) == ["count", "fetch", "merge", "words"]
        assert mine[0] == "fetch" and mine[-1] == "merge"
    assert_stats_agree(engine)
    assert engine.stats().tasks["succeeded"] == 3 + 7  # each item counts once


def test_a_slow_item_does_not_hold_back_the_others(engine: Engine) -> None:
    wf = Workflow("slow")
    split = wf.task("split")
    steps = Workflow("two")
    a = steps.task("a")
    steps.task("b", after=[a])
    wf.task("each", map=split, steps=steps, concurrency=10)
    wid = engine.push(wf)
    hand = Hand(engine)
    [s] = hand.claim()
    hand.succeed(s, [0, 1, 2])
    firsts = hand.claim(count=10)
    assert sorted((t.name, t.item_index) for t in firsts) == [("a", 0), ("a", 1), ("a", 2)]
    # item 0 stays in its first step; items 1 and 2 go on to their second and end
    for t in firsts[1:]:
        hand.succeed(t, t.item)
    seconds = hand.claim(count=10)
    assert sorted((t.name, t.item_index, t.step) for t in seconds) == [("b", 1, 1), ("b", 2, 1)]
    assert seconds[0].parents == {"a": seconds[0].item}
    for t in seconds:
        hand.succeed(t, t.item * 10)
    assert engine.status(wid).task("each").items["succeeded"] == 2
    hand.succeed(firsts[0], 0)
    [last] = hand.claim()
    hand.succeed(last, 0)
    st_ = engine.status(wid)
    assert st_.state == "succeeded"
    assert st_.task("each").output == [0, 10, 20]


def test_a_failed_step_fails_its_item_and_retry_runs_only_what_failed(engine: Engine) -> None:
    wid = engine.push(per_item(max_attempts=1))
    log: list[tuple[str, int | None]] = []
    run = book(5, fail={2}, log=log)
    run_agent(engine, {"": run, "io": run})
    st_ = engine.status(wid)
    assert (st_.state, st_.task("sections").state, st_.task("total").state) == (
        "failed", "failed", "upstream_failed",
    )  # fmt: skip
    [item] = engine.items(wid, "sections", state="failed")
    assert item.index == 2 and item.error == "step count: cannot count 2"
    assert ("merge", 2) not in log
    assert_stats_agree(engine)
    log.clear()
    engine.retry(wid, ["sections[2]"])
    run = book(5, log=log)
    run_agent(engine, {"": run, "io": run})
    st_ = engine.status(wid)
    assert st_.state == "succeeded"
    # fetch and words of item 2 succeeded before: only count and what follows run again
    assert sorted(log) == [("count", 2), ("merge", 2), ("total", None)]
    assert st_.task("total").output[2] == {"n": 3, "words": ["s2"]}
    assert_stats_agree(engine)


def test_several_last_steps_give_an_object_and_steps_retry_with_backoff(engine: Engine) -> None:
    wf = Workflow("forks", retry_backoff=0.001)
    split = wf.task("split")
    steps = Workflow("fork")
    a = steps.task("a")
    steps.task("left", after=[a], max_attempts=3)
    steps.task("right", after=[a])
    wf.task("each", map=split, steps=steps)
    wid = engine.push(wf)
    tries: dict[int, int] = {}

    def run(task: Task) -> Any:
        if task.name == "split":
            return [1, 2]
        if task.name == "left":
            tries[task.item_index] = task.attempt
            if task.attempt < 3:
                raise TaskFailed("not yet")
        return f"{task.name}{task.item}"

    run_agent(engine, {"": run})
    st_ = engine.status(wid)
    assert st_.state == "succeeded"
    assert st_.task("each").output == [
        {"left": "left1", "right": "right1"}, {"left": "left2", "right": "right2"},
    ]  # fmt: skip
    assert tries == {0: 3, 1: 3}


def test_pause_release_cancel_and_cleanup_cover_steps(engine: Engine) -> None:
    wid = engine.push(per_item())
    hand = Hand(engine)
    [split] = hand.claim()
    hand.succeed(split, {"sections": ["a b", "c", "d e f", "g", "h"]})
    io = engine.keys.shard_of(wid).queue("io")
    assert engine.redis.zcard(io) == 3  # the window: three items, each at its first step
    assert engine.pause(wid) == 3
    assert engine.redis.zcard(io) == 0
    assert engine.release(wid) == 3
    fetches = hand.claim("io", 3)
    for t in fetches:
        hand.succeed(t, {"text": t.item})
    plain = engine.keys.shard_of(wid).queue("")
    assert engine.redis.zcard(plain) == 6  # count and words of three items
    running = hand.claim(count=2)
    assert engine.cancel(wid) == 2  # the map (its three items) and the gather
    assert engine.redis.zcard(plain) == engine.redis.zcard(io) == 0
    for t in running:  # a running step finishes, is recorded, starts nothing
        hand.succeed(t, 1)
    assert engine.status(wid).state == "cancelled"
    tasks = engine.stats().tasks
    assert tasks["ready"] == tasks["running"] == tasks["waiting"] == 0, tasks
    engine.cleanup(wid)
    assert not [k for k in scan_keys(engine.redis) if f":w:{wid}" in k]
    assert sum(engine.stats().tasks.values()) == 0


def test_a_step_held_by_a_lost_agent_runs_again(engine: Engine) -> None:
    wid = engine.push(per_item())
    hand = Hand(engine, "doomed")
    [split] = hand.claim()
    hand.succeed(split, {"sections": ["x"]})
    [fetch] = hand.claim("io")
    hand.succeed(fetch, {"text": "x"})
    held = hand.claim(count=2)
    assert {t.name for t in held} == {"count", "words"}
    hand.expire()  # its lease runs out: housekeeping hands its steps on
    run = book(1)
    run_agent(engine, {"": run, "io": run})
    st_ = engine.status(wid)
    assert st_.state == "succeeded"
    assert st_.task("total").output == [{"n": 1, "words": ["x"]}]
    assert [hand.succeed(t, 1) for t in held] == [0, 0]  # the late results are rejected


def test_the_gather_gets_the_errors_of_tolerated_items(engine: Engine) -> None:
    wf = Workflow("lenient")
    split = wf.task("split")
    each = wf.task("each", map=split, tolerate="50%")
    wf.task("gather", after=[each])
    wid = engine.push(wf)
    got: dict[str, Any] = {}

    def run(task: Task) -> Any:
        if task.name == "split":
            return [0, 1, 2, 3]
        if task.name == "each":
            if task.item in (1, 3):
                raise TaskFailed(f"no {task.item}")
            return task.item
        got.update(outputs=task.parents["each"], errors=task.errors)
        return None

    run_agent(engine, {"": run})
    assert engine.status(wid).state == "succeeded"
    assert got == {"outputs": [0, None, 2, None], "errors": {"each": {1: "no 1", 3: "no 3"}}}


def test_steps_from_yaml_native_and_steps_manager(tmp_path, engine: Engine) -> None:
    native = tmp_path / "native.yaml"
    native.write_text(
        "name: native\n"
        "tasks:\n"
        "  - name: split\n"
        "  - name: each\n"
        "    map: split\n"
        "    steps:\n"
        "      - name: double\n"
        "      - name: add\n"
        "        after: [double]\n"
        "  - name: sum\n"
        "    after: [each]\n"
    )
    seed = tmp_path / "seed.yaml"
    seed.write_text(
        "workflows:\n"
        "  - name: seed\n"
        "    steps:\n"
        "      - name: split\n"
        "      - name: each\n"
        "        task: per\n"
        "        depends: [split]\n"
        "      - name: sum\n"
        "        depends: [each]\n"
        "    tasks:\n"
        "      - name: per\n"
        "        itemListKey: numbers\n"
        "        steps:\n"
        "          - name: double\n"
        "            depends: [__start__]\n"
        "          - name: add\n"
        "            depends: [double]\n"
    )
    [wf1] = load_file(str(native))
    [wf2] = load_file(str(seed))
    w1, w2 = engine.push(wf1), engine.push(wf2)

    def run(task: Task) -> Any:
        if task.name == "split":
            return {"numbers": [1, 2, 3]} if task.workflow_id == w2 else [1, 2, 3]
        if task.name == "double":
            return {"x": task.item * 2}
        if task.name == "add":
            value = task.parents["double"]["x"] + 1
            # steps manager: an item answers under the element key, gathered as a list
            return {"number": value} if task.workflow_id == w2 else value
        if task.name == "sum":
            each = task.parents["each"]
            return sum(each["numbers"] if task.workflow_id == w2 else each)
        raise AssertionError(task.name)

    run_agent(engine, {"": run, "split": run, "double": run, "add": run, "sum": run})
    for wid in (w1, w2):
        st_ = engine.status(wid)
        assert st_.state == "succeeded", (wid, st_)
        assert st_.task("sum").output == 3 + 5 + 7


@pytest.mark.parametrize(
    "steps_yaml, message",
    [
        ("      - name: a\n      - name: a\n", "duplicate task name 'a'"),
        ("      - name: a\n        after: [b]\n", "task 'a' depends on unknown task 'b'"),
        (
            "      - name: a\n        after: [b]\n      - name: b\n        after: [a]\n",
            "has a cycle",
        ),
        ("      - name: a\n        map: split\n", "a map inside a map's steps is not supported"),
        ("      []\n", "steps must be a non-empty list"),
    ],
)
def test_bad_steps_are_refused_with_one_line(tmp_path, steps_yaml: str, message: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(
        "name: bad\ntasks:\n  - name: split\n  - name: each\n    map: split\n    steps:\n"
        + steps_yaml
    )
    from engine.store.codec import compile_workflow

    with pytest.raises(DefinitionError, match=message) as err:
        for wf in load_file(str(f)):
            compile_workflow(wf)
    assert "\n" not in str(err.value)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    n=st.integers(0, 12),
    nsteps=st.integers(1, 4),
    edges=st.sets(st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=6),
    failing=st.sets(st.tuples(st.integers(0, 11), st.integers(0, 3)), max_size=4),
    window=st.integers(1, 5),
)
def test_steps_follow_the_model(
    engine: Engine, n: int, nsteps: int, edges: set, failing: set, window: int
) -> None:
    """Random per-item DAGs and failing steps: every item's steps run in dependency order,
    an item fails exactly when one of its steps fails, the gather waits for all, and a
    retry of the failed items ends the workflow succeeded."""
    engine.redis.flushall()
    after: dict[int, list[int]] = {s: [] for s in range(nsteps)}
    for a, b in edges:
        if a < b < nsteps:
            after[b].append(a)
    steps = Workflow("steps")
    for s in range(nsteps):
        steps.task(f"s{s}", after=[f"s{p}" for p in after[s]])
    wf = Workflow("model", retry_backoff=0.001)
    split = wf.task("split")
    each = wf.task("each", map=split, steps=steps, concurrency=window)
    wf.task("gather", after=[each])
    wid = engine.push(wf)
    ran: list[tuple[int, int]] = []
    lock = threading.Lock()
    broken = set(failing)

    def run(task: Task) -> Any:
        if task.name == "split":
            return list(range(n))
        if task.name == "gather":
            return task.parents["each"]
        s = int(task.name[1:])
        with lock:
            for p in after[s]:  # its parents in the item ran before it
                assert (task.item_index, p) in ran
            ran.append((task.item_index, s))
        if (task.item_index, s) in broken:
            raise TaskFailed("no")
        return [task.item, s]

    run_agent(engine, {"": run})
    last = [s for s in range(nsteps) if not any(s in after[c] for c in range(nsteps))]
    bad = {k for k, s in failing if k < n and s < nsteps}
    st_ = engine.status(wid)
    assert st_.state == ("failed" if bad else "succeeded")
    assert_stats_agree(engine)
    if bad:
        broken.clear()
        engine.retry(wid)
        time.sleep(0.01)
        run_agent(engine, {"": run})
        st_ = engine.status(wid)
        assert st_.state == "succeeded"
    for k in range(n):
        assert {s for kk, s in ran if kk == k} == set(range(nsteps))
    want = [[k, last[0]] if len(last) == 1 else {f"s{s}": [k, s] for s in last} for k in range(n)]
    assert st_.task("gather").output == want
    assert_stats_agree(engine)


def test_an_items_steps_are_shown_in_status_and_the_cli(engine: Engine, cli_env: dict) -> None:
    wid = engine.push(per_item())
    hand = Hand(engine)
    [split] = hand.claim()
    hand.succeed(split, {"sections": ["a", "b"]})
    [fetch, _] = hand.claim("io", 2)
    hand.succeed(fetch, {"text": "a"})
    [item, *_] = engine.items(wid, "sections")
    assert item.index == 0 and item.state == "running"
    assert {n: str(s) for n, s in item.steps.items()} == {
        "fetch": "succeeded", "count": "ready", "words": "ready", "merge": "waiting",
    }  # fmt: skip
    shown = cli("status", wid, "--task", "sections", "--json", env=cli_env)
    assert json.loads(shown.stdout)["items"][0]["steps"]["count"] == "ready"
    table = cli("status", wid, "--task", "sections", env=cli_env)
    assert "fetch succeeded" in " ".join(table.stdout.split())


def test_a_failure_branch_gets_its_parents_errors(engine: Engine) -> None:
    wf = Workflow("branch")
    deploy = wf.task("deploy")
    check = wf.task("check")
    wf.task("rollback", on_failure=[deploy, check])
    wid = engine.push(wf)
    got: dict[str, Any] = {}

    def run(task: Task) -> Any:
        if task.name == "deploy":
            raise TaskFailed("disk full")
        if task.name == "rollback":
            got.update(task.errors)
        return None

    run_agent(engine, {"": run})
    assert got == {"deploy": "disk full", "check": None}
    assert engine.status(wid).task("rollback").state == "succeeded"
