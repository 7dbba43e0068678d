"""Runtime fan-out: maps over a parent's output, their items, windows and gathers, on a
real Redis."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from engine_helpers import (
    Hand,
    run_agent,
    scan_keys,
    snapshot,
    spawn_agent,
    stop_process,
    wait_for,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import (
    DefinitionError,
    EmbeddedRedis,
    Engine,
    NotFoundError,
    StateError,
    Task,
    TaskFailed,
    Workflow,
)
from engine.store.codec import compile_workflow


def mapped(key: str | None = "items", **options: Any) -> Workflow:
    wf = Workflow("fan")
    split = wf.task("split")
    over = split[key] if key else split
    count = wf.task("count", map=over, **options)
    wf.task("total", after=[count])
    return wf


def handler(items: Any, fail: set[int] = frozenset(), seen: list | None = None):  # type: ignore[assignment]
    def run(task: Task) -> Any:
        if task.name == "split":
            return items
        if task.name == "count":
            if seen is not None:
                seen.append(task.item_index)
            if task.item in fail:
                raise TaskFailed(f"item {task.item} fails")
            return task.item * 2
        return task.parents["count"]

    return run


def test_each_item_runs_once_and_the_gather_gets_outputs_in_order(engine: Engine) -> None:
    wid = engine.push(mapped(concurrency=7))
    seen: list[int] = []
    run_agent(engine, {"": handler({"items": list(range(50))}, seen=seen)})
    st = engine.status(wid)
    assert st.state == "succeeded"
    assert sorted(seen) == list(range(50))
    assert st.task("total").output == [2 * i for i in range(50)]
    assert st.task("count").output == [2 * i for i in range(50)]


def test_a_map_over_a_whole_output_and_over_a_map(engine: Engine) -> None:
    wf = Workflow("twice")
    split = wf.task("split")
    first = wf.task("first", map=split)
    second = wf.task("second", map=first)
    wf.task("total", after=[second])

    def run(task: Task) -> Any:
        if task.name == "split":
            return [1, 2, 3]
        if task.name in ("first", "second"):
            return task.item + 10
        return sum(task.parents["second"])

    wid = engine.push(wf)
    run_agent(engine, {"": run})
    assert engine.status(wid).task("total").output == 21 + 33 + 6 + 6  # (1,2,3)+20 each


@pytest.mark.parametrize(
    ("on_empty", "map_state", "total_state", "workflow"),
    [
        ("succeed", "succeeded", "succeeded", "succeeded"),
        ("skip", "skipped", "skipped", "succeeded"),
        ("fail", "failed", "upstream_failed", "failed"),
    ],
)
def test_an_empty_list(
    engine: Engine, on_empty: str, map_state: str, total_state: str, workflow: str
) -> None:
    wid = engine.push(mapped(on_empty=on_empty))
    run_agent(engine, {"": handler({"items": []})})
    st = engine.status(wid)
    assert (st.task("count").state, st.task("total").state, st.state) == (
        map_state, total_state, workflow,
    )  # fmt: skip
    if on_empty == "succeed":
        assert st.task("total").output == []


@pytest.mark.parametrize(
    ("output", "says"),
    [
        ({"other": [1]}, "split's output has no key 'items'"),
        ({"items": {"a": 1}}, "it is a dict, expected a list"),
        ([1, 2], "split's output is a list, not an object"),
        (None, "split's output is no output, not an object"),
    ],
)
def test_an_output_that_cannot_be_mapped_fails_the_map_once(
    engine: Engine, output: Any, says: str
) -> None:
    wid = engine.push(mapped(max_attempts=3) if False else mapped())
    run_agent(engine, {"": handler(output)})
    st = engine.status(wid)
    count = st.task("count")
    assert st.state == "failed" and count.state == "failed"
    assert says in (count.error or "") and "cannot map over split.items" in (count.error or "")
    assert st.task("total").state == "upstream_failed"


def test_max_items(engine: Engine) -> None:
    wid = engine.push(mapped(max_items=5))
    run_agent(engine, {"": handler({"items": list(range(6))})})
    count = engine.status(wid).task("count")
    assert count.state == "failed" and "6 items, over max_items 5" in (count.error or "")


def test_failed_items_fail_the_map_unless_tolerated_and_retry_reruns_only_them(
    engine: Engine,
) -> None:
    strict = engine.push(mapped())
    lenient = engine.push(mapped(tolerate="20%"))
    seen: list[int] = []
    run_agent(engine, {"": handler({"items": list(range(10))}, fail={3, 7}, seen=seen)})
    st = engine.status(strict)
    assert (st.state, st.task("count").state, st.task("total").state) == (
        "failed", "failed", "upstream_failed",
    )  # fmt: skip
    assert st.task("count").error == "2 of 10 items failed"
    ok = engine.status(lenient)
    assert ok.state == "succeeded"
    assert ok.task("total").output == [0, 2, 4, None, 8, 10, 12, None, 16, 18]
    # retry runs the two failed items again, not the eight that succeeded
    seen.clear()
    assert engine.retry(strict) == 2  # the map and its gather
    run_agent(engine, {"": handler({"items": list(range(10))}, seen=seen)})
    st = engine.status(strict)
    assert st.state == "succeeded"
    assert sorted(seen) == [3, 7]
    assert st.task("total").output == [2 * i for i in range(10)]


def test_items_retry_with_backoff_and_fencing(engine: Engine) -> None:
    wf = Workflow("retrying", retry_backoff=0.01)
    split = wf.task("split")
    wf.task("count", map=split, max_attempts=2)
    wid = engine.push(wf)
    tries: dict[int, int] = {}

    def run(task: Task) -> Any:
        if task.name == "split":
            return [0, 1, 2]
        tries[task.item] = task.attempt
        if task.attempt == 1 and task.item == 1:
            raise TaskFailed("first try fails")
        return task.item

    run_agent(engine, {"": run})
    assert engine.status(wid).state == "succeeded"
    assert tries == {0: 1, 1: 2, 2: 1}


def test_the_window_bounds_the_ready_queue(engine: Engine) -> None:
    wid = engine.push(mapped(concurrency=4))
    hand = Hand(engine)
    [split] = hand.claim()
    hand.succeed(split, {"items": list(range(20))})
    ready = engine.redis.zcard(engine.keys.shard_of(wid).queue(""))
    assert ready == 4
    items = hand.claim(count=100)
    assert [t.item for t in items] and len(items) == 4
    hand.succeed(items[0], "x")  # one ends, one more starts
    assert engine.redis.zcard(engine.keys.shard_of(wid).queue("")) == 1
    assert engine.status(wid).state == "running"


def test_pause_release_and_cancel_cover_items(engine: Engine) -> None:
    wid = engine.push(mapped(concurrency=5))
    hand = Hand(engine)
    [split] = hand.claim()
    hand.succeed(split, {"items": list(range(30))})
    queue = engine.keys.shard_of(wid).queue("")
    assert engine.redis.zcard(queue) == 5
    assert engine.pause(wid) == 5
    assert engine.redis.zcard(queue) == 0
    assert engine.release(wid) == 5
    running = hand.claim(count=2)
    assert engine.cancel(wid) >= 1
    assert engine.redis.zcard(queue) == 0
    for t in running:  # running items finish and are recorded; nothing more starts
        hand.succeed(t, 1)
    assert engine.status(wid).state == "cancelled"
    stats = engine.stats().tasks
    assert stats["ready"] == stats["running"] == stats["waiting"] == 0
    engine.cleanup(wid)
    assert not [k for k in scan_keys(engine.redis) if f":w:{wid}" in k]
    assert sum(engine.stats().tasks.values()) == 0


def test_cleanup_removes_every_key_of_a_map(engine: Engine) -> None:
    wid = engine.push(mapped(concurrency=3))
    run_agent(engine, {"": handler({"items": list(range(10))}, fail={4})})
    assert engine.status(wid).state == "failed"
    assert [k for k in scan_keys(engine.redis) if f":w:{wid}:" in k]  # its items' keys
    engine.cleanup(wid)
    assert not [k for k in scan_keys(engine.redis) if f":w:{wid}" in k]
    assert sum(engine.stats().tasks.values()) == 0


def test_an_expansion_left_half_done_is_finished_by_housekeeping(engine: Engine) -> None:
    wid = engine.push(mapped(concurrency=2))
    hand = Hand(engine)
    [split] = hand.claim()
    # the agent that made the map ready dies before expanding it: report by hand, no expand
    outcome = (split.workflow_id, split.key, split.attempt, "ok", '{"items": [1, 2, 3]}')
    call = engine.store.calls.complete_call(engine.keys.shard_of(wid), hand.id, [outcome])
    reported = engine.store.scripts.run(call)
    assert reported.expand == [(wid, "1")]
    assert engine.redis.zcard(engine.keys.shard_of(wid).queue("")) == 0
    engine.store.calls.expand_due(engine.keys.shard_of(wid))  # housekeeping (no grace in this test)
    assert engine.redis.zcard(engine.keys.shard_of(wid).queue("")) == 2
    # a second expansion of the same map changes nothing
    before = snapshot(engine.redis)
    engine.store.calls.expand(wid, "1")
    assert snapshot(engine.redis) == before
    run_agent(engine, {"": handler({"items": [1, 2, 3]})})
    assert engine.status(wid).task("total").output == [2, 4, 6]


def test_expansions_raced_by_threads_store_each_item_once(engine: Engine) -> None:
    wid = engine.push(mapped(concurrency=10_000))
    hand = Hand(engine)
    [split] = hand.claim()
    items = list(range(5000))
    outcome = (split.workflow_id, split.key, split.attempt, "ok", f'{{"items": {items}}}')
    call = engine.store.calls.complete_call(engine.keys.shard_of(wid), hand.id, [outcome])
    engine.store.scripts.run(call)
    expand = engine.store.calls.expand
    threads = [threading.Thread(target=expand, args=(wid, "1")) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert engine.redis.zcard(engine.keys.shard_of(wid).queue("")) == 5000
    run_agent(engine, {"": handler({"items": items})})
    assert engine.status(wid).task("total").output == [2 * i for i in items]


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"concurrency": 0}, "concurrency must be a whole number >= 1"),
        ({"on_empty": "explode"}, "on_empty must be one of"),
        ({"tolerate": "120%"}, "tolerate is at most 100%"),
        ({"tolerate": -1}, "tolerate must be a count"),
        ({"max_items": 10**9}, "max_items is at most"),
    ],
)
def test_bad_maps_are_refused_before_anything_is_written(
    engine: Engine, options: dict[str, Any], says: str
) -> None:
    before = snapshot(engine.redis)
    with pytest.raises(DefinitionError, match=says):
        engine.push(mapped(**options))
    assert snapshot(engine.redis) == before


def test_a_map_over_a_task_that_is_not_its_parent() -> None:
    wf = Workflow("w")
    a = wf.task("a")
    b = wf.task("b")
    t = wf.task("c", after=[b], map=a)
    t.after.remove("a")  # as a hand-built definition might
    with pytest.raises(DefinitionError, match="map over 'a', which is not one of its parents"):
        compile_workflow(wf)


# -- agents that die, a Redis that restarts, and a model of the semantics ----------------

SLOW_HANDLER = """\
import os, time
from pathlib import Path

