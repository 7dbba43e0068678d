"""Every state transition (the Lua scripts) on a real Redis, step by step."""

from __future__ import annotations

import pytest
from engine_helpers import (
    Hand,
    assert_stats_agree,
    keys_on_one_shard,
    run_agent,
    snapshot,
    traces_of,
    wait_for,
)

from engine import Engine, NotFoundError, StateError, Task, Workflow
from engine.store import reads as client_module
from engine.store.codec import definition as definition_codec


def diamond(name: str = "diamond", **kw: object) -> Workflow:
    """a -> (b, c) -> d"""
    wf = Workflow(name, **kw)  # type: ignore[arg-type]
    a = wf.task("a", payload="A")
    b = wf.task("b", payload="B", after=[a])
    c = wf.task("c", payload="C", after=[a])
    wf.task("d", payload="D", after=[b, c])
    return wf


def states(engine: Engine, wid: str) -> dict[str, str]:
    return {t.name: t.state.value for t in engine.status(wid).tasks}


def queued(engine: Engine, task_type: str = "") -> list[str]:
    return [
        m
        for shard in engine.keys.all_shards()
        for m in engine.redis.zrange(shard.queue(task_type), 0, -1)
    ]


# -- push and claim ---------------------------------------------------------------------


def test_push_stores_roots_ready_and_the_rest_waiting(engine: Engine) -> None:
    wid = engine.push(diamond())
    st = engine.status(wid)
    assert (st.state, st.name, st.total) == ("running", "diamond", 4)
    assert states(engine, wid) == {"a": "ready", "b": "waiting", "c": "waiting", "d": "waiting"}
    assert st.task("d").parents == ["b", "c"] and st.task("a").children == ["b", "c"]
    assert queued(engine) == [f"{wid}:0"]
    assert engine.list() and engine.list()[0].id == wid
    assert engine.list(name="diamond")[0].id == wid
    assert engine.names() == [("diamond", 1)]
    assert_stats_agree(engine)


def test_invalid_push_writes_nothing(engine: Engine) -> None:
    good = diamond()
    bad = Workflow("bad")
    bad.task("x", after=["y"])
    before = snapshot(engine.redis)  # empty but for a cluster's stored layout
    with pytest.raises(Exception, match="unknown task 'y'"):
        engine.push_many([good, bad])
    assert snapshot(engine.redis) == before


def test_priority_then_older_workflow_first(engine: Engine) -> None:
    older = Workflow("older")
    for name, pri in (("o-low", -5), ("o-mid", 0), ("o-high", 7)):
        older.task(name, priority=pri)
    newer = Workflow("newer")
    for name, pri in (("n-high", 7), ("n-top", 9), ("n-mid", 0)):
        newer.task(name, priority=pri)
    # the order holds within a shard's queue: both pushed to one shard (by their keys)
    first, second = keys_on_one_shard(engine, 2)
    engine.push(older, key=first)
    engine.push(newer, key=second)
    hand = Hand(engine)
    order = [hand.claim_one().name for _ in range(6)]
    assert order == ["n-top", "o-high", "n-high", "o-mid", "n-mid", "o-low"]
    assert hand.claim() == []


def test_claim_is_batched_and_ordered(engine: Engine) -> None:
    wf = Workflow("many")
    for i in range(10):
        wf.task(f"t{i}", priority=i)
    engine.push(wf)
    hand = Hand(engine)
    batch = hand.claim(count=4)
    assert [t.name for t in batch] == ["t9", "t8", "t7", "t6"]
    assert all(t.attempt == 1 for t in batch)
    assert len(hand.claim(count=100)) == 6


def test_types_route_to_their_queues(engine: Engine) -> None:
    wf = Workflow("typed")
    wf.task("x1", type="x")
    wf.task("y1", type="y")
    wf.task("plain")
    engine.push(wf)
    hand = Hand(engine)
    assert [t.name for t in hand.claim("y")] == ["y1"]
    assert [t.name for t in hand.claim("x")] == ["x1"]
    assert [t.name for t in hand.claim("")] == ["plain"]
    assert engine.stats().queued == {"": 0, "x": 0, "y": 0}


def test_claim_without_a_lease_is_refused(engine: Engine) -> None:
    engine.push(diamond())
    hand = Hand(engine)
    hand.expire()
    engine.maintain()
    with pytest.raises(Exception, match="RFLEASE"):
        hand.claim()
    assert hand.heartbeat() == 0
    hand.register()
    assert [t.name for t in hand.claim()] == ["a"]


# -- outcomes -----------------------------------------------------------------------------


