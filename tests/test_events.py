"""Lifecycle events: the capped stream, live pub/sub and the finished-workflow callbacks."""

from __future__ import annotations

import threading

from engine_helpers import Hand, every_shard_listened, publish, run_agent, wait_for

from engine import Engine, Event, Task, Workflow
from engine.runtime.events import decode_batch


def flaky_and_fine() -> tuple[Workflow, Workflow]:
    bad = Workflow("bad", retry_backoff=0.0)
    bad.task("x", max_attempts=2)
    bad.task("x2", after=["x"])
    good = Workflow("good")
    good.task("y")
    return bad, good


def handler(task: Task) -> str:
    if task.name == "x":
        raise RuntimeError("nope")
    return "ok"


def test_lifecycle_events_reach_the_stream(engine: Engine) -> None:
    bad, good = flaky_and_fine()
    bad_id, good_id = engine.push_many([bad, good])
    run_agent(engine, {"": handler}, "evagent")
    events = list(reversed(engine.events()))  # oldest first
    assert all(isinstance(e, Event) and e.id for e in events)
    seen = [(e.kind, e.wid, e.task) for e in events if e.wid]
    assert ("workflow.pushed", bad_id, None) in seen and ("workflow.pushed", good_id, None) in seen
    for kind in ("task.claimed", "task.retrying", "task.failed"):
        assert (kind, bad_id, 0) in seen, kind
    assert seen.count(("task.claimed", bad_id, 0)) == 2
    assert ("workflow.failed", bad_id, None) in seen
    assert ("task.succeeded", good_id, 0) in seen and ("workflow.succeeded", good_id, None) in seen
    # order within one workflow follows what happened
    mine = [k for k, w, _ in seen if w == bad_id]
    assert mine.index("workflow.pushed") < mine.index("task.claimed") < mine.index("task.retrying")
    assert mine.index("task.failed") < mine.index("workflow.failed") == len(mine) - 1
    failed = next(e for e in events if e.kind == "task.failed")
    assert failed.data == {"error": "RuntimeError: nope"}
    retrying = next(e for e in events if e.kind == "task.retrying")
    assert retrying.data == {"failures": 1, "delay_ms": 0}
    claimed = next(e for e in events if e.kind == "task.claimed")
    assert claimed.data == {"agent": "evagent"}
    agent_kinds = [e.kind for e in events if e.kind.startswith("agent.")]
    assert agent_kinds[0] == "agent.online" and agent_kinds[-1] == "agent.stopped"


def test_events_carry_task_names_while_their_workflow_exists(engine: Engine) -> None:
    bad, good = flaky_and_fine()
    bad_id, good_id = engine.push_many([bad, good])
    run_agent(engine, {"": handler}, "evagent")
    named = {(e.wid, e.task, e.task_name) for e in engine.events() if e.task is not None}
    assert (bad_id, 0, "x") in named
    assert (bad_id, 1, "x2") in named  # task.upstream_failed
    assert (good_id, 0, "y") in named
    # live events (no names yet) are named in one go, from the cache
    fresh = [Event("task.claimed", bad_id, 0.0, 1), Event("task.claimed", good_id, 0.0, 0)]
    engine.name_tasks(fresh)
    assert [e.task_name for e in fresh] == ["x2", "y"]
    engine.cleanup(good_id)
    other = Engine.connect(engine.url)  # a new client: nothing cached
    try:
        gone = [Event("task.claimed", good_id, 0.0, 0)]
        other.name_tasks(gone)  # a workflow cleaned up: no name, no error
        assert gone[0].task_name is None
    finally:
        other.close()


def test_steering_events(engine: Engine) -> None:
    wf = Workflow("steer")
    wf.task("a")
    wid = engine.push(wf)
    engine.pause(wid)
    engine.release(wid)
    engine.cancel(wid)
    engine.cleanup(wid)
    kinds = [e.kind for e in reversed(engine.events()) if e.wid == wid]
    assert kinds == [
        "workflow.pushed",
        "workflow.paused",
        "workflow.released",
        "workflow.cancelled",
        "workflow.cleaned",
    ]
    counts = {e.kind: e.data for e in engine.events() if e.wid == wid}
    # each operator step records who asked (user@host, Engine.actor)
    me = engine.actor
    assert "@" in me
    assert counts["workflow.pushed"] == {"name": "steer", "by": me}
    assert counts["workflow.paused"] == {"count": 1, "by": me}
    assert counts["workflow.released"] == {"count": 1, "by": me}
    assert counts["workflow.cancelled"] == {"count": 1, "by": me}
    assert counts["workflow.cleaned"] == {"count": 1, "by": me}