LOG = Path(os.environ["RF_MAP_LOG"])


def run(task):
    if task.name == "split":
        return {"items": list(range(int(os.environ["RF_MAP_ITEMS"])))}
    if task.name == "count":
        with LOG.open("a") as f:
            f.write(f"{task.item_index}\\n")
        time.sleep(0.02)
        return task.item * 2
    return task.parents["count"]
"""


def test_an_agent_killed_mid_map_loses_no_item(engine: Engine, cli_env: dict, tmp_path) -> None:
    (tmp_path / "slow.py").write_text(SLOW_HANDLER)
    log = tmp_path / "runs.log"
    env = {**cli_env, "RF_MAP_LOG": str(log), "RF_MAP_ITEMS": "200"}
    wid = engine.push(mapped(concurrency=20))
    args = ["--handler", "slow:run", "--lease", "1", "--concurrency", "4"]
    out = tmp_path / "agents.log"
    first = spawn_agent("--id", "doomed", *args, env=env, cwd=tmp_path, log=out)
    try:
        wait_for(lambda: log.exists() and len(log.read_text().split()) >= 30, what="items")
    finally:
        stop_process(first)  # SIGKILL, in the middle of the items
    second = spawn_agent("--id", "heir", *args, "--until-idle", env=env, cwd=tmp_path, log=out)
    assert second.wait(120) == 0, out.read_text()
    st = engine.status(wid)
    assert st.state == "succeeded"
    assert st.task("total").output == [2 * i for i in range(200)]
    ran = [int(x) for x in log.read_text().split()]
    assert set(ran) == set(range(200))  # every item ran; a few ran twice (at-least-once)
    assert_stats_agree_with_items(engine)


def test_a_redis_restart_mid_map_loses_nothing(tmp_path) -> None:
    aof = ["--dir", str(tmp_path), "--appendonly", "yes", "--appendfsync", "always"]
    server = EmbeddedRedis(extra_args=aof).start()
    engine = Engine.connect(server.url)
    again = None
    try:
        wid = engine.push(mapped(concurrency=5))
        hand = Hand(engine)
        [split] = hand.claim()
        hand.succeed(split, {"items": list(range(40))})
        half = hand.claim(count=5)
        for t in half:
            hand.succeed(t, t.item * 2)
        server.stop()  # SIGTERM: a graceful shutdown; every write is in the AOF already
        again = EmbeddedRedis(port=server.port, extra_args=aof).start()
        hand.register()
        run_agent(engine, {"": handler({"items": list(range(40))})})
        assert engine.status(wid).task("total").output == [2 * i for i in range(40)]
    finally:
        engine.close()
        server.stop()
        if again is not None:
            again.stop()


def assert_stats_agree_with_items(engine: Engine) -> None:
    """Nothing left counted as waiting, ready or running once every workflow ended."""
    tasks = engine.stats().tasks
    assert tasks["waiting"] == tasks["ready"] == tasks["running"] == 0, tasks


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    n=st.integers(0, 40),
    window=st.integers(1, 12),
    failing=st.sets(st.integers(0, 39), max_size=6),
    tolerate=st.integers(0, 4),
    attempts=st.integers(1, 2),
    on_empty=st.sampled_from(["succeed", "skip", "fail"]),
)
def test_maps_follow_the_model(
    engine: Engine, n: int, window: int, failing: set[int], tolerate: int, attempts: int,
    on_empty: str,
) -> None:  # fmt: skip
    """Random sizes (0 included), windows, failing items (some recover on their second
    attempt), tolerances: the end states and the gathered list equal a model's."""
    engine.redis.flushall()
    wf = Workflow("model", retry_backoff=0.001)
    split = wf.task("split")
    count = wf.task(
        "count", map=split["items"], concurrency=window, tolerate=tolerate,
        max_attempts=attempts, on_empty=on_empty,
    )  # fmt: skip
    wf.task("total", after=[count])
    wid = engine.push(wf)
    fails_forever = {i for i in failing if i % 2 == 0 or attempts == 1}
    seen: list[int] = []

    def run(task: Task) -> Any:
        if task.name == "split":
            return {"items": list(range(n))}
        if task.name == "count":
            seen.append(task.item_index)
            if task.item in failing and (task.item in fails_forever or task.attempt == 1):
                raise TaskFailed("no")
            return task.item
        return task.parents["count"]

    run_agent(engine, {"": run})
    st_ = engine.status(wid)
    # the model
    bad = {i for i in fails_forever if i < n}
    if n == 0:
        want = {"succeed": ("succeeded", "succeeded", "succeeded"),
                "skip": ("skipped", "skipped", "succeeded"),
                "fail": ("failed", "upstream_failed", "failed")}[on_empty]  # fmt: skip
    elif len(bad) <= tolerate:
        want = ("succeeded", "succeeded", "succeeded")
    else:
        want = ("failed", "upstream_failed", "failed")
    assert (st_.task("count").state, st_.task("total").state, st_.state) == want
    assert set(seen) == set(range(n))  # every item ran (no gather before all ended)
    if want[1] == "succeeded" and n:
        assert st_.task("total").output == [None if i in bad else i for i in range(n)]
    assert_stats_agree_with_items(engine)