def test_outputs_reach_children_and_the_workflow_succeeds(engine: Engine) -> None:
    wid = engine.push(diamond())
    hand = Hand(engine)
    a = hand.claim_one()
    assert (a.name, a.payload, a.parents) == ("a", "A", {})
    assert hand.succeed(a, {"from": "a"}) == 1
    b, c = sorted(hand.claim(), key=lambda t: t.name)
    assert b.parents == {"a": {"from": "a"}} and c.parents == {"a": {"from": "a"}}
    assert hand.succeed(b, [1, 2]) == 1
    assert hand.claim() == []  # d still waits for c
    assert hand.succeed(c) == 1  # no output
    d = hand.claim_one()
    assert d.parents == {"b": [1, 2], "c": None}
    hand.succeed(d, "done")
    st = engine.status(wid)
    assert st.state == "succeeded" and st.finished_at is not None
    assert st.task("d").output == "done" and st.task("c").output is None
    assert st.task("a").agent == "hand"
    t = st.task("b")
    assert t.ready_at is not None and t.started_at is not None and t.finished_at is not None
    assert t.ready_at <= t.started_at <= t.finished_at
    assert engine.redis.smembers(engine.keys.shard_of(wid).running_of("hand")) == set()
    assert_stats_agree(engine)


def test_failure_marks_descendants_upstream_failed_and_fails_the_workflow_once_nothing_runs(
    engine: Engine,
) -> None:
    wf = Workflow("branches")
    a = wf.task("a")
    b = wf.task("b", after=[a])
    wf.task("b2", after=[b])
    c = wf.task("c")
    wf.task("c2", after=[c])
    wid = engine.push(wf)
    hand = Hand(engine)
    a, c = sorted(hand.claim(), key=lambda t: t.name)
    hand.fail(a, "disk full")
    assert states(engine, wid) == {
        "a": "failed",
        "b": "upstream_failed",
        "b2": "upstream_failed",
        "c": "running",
        "c2": "waiting",
    }
    assert engine.state(wid) == "running"  # the independent branch keeps going
    hand.succeed(c)
    c2 = hand.claim_one()
    assert c2.name == "c2" and engine.state(wid) == "running"
    hand.succeed(c2)
    st = engine.status(wid)
    assert st.state == "failed"
    assert (st.succeeded, st.failed, st.skipped, st.upstream_failed) == (2, 1, 0, 2)
    assert st.task("a").error == "disk full"
    finished = [e for e in engine.events() if e.kind.startswith("workflow.") and e.wid == wid]
    assert [e.kind for e in finished].count("workflow.failed") == 1
    assert_stats_agree(engine)


def test_retries_back_off_exponentially_up_to_max_attempts(engine: Engine) -> None:
    wf = Workflow("flaky", retry_backoff=0.05)
    wf.task("f", max_attempts=3)
    wf.task("g", after=["f"])
    wid = engine.push(wf)
    hand = Hand(engine)
    delayed = engine.keys.shard_of(wid).delayed
    for attempt in (1, 2):
        t = wait_for(lambda: hand.claim(), what="the retry")[0]
        assert t.attempt == attempt
        hand.fail(t, f"boom {attempt}")
        assert engine.redis.zcard(delayed) == 1 and queued(engine) == []
        assert states(engine, wid)["f"] == "ready"
    t = wait_for(lambda: hand.claim(), what="the last retry")[0]
    assert t.attempt == 3
    hand.fail(t, "boom 3")
    st = engine.status(wid)
    assert st.state == "failed"
    f = st.task("f")
    assert (f.state, f.attempts, f.failures, f.error) == ("failed", 3, 3, "boom 3")
    assert st.task("g").state == "upstream_failed"
    delays = [e.data["delay_ms"] for e in reversed(engine.events()) if e.kind == "task.retrying"]
    assert delays == [50, 100]
    assert_stats_agree(engine)


def test_retry_delays_stop_growing_at_retry_backoff_max(engine: Engine) -> None:
    wf = Workflow("flaky", retry_backoff=0.02, retry_backoff_max=0.05)
    wf.task("f", max_attempts=5)
    engine.push(wf)
    hand = Hand(engine)
    for attempt in range(1, 5):
        t = wait_for(lambda: hand.claim(), what="the retry")[0]
        assert t.attempt == attempt
        hand.fail(t, f"boom {attempt}")
    delays = [e.data["delay_ms"] for e in reversed(engine.events()) if e.kind == "task.retrying"]
    assert delays == [20, 40, 50, 50]


def test_a_retried_task_can_succeed(engine: Engine) -> None:
    wf = Workflow("flaky", retry_backoff=0.0)
    wf.task("f", max_attempts=2)
    wid = engine.push(wf)
    hand = Hand(engine)
    hand.fail(hand.claim_one())
    t = wait_for(lambda: hand.claim())[0]
    hand.succeed(t, 42)
    f = engine.status(wid).task("f")
    assert (f.state, f.attempts, f.failures, f.output) == ("succeeded", 2, 1, 42)
    assert f.error is None
    assert engine.state(wid) == "succeeded"