def test_retry_requeue_and_rejection_events(engine: Engine) -> None:
    wf = Workflow("w")
    wf.task("a")
    wid = engine.push(wf)
    h = Hand(engine, "gone")
    t = h.claim_one()
    h.expire()
    engine.maintain()
    h.register()
    h.succeed(t)
    h.fail(h.claim_one())
    engine.retry(wid)
    kinds = [(e.kind, e.data) for e in reversed(engine.events()) if e.wid == wid]
    assert ("task.requeued", {"agent": "gone"}) in kinds
    assert ("task.rejected", {"agent": "gone", "attempt": 1}) in kinds
    assert ("workflow.retried", {"count": 1, "by": engine.actor}) in kinds
    assert "agent.dead" in [e.kind for e in engine.events()]


def test_events_after_reads_only_newer_events(engine: Engine) -> None:
    wf = Workflow("w")
    wf.task("a")
    engine.push(wf)
    cursor: dict[int, str] = {0: "0"}
    first = engine.events_after(cursor)
    assert [e.kind for e in first] == ["workflow.pushed"]
    assert engine.events_after(cursor, block_ms=10) == []
    wid = engine.push(wf)
    assert [(e.kind, e.wid) for e in engine.events_after(cursor)] == [("workflow.pushed", wid)]


def test_the_stream_is_capped(redis_url: str) -> None:
    with Engine.connect(redis_url, event_cap=10) as engine:
        wf = Workflow("w")
        wf.task("a")
        for _ in range(10):
            engine.push_many([wf] * 30)
        for wid in engine.list_ids(limit=300):
            engine.cancel(wid)  # one event batch each: 310 batches in all
        # MAXLEN ~ trims whole stream nodes (100 entries by default), never below the cap
        for shard in engine.keys.all_shards():  # every shard's stream had over 10 batches
            assert 10 <= engine.redis.xlen(shard.events) <= 10 + 100 + 30


def test_finished_workflow_callbacks(engine: Engine) -> None:
    done: list[str] = []
    failed: list[str] = []
    both = threading.Event()

    def on_complete(wid: str) -> None:
        done.append(wid)
        if done and failed:
            both.set()

    def on_failed(wid: str) -> None:
        failed.append(wid)
        if done and failed:
            both.set()

    with engine.on_workflow_finished(complete=on_complete, failed=on_failed):
        wait_for(lambda: every_shard_listened(engine, lambda s: s.event_channel))
        bad_id, good_id = engine.push_many(list(flaky_and_fine()))
        run_agent(engine, {"": handler})
        assert both.wait(30)
    assert done == [good_id] and failed == [bad_id]


def test_live_listener_sees_every_batch(engine: Engine) -> None:
    got: list[Event] = []
    finished = threading.Event()

    def on_event(event: Event) -> None:
        got.append(event)
        if event.kind == "workflow.succeeded":
            finished.set()

    with engine.listen(on_event):
        wait_for(lambda: every_shard_listened(engine, lambda s: s.event_channel))
        wf = Workflow("w")
        wf.task("a")
        wid = engine.push(wf)
        run_agent(engine, {"": lambda t: None})
        assert finished.wait(30)
    kinds = [e.kind for e in got if e.wid == wid]
    assert kinds == ["workflow.pushed", "task.claimed", "task.succeeded", "workflow.succeeded"]


def test_decode_batch() -> None:
    body = (
        '{"ts":1500,"ev":[["claimed",7,2,"ag"],["succeeded",7,-1,null],["agent.dead",0,-1,"ag"]]}'
    )
    a, b, c = decode_batch(body, "1-0")
    assert (a.kind, a.wid, a.task, a.data, a.ts, a.id) == (
        "task.claimed",
        "7",
        2,
        {"agent": "ag"},
        1.5,
        "1-0",
    )
    assert (b.kind, b.wid, b.task, b.data) == ("workflow.succeeded", "7", None, {})
    assert (c.kind, c.wid, c.data) == ("agent.dead", "", {"agent": "ag"})


def test_listener_survives_a_failing_callback_and_bad_messages(engine: Engine) -> None:
    """A callback that raises, or a non-JSON message, does not stop the listener."""
    got: list[str] = []
    done = threading.Event()

    def callback(event: Event) -> None:
        got.append(event.kind)
        if event.kind == "workflow.cancelled":
            done.set()
        raise RuntimeError("callback bug")

    with engine.listen(callback):
        wait_for(lambda: every_shard_listened(engine, lambda s: s.event_channel))
        for shard in engine.keys.all_shards():
            publish(engine.redis, shard.event_channel, "not json")
        wf = Workflow("w")
        wf.task("a")
        wid = engine.push(wf)
        engine.cancel(wid)
        assert done.wait(5)
    assert got[:1] == ["workflow.pushed"]
    assert "workflow.cancelled" in got