def test_one_failed_item_runs_again(engine: Engine) -> None:
    lenient = engine.push(mapped(tolerate=5, concurrency=3))
    strict = engine.push(mapped(concurrency=3))
    run_agent(engine, {"": handler({"items": list(range(6))}, fail={2, 4})})
    assert engine.status(lenient).state == "succeeded"
    assert engine.status(strict).task("count").state == "failed"
    with pytest.raises(StateError, match="only a failed item can be retried"):
        engine.retry(strict, ["count[1]"])
    with pytest.raises(NotFoundError, match="has no task 'nope\\[1\\]'"):
        engine.retry(strict, ["nope[1]"])
    with pytest.raises(NotFoundError, match="task 'split' is not a map, so 'split\\[1\\]'"):
        engine.retry(strict, ["split[1]"])
    seen: list[int] = []
    assert engine.retry(strict, ["count[2]"]) >= 1  # the map runs again for it
    run_agent(engine, {"": handler({"items": list(range(6))}, fail={4}, seen=seen)})
    assert seen == [2]
    st_ = engine.status(strict)
    assert st_.task("count").state == "failed" and st_.task("count").error == "1 of 6 items failed"
    assert engine.retry(strict, ["count.4"]) >= 1  # as the console names items
    run_agent(engine, {"": handler({"items": list(range(6))}, seen=seen)})
    assert seen == [2, 4]
    st_ = engine.status(strict)
    assert st_.state == "succeeded"
    assert st_.task("total").output == [0, 2, 4, 6, 8, 10]