def test_agent_handler_errors_are_stored(engine: Engine) -> None:
    wf = Workflow("errs", retry_backoff=0.01)
    wf.task("bad", max_attempts=2)
    wid = engine.push(wf)

    def handler(task: Task) -> None:
        raise ValueError(f"broken on attempt {task.attempt}")

    agent = run_agent(engine, {"": handler})
    t = engine.status(wid).task("bad")
    assert (t.state, t.attempts, t.failures) == ("failed", 2, 2)
    assert t.error == "ValueError: broken on attempt 2"
    assert agent.processed == 2


# -- steering -----------------------------------------------------------------------------


def test_pause_holds_ready_tasks_and_release_returns_them(engine: Engine) -> None:
    wf = Workflow("steer")
    a = wf.task("a")
    wf.task("b", after=[a])
    wf.task("c", after=[a])
    wf.task("d")
    wid = engine.push(wf)
    hand = Hand(engine)
    running = hand.claim_one()  # a (both a and d are ready; a was defined first)
    assert running.name in {"a", "d"}
    if running.name == "d":
        hand.succeed(running)
        running = hand.claim_one()
    assert engine.pause(wid) >= 0
    assert engine.state(wid) == "paused"
    assert hand.claim() == []  # nothing new starts
    assert hand.succeed(running) == 1  # a running task finishes
    assert {states(engine, wid)[n] for n in ("b", "c")} == {"ready"}  # ready, but held
    assert hand.claim() == [] and queued(engine) == []
    assert engine.stats().tasks["ready"] >= 2
    assert engine.release(wid) >= 2
    assert engine.state(wid) == "running"
    names = {t.name for t in hand.claim()}
    assert {"b", "c"} <= names
    assert_stats_agree(engine)


def test_pause_counts_held_tasks(engine: Engine) -> None:
    wf = Workflow("roots")
    for i in range(3):
        wf.task(f"r{i}")
    wid = engine.push(wf)
    assert engine.pause(wid) == 3
    assert queued(engine) == []
    assert engine.release(wid) == 3
    assert len(queued(engine)) == 3


def test_a_retry_due_while_paused_waits_for_release(engine: Engine) -> None:
    wf = Workflow("flaky", retry_backoff=0.0)
    wf.task("f", max_attempts=2)
    wid = engine.push(wf)
    hand = Hand(engine)
    hand.fail(hand.claim_one())
    engine.pause(wid)
    engine.maintain()  # the backoff is over: promoted, but held
    assert hand.claim() == []
    assert engine.redis.zcard(engine.keys.shard_of(wid).delayed) == 0
    engine.release(wid)
    assert hand.claim_one().attempt == 2


def test_a_task_finishing_after_pause_can_finish_the_workflow(engine: Engine) -> None:
    wf = Workflow("one")
    wf.task("only")
    wid = engine.push(wf)
    hand = Hand(engine)
    t = hand.claim_one()
    engine.pause(wid)
    hand.succeed(t)
    assert engine.state(wid) == "succeeded"
    assert_stats_agree(engine)


def test_cancel_stops_everything_but_running_tasks_finish(engine: Engine) -> None:
    wid = engine.push(diamond())
    other = engine.push(diamond("other"))
    hand = Hand(engine)
    first = hand.claim("", 1)[0]
    assert first.workflow_id == wid
    assert engine.cancel(wid) == 3  # b, c, d
    st = engine.status(wid)
    assert st.state == "cancelled" and st.finished_at is not None
    assert states(engine, wid) == {
        "a": "running",
        "b": "cancelled",
        "c": "cancelled",
        "d": "cancelled",
    }
    assert hand.succeed(first, "late") == 1  # its outcome is recorded
    assert engine.status(wid).task("a").output == "late"
    assert [t.workflow_id for t in hand.claim()] == [other]  # nothing more of wid starts
    assert engine.state(wid) == "cancelled"
    assert_stats_agree(engine)


def test_cancel_when_every_task_is_running(engine: Engine) -> None:
    wid = engine.push(Workflow_one("busy"))
    hand = Hand(engine)
    t = hand.claim_one()
    assert engine.cancel(wid) == 0
    assert engine.state(wid) == "cancelled"
    assert hand.fail(t, "interrupted") == 1
    assert engine.status(wid).task("only").state == "failed"
    assert_stats_agree(engine)


def test_retry_a_lone_failed_task(engine: Engine) -> None:
    wid = engine.push(Workflow_one("lone"))
    hand = Hand(engine)
    hand.fail(hand.claim_one())
    assert engine.retry(wid) == 1
    assert states(engine, wid) == {"only": "ready"}
    hand.succeed(hand.claim_one())
    assert engine.state(wid) == "succeeded"
    assert_stats_agree(engine)