def test_one_report_of_items_mixes_successes_a_failure_and_late_results(engine: Engine) -> None:
    """A completion that carries several items of one map (as agents send them), some
    succeeding, one failing, and the late results of items handed on to another agent:
    each is recorded or rejected as it would be alone, and the map's counts agree."""
    wid = engine.push(mapped(concurrency=10, max_attempts=1))
    doomed, hand = Hand(engine, "doomed"), Hand(engine, "hand")
    [split] = doomed.claim()
    doomed.succeed(split, {"items": list(range(6))})
    held = doomed.claim(count=2)
    doomed.expire()
    engine.maintain()  # the lost lease: housekeeping puts its two items back
    items = hand.claim(count=10)
    assert sorted(t.item for t in items) == list(range(6))
    assert {t.attempt for t in items if t.item in {h.item for h in held}} == {2}
    shard = engine.keys.shard_of(wid)
    late = [(t.workflow_id, t.key, t.attempt, "ok", json.dumps(-1)) for t in held]
    now = [
        (t.workflow_id, t.key, t.attempt, "err" if t.item == 3 else "ok", json.dumps(t.item))
        for t in sorted(items, key=lambda t: t.item)
    ]
    # the late results first, while the newer attempts run
    codes = engine.store.scripts.run(engine.store.calls.complete_call(shard, "doomed", late)).codes
    assert codes == [0, 0]
    codes = engine.store.scripts.run(engine.store.calls.complete_call(shard, "hand", now)).codes
    assert codes == [1] * 6
    st_ = engine.status(wid)
    assert st_.task("count").state == "failed"  # item 3 failed, none tolerated
    assert st_.task("count").error == "1 of 6 items failed"
    rejected = [e.data for e in engine.events() if e.kind == "item.rejected"]
    assert sorted((d["item"], d["agent"], d["attempt"]) for d in rejected) == sorted(
        (t.item_index, "doomed", 1) for t in held
    )
    assert_stats_agree_with_items(engine)