def test_cancel_a_paused_workflow(engine: Engine) -> None:
    wid = engine.push(diamond())
    engine.pause(wid)
    assert engine.cancel(wid) == 4
    assert set(states(engine, wid).values()) == {"cancelled"}
    assert queued(engine) == []
    assert_stats_agree(engine)


def test_retry_a_failed_workflow_with_inputs_unchanged(engine: Engine) -> None:
    wid = engine.push(diamond())
    hand = Hand(engine)
    hand.succeed(hand.claim_one(), "a-out")
    b, c = sorted(hand.claim(), key=lambda t: t.name)
    hand.fail(b, "b broke")
    hand.succeed(c, "c-out")
    assert engine.state(wid) == "failed"
    assert engine.retry(wid) == 2  # b failed, d upstream_failed
    st = engine.status(wid)
    assert st.state == "running" and st.finished_at is None
    assert states(engine, wid) == {"a": "succeeded", "b": "ready", "c": "succeeded", "d": "waiting"}
    assert st.task("b").error is None and st.task("b").failures == 0
    b2 = hand.claim_one()
    assert (b2.name, b2.payload, b2.parents, b2.attempt) == ("b", "B", {"a": "a-out"}, 2)
    hand.succeed(b2, "b-out")
    d = hand.claim_one()
    assert d.parents == {"b": "b-out", "c": "c-out"}
    hand.succeed(d)
    assert engine.state(wid) == "succeeded"
    assert_stats_agree(engine)


def test_retry_one_task_while_the_workflow_still_runs(engine: Engine) -> None:
    """An upstream_failed task whose other parent is still running joins the retry."""
    wf = Workflow("partial")
    a = wf.task("a")
    c = wf.task("c")
    wf.task("d", after=[a, c])
    wf.task("e", after=["d"])
    wid = engine.push(wf)
    hand = Hand(engine)
    ta, tc = sorted(hand.claim(), key=lambda t: t.name)
    hand.fail(ta)
    assert states(engine, wid) == {
        "a": "failed", "c": "running", "d": "upstream_failed", "e": "upstream_failed",
    }  # fmt: skip
    assert engine.retry(wid, tasks=["a"]) == 3
    assert states(engine, wid) == {"a": "ready", "c": "running", "d": "waiting", "e": "waiting"}
    hand.succeed(hand.claim_one())
    assert hand.claim() == []  # d still waits for c
    hand.succeed(tc)
    d = hand.claim_one()
    assert d.name == "d"
    hand.succeed(d)
    hand.succeed(hand.claim_one())
    assert engine.state(wid) == "succeeded"
    assert_stats_agree(engine)


def test_retry_one_task_of_a_failed_workflow(engine: Engine) -> None:
    wf = Workflow("two-failures")
    x = wf.task("x")
    wf.task("x2", after=[x])
    y = wf.task("y")
    wf.task("y2", after=[y])
    wid = engine.push(wf)
    hand = Hand(engine)
    for t in hand.claim():
        hand.fail(t)
    assert engine.state(wid) == "failed"
    assert engine.retry(wid, tasks=["x"]) == 2
    assert states(engine, wid) == {
        "x": "ready", "x2": "waiting", "y": "failed", "y2": "upstream_failed",
    }  # fmt: skip
    assert engine.state(wid) == "running"
    hand.succeed(hand.claim_one())
    hand.succeed(hand.claim_one())
    assert engine.state(wid) == "failed"  # y is still failed
    assert_stats_agree(engine)


def test_cleanup_leaves_no_trace(engine: Engine) -> None:
    keep = engine.push(diamond("keep"))
    wid = engine.push(diamond("gone"))
    hand = Hand(engine)
    while True:
        tasks = [t for t in hand.claim() if t.workflow_id == wid]
        if not tasks:
            break
        for t in tasks:
            hand.succeed(t, "x")
    assert engine.state(wid) == "succeeded"
    engine.cleanup(wid)
    assert traces_of(engine, wid) == []
    with pytest.raises(NotFoundError):
        engine.status(wid)
    assert [s.id for s in engine.list()] == [keep]
    assert engine.names() == [("keep", 1)]
    assert_stats_agree(engine)


def test_workflows_with_the_same_tasks_share_one_definition(engine: Engine) -> None:
    one = diamond("one")
    a, b = engine.push(one), engine.push(diamond("two"))  # same tasks, another name
    c, d = engine.push_many([one, one])
    other = diamond("other")
    other.tasks[0].type = "different"
    e = engine.push(other)
    digests = {
        w: engine.redis.hget(engine.keys.shard_of(w).workflow(w), "d") for w in (a, b, c, d, e)
    }
    assert len({digests[w] for w in (a, b, c, d)}) == 1 and digests[e] != digests[a]

    # stored once per shard that holds such a workflow, counting its workflows
    def refs(digest: str) -> int:
        counts = [engine.redis.hget(s.definition(digest), "r") for s in engine.keys.all_shards()]
        return sum(int(r) for r in counts if r is not None)

    assert refs(digests[a]) == 4
    assert engine.status(b).name == "two" and engine.status(e).tasks[0].type == "different"
    hand = Hand(engine)
    while tasks := hand.claim():
        for t in tasks:
            hand.succeed(t)
    for w in (a, b, c):
        engine.cleanup(w)
    assert refs(digests[a]) == 1
    assert engine.status(d).tasks[3].name == "d"
    engine.cleanup(d)
    every = engine.keys.all_shards()
    # its last user took it along
    assert not any(engine.redis.exists(s.definition(digests[a])) for s in every)
    assert engine.redis.exists(engine.keys.shard_of(e).definition(digests[e]))
    assert_stats_agree(engine)


def test_runs_that_differ_in_payloads_alone_share_a_definition(engine: Engine) -> None:
    """A task's payload is the run's: one definition for the tasks, each run's payloads
    in its own hash where they differ from the stored ones, and every claim and status
    gives each run its own."""

    def run(payload: str | None) -> Workflow:
        wf = diamond("paid")
        for t in wf.tasks:
            t.payload = None if payload is None else f"{payload}-{t.name}"
        return wf

    first = engine.push(run("one"))
    same, two, three = engine.push_many([run("one"), run("two"), run("three")])
    shard = engine.keys.shard_of(first)
    digest = engine.redis.hget(shard.workflow(first), "d")
    assert {engine.redis.hget(engine.keys.shard_of(w).workflow(w), "d")
            for w in (same, two, three)} == {digest}  # fmt: skip
    every = engine.keys.all_shards()
    refs = [engine.redis.hget(s.definition(digest), "r") for s in every]
    assert sum(int(r) for r in refs if r is not None) == 4  # one per shard that holds one
    # a run keeps a payload of its own only where its shard's definition holds another
    for w, tag in ((first, "one"), (same, "one"), (two, "two"), (three, "three")):
        home = engine.keys.shard_of(w)
        stored = engine.redis.hget(home.definition(digest), "0P")
        own = engine.redis.hget(home.workflow(w), "0P")
        assert (own is None) == (stored == f'"{tag}-a"'), (w, stored, own)
    bare = engine.push(run(None))  # no payloads: another definition
    assert engine.redis.hget(engine.keys.shard_of(bare).workflow(bare), "d") != digest
    expected = {first: "one", same: "one", two: "two", three: "three", bare: None}
    for w, p in expected.items():
        assert [t.payload for t in engine.status(w).tasks] == [
            None if p is None else f"{p}-{n}" for n in "abcd"
        ]
    hand = Hand(engine)
    seen: dict[tuple[str, str], object] = {}
    while tasks := hand.claim():
        for t in tasks:
            seen[(t.workflow_id, t.name)] = t.payload
            hand.succeed(t)
    assert seen == {
        (w, n): None if p is None else f"{p}-{n}" for w, p in expected.items() for n in "abcd"
    }
    for w in expected:
        assert engine.state(w) == "succeeded"
    assert_stats_agree(engine)


def test_a_definition_stored_anew_shows_its_new_payloads(engine: Engine) -> None:
    """A status keeps definitions between reads, but not their payloads: cleaned up with
    its last run and stored again by a run with other payloads, the definition (same
    digest) shows the new ones."""

    def run(tag: str) -> Workflow:
        wf = Workflow("again")
        wf.task("a", payload=tag)
        return wf

    first = engine.push(run("old"))
    assert engine.status(first).tasks[0].payload == "old"  # its definition kept
    hand = Hand(engine)
    hand.succeed(hand.claim_one())
    engine.cleanup(first)
    second = engine.push(run("new"))
    shard = engine.keys.shard_of(second)
    assert engine.redis.hget(shard.workflow(second), "0P") is None  # the definition's own
    assert engine.status(second).tasks[0].payload == "new"


def test_big_definitions_keep_payloads_per_run_when_packed(engine: Engine) -> None:
    """A definition over PACKED_FIELDS goes to push.lua as JSON, its payloads too; runs
    that differ in payloads share it all the same."""
    from engine.store.codec.definition import PACKED_FIELDS

    def run(tag: str) -> Workflow:
        wf = Workflow("big")
        root = wf.task("root", payload=f"{tag}-root")
        for k in range(PACKED_FIELDS // 4):
            wf.task(f"t{k}", payload={"k": k, "tag": tag}, after=[root])
        return wf

    a, b = engine.push_many([run("a"), run("b")])
    c = engine.push(run("c"))
    digests = {engine.redis.hget(engine.keys.shard_of(w).workflow(w), "d") for w in (a, b, c)}
    assert len(digests) == 1
    for w, tag in ((a, "a"), (b, "b"), (c, "c")):
        status = engine.status(w)
        assert status.tasks[0].payload == f"{tag}-root"
        assert status.tasks[-1].payload == {"k": PACKED_FIELDS // 4 - 1, "tag": tag}
    hand = Hand(engine)
    roots = {t.workflow_id: t.payload for t in hand.claim()}
    assert roots == {a: "a-root", b: "b-root", c: "c-root"}


def test_big_workflows_are_read_in_slices_and_definitions_once(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    wf = Workflow("wide")
    root = wf.task("root", payload={"n": 1})
    for i in range(300):
        wf.task(f"leaf{i}", payload=i, after=[root], max_attempts=2)
    wid = engine.push(wf)
    hand = Hand(engine)
    hand.succeed(hand.claim_one(), "r")
    for t in hand.claim(count=50):
        hand.succeed(t, t.payload * 2)
    whole = engine.status(wid)  # HGETALL
    monkeypatch.setattr(client_module, "BIG_HASH", 16)
    fresh = Engine.connect(engine.url)
    try:
        sliced = fresh.status(wid)  # HSCAN, 16 fields at a time
        assert sliced == whole
        assert sliced.counts == {**sliced.counts, "succeeded": 51, "ready": 250}
        done = [t for t in sliced.tasks if t.state == "succeeded" and t.name != "root"]
        assert len(done) == 50 and all(t.output == t.payload * 2 for t in done)
        assert {t.max_attempts for t in sliced.tasks} == {1, 2}
        for t in hand.claim(count=10):
            hand.succeed(t)
        again = fresh.status(wid)  # the definition from the cache, the rest read anew
        assert again.counts["succeeded"] == 61
        engine.cancel(wid)
        engine.cleanup(wid)
        with pytest.raises(NotFoundError):
            fresh.status(wid)
    finally:
        fresh.close()


def test_a_big_definition_sent_packed_is_stored_as_one_sent_field_by_field(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over PACKED_FIELDS fields a definition goes as one JSON argument: the same hash."""

    wf = Workflow("wide")
    root = wf.task("root", payload={"n": 1, "s": 'q"uo\\te é'})
    for i in range(40):
        wf.task(f'le"af{i}', payload=[i, 0.5, None], after=[root], priority=i % 3)

    def stored() -> tuple[str, dict[str, str]]:
        wid = engine.push(wf)
        shard = engine.keys.shard_of(wid)
        key = shard.definition(engine.redis.hget(shard.workflow(wid), "d"))
        return wid, engine.redis.hgetall(key)

    first, whole = stored()
    shard = engine.keys.shard_of(first)
    engine.redis.delete(shard.definition(engine.redis.hget(shard.workflow(first), "d")))
    engine.cancel(first)  # its definition is gone: only the second runs
    monkeypatch.setattr(definition_codec, "PACKED_FIELDS", 10)
    wid, packed = stored()
    assert packed == whole and len(whole) > 150
    hand = Hand(engine)
    hand.succeed(hand.claim_one(), "r")
    leaves: list[Task] = []
    while got := hand.claim(count=100):  # the shards in turn on a cluster
        leaves += got
    assert {t.workflow_id for t in leaves} == {wid}
    assert {t.name for t in leaves} == {f'le"af{i}' for i in range(40)}
    assert {t.payload[1:] == [0.5, None] for t in leaves} == {True}


def test_a_fan_out_and_fan_in_wider_than_a_lua_unpack(engine: Engine) -> None:
    """9,000 children of one task, all parents of one more: no step passes them all at once."""
    wf = Workflow("wide")
    root = wf.task("root")
    leaves = [wf.task(f"leaf{i}", after=[root]) for i in range(9000)]
    wf.task("gather", after=leaves)
    wid = engine.push(wf)
    hand = Hand(engine)
    assert hand.succeed(hand.claim_one(), "r") == 1
    assert engine.status(wid).counts["ready"] == 9000
    ran = 0
    while tasks := hand.claim(count=2500):
        for t in tasks:
            if t.name == "gather":
                assert len(t.parents) == 9000 and t.parents["leaf8999"] == 8999
            assert hand.succeed(t, t.index - 1 if t.name != "gather" else None) == 1
            ran += 1
    assert ran == 9001
    st = engine.status(wid)
    assert st.state == "succeeded" and st.counts["succeeded"] == 9002
    assert_stats_agree(engine)


def test_cleanup_of_a_cancelled_workflow_with_a_running_task(engine: Engine) -> None:
    wid = engine.push(diamond())
    hand = Hand(engine)
    t = hand.claim_one()
    engine.cancel(wid)
    engine.cleanup(wid)
    assert traces_of(engine, wid) == []
    assert hand.succeed(t) == 0  # its hash is gone: the late outcome is dropped
    assert traces_of(engine, wid) == []
    assert engine.stats().tasks["running"] == 0
    assert_stats_agree(engine)


def test_cleanup_finished_with_older_than(engine: Engine) -> None:
    done = [engine.push(Workflow_one(f"w{i}")) for i in range(3)]
    live = engine.push(Workflow_one("live"))
    hand = Hand(engine)
    for t in hand.claim():
        if t.workflow_id != live:
            hand.succeed(t)
    with pytest.raises(StateError):
        engine.cancel(done[2])  # already succeeded
    assert engine.count_finished() == 3
    assert engine.cleanup_finished(older_than_s=3600) == 0
    assert engine.cleanup_finished() == 3
    for wid in done:
        assert traces_of(engine, wid) == []
    assert engine.state(live) == "running"
    assert_stats_agree(engine)


def test_cleanup_finished_steps_over_index_entries_without_a_workflow(engine: Engine) -> None:
    wid = engine.push(Workflow_one("w"))
    hand = Hand(engine)
    hand.succeed(hand.claim_one())
    engine.redis.zadd(engine.keys.shard_of(wid).by_state("succeeded"), {"999": 0})  # stray entry
    assert engine.cleanup_finished() == 1
    assert traces_of(engine, wid) == []


def test_paused_workflows_are_listed_by_creation(engine: Engine) -> None:
    first = engine.push(Workflow_one("first"))
    second = engine.push(Workflow_one("second"))
    engine.pause(second)
    engine.pause(first)
    assert engine.list_ids(state="paused") == [second, first]  # newest first


def Workflow_one(name: str) -> Workflow:  # noqa: N802 - reads like a constructor
    wf = Workflow(name)
    wf.task("only")
    return wf


def test_retention_cleans_finished_workflows(redis_url: str) -> None:
    # one shard (on a cluster too): the hand claims from shard 0
    with Engine.connect(redis_url, retention_s=0.001, shards=1) as engine:
        old = engine.push(Workflow_one("old"))
        live = engine.push(Workflow_one("live"))
        hand = Hand(engine)
        t_old, t_live = sorted(hand.claim(), key=lambda t: t.workflow_id != old)
        hand.succeed(t_old)
        wait_for(lambda: engine.maintain()[3] == 1, what="retention")
        assert traces_of(engine, old) == []
        assert engine.state(live) == "running"  # only finished workflows go
        assert_stats_agree(engine)
    with Engine.connect(redis_url, retention_s=0) as keep_forever:
        again = Hand(keep_forever)  # the same id: takes back the live task
        assert [t.workflow_id for t in again.taken_back] == [t_live.workflow_id]
        again.succeed(again.taken_back[0])
        assert keep_forever.state(live) == "succeeded"
        assert keep_forever.maintain()[3] == 0
        assert keep_forever.state(live) == "succeeded"


# -- wrong states ---------------------------------------------------------------------------


def test_wrong_state_operations_are_refused(engine: Engine) -> None:
    wid = engine.push(Workflow_one("w"))
    hand = Hand(engine)
    with pytest.raises(StateError, match="only a paused or scheduled workflow can be released"):
        engine.release(wid)
    with pytest.raises(StateError, match="only a failed workflow can be retried"):
        engine.retry(wid)
    with pytest.raises(StateError, match="only a failed task can be retried"):
        engine.retry(wid, tasks=["only"])
    with pytest.raises(StateError, match="only a finished workflow can be cleaned up"):
        engine.cleanup(wid)
    engine.pause(wid)
    with pytest.raises(StateError, match="is paused; only a running workflow can be paused"):
        engine.pause(wid)
    with pytest.raises(StateError):
        engine.cleanup(wid)
    engine.release(wid)
    hand.succeed(hand.claim_one())
    for op in (engine.pause, engine.release, engine.cancel, engine.retry):
        with pytest.raises(StateError, match="is succeeded"):
            op(wid)
    with pytest.raises(StateError, match="its tasks cannot be retried"):
        engine.retry(wid, tasks=["only"])
    engine.cleanup(wid)
    for op in (
        engine.pause,
        engine.release,
        engine.cancel,
        engine.retry,
        engine.cleanup,
        engine.status,
    ):
        with pytest.raises(NotFoundError, match=f"workflow {wid} does not exist"):
            op(wid)
    other = engine.push(Workflow_one("w"))
    with pytest.raises(NotFoundError, match="has no task 'nope'"):
        engine.retry(other, tasks=["nope"])
    engine.cancel(other)
    with pytest.raises(StateError, match="is cancelled"):
        engine.cancel(other)
    assert_stats_agree(engine)


# -- fencing --------------------------------------------------------------------------------


def test_a_zombie_completion_is_rejected(engine: Engine) -> None:
    wid = engine.push(diamond())
    zombie = Hand(engine, "zombie", lease_s=60)
    t1 = zombie.claim_one()
    zombie.expire()
    # one agent reaped (on each shard it registered on), one task requeued
    assert engine.maintain()[:2] == [engine.keys.shards, 1]
    assert zombie.succeed(t1, "stale") == 0  # handed on, not yet re-claimed
    heir = Hand(engine, "heir")
    t2 = heir.claim_one()
    assert (t2.name, t2.attempt) == ("a", 2)
    assert zombie.succeed(t1, "stale") == 0  # the newer attempt owns it
    assert zombie.fail(t1, "stale") == 0
    assert heir.succeed(t2, "fresh") == 1
    a = engine.status(wid).task("a")
    assert (a.output, a.agent, a.attempts, a.failures) == ("fresh", "heir", 2, 0)
    rejected = [e for e in engine.events() if e.kind == "task.rejected"]
    assert {(e.data["agent"], e.data["attempt"]) for e in rejected} == {("zombie", 1)}
    assert_stats_agree(engine)


def test_a_restarted_agent_takes_back_its_tasks_with_a_new_attempt(engine: Engine) -> None:
    wid = engine.push(diamond())
    old = Hand(engine, "same-id")
    t1 = old.claim_one()
    new = Hand(engine, "same-id")  # registers again before the lease ran out
    [t2] = new.taken_back
    assert (t2.workflow_id, t2.name, t2.attempt) == (wid, "a", 2)
    assert old.succeed(t1, "old") == 0  # a lingering older process is fenced off
    assert new.succeed(t2, "new") == 1
    assert engine.status(wid).task("a").output == "new"
    assert_stats_agree(engine)


def test_lost_leases_are_capped(engine: Engine) -> None:
    wid = engine.push(diamond())
    for k in range(3):
        hand = Hand(engine, f"doomed{k}")
        assert hand.claim_one().name == "a"
        hand.expire()
        engine.maintain(max_lost=2)
    st = engine.status(wid)
    assert st.state == "failed"
    assert st.task("a").state == "failed" and "lost" in st.task("a").error
    assert st.task("a").failures == 0  # lost leases are not handler failures
    assert {st.task(n).state for n in "bcd"} == {"upstream_failed"}
    assert_stats_agree(engine)


def test_a_lost_task_of_a_cancelled_workflow_ends_cancelled(engine: Engine) -> None:
    wid = engine.push(diamond())
    hand = Hand(engine, "lost")
    hand.claim_one()
    engine.cancel(wid)
    hand.expire()
    # reaped (on each shard it registered on), but nothing requeued
    assert engine.maintain()[:2] == [engine.keys.shards, 0]
    assert set(states(engine, wid).values()) == {"cancelled"}
    assert engine.redis.hget(engine.keys.shard_of(wid).workflow(wid), "left") == "0"
    assert queued(engine) == []
    assert_stats_agree(engine)


@pytest.mark.parametrize("how", ["restart", "stop"])
def test_an_agent_leaving_a_cancelled_workflows_task_ends_it_cancelled(
    engine: Engine, how: str
) -> None:
    wid = engine.push(diamond())
    hand = Hand(engine, "leaver")
    t = hand.claim_one()
    engine.cancel(wid)
    if how == "restart":
        assert hand.register() == []  # not taken back: its workflow is cancelled
    else:
        hand.stop()
    assert set(states(engine, wid).values()) == {"cancelled"}
    assert engine.stats().tasks["running"] == 0
    assert hand.succeed(t) == 0
    assert_stats_agree(engine)


def test_stop_hands_running_tasks_back(engine: Engine) -> None:
    wid = engine.push(diamond())
    hand = Hand(engine, "leaver")
    t = hand.claim_one()
    hand.stop()
    assert states(engine, wid)["a"] == "ready"
    assert hand.succeed(t) == 0
    assert [a.state for a in engine.agents() if a.id == "leaver"] == ["stopped"]
    assert_stats_agree(engine)


def test_list_by_state_and_name_pages_exactly(engine: Engine) -> None:
    """Both filters: every matching workflow, newest first, however deep in the name index."""
    wids = []
    for k in range(30):
        wf = Workflow("nightly" if k % 3 else "other")
        wf.task("only")
        wids.append(engine.push(wf))
    nightly = [w for k, w in enumerate(wids) if k % 3]
    for w in nightly[:5]:  # the oldest five nightly ones get cancelled
        engine.cancel(w)
    running = [w for w in reversed(nightly) if w not in nightly[:5]]
    assert engine.list_ids(state="running", name="nightly", limit=100) == running
    page2 = engine.list_ids(state="running", name="nightly", offset=10, limit=10)
    assert page2 == running[10:20]
    assert (
        engine.list_ids(state="cancelled", name="nightly", limit=3)
        == list(reversed(nightly[:5]))[:3]
    )
