"""engine.ops.watch and the console's feed: hints from pub/sub and keyspace notifications."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from demos import shapes
from engine import Engine
from engine.ops.watch import EventBatch, KeyChange, Watch, enable_keyspace_events
from redisflow_tui.__main__ import make_engine
from redisflow_tui.data.feed import Changes, Connected, Feed, FeedMessage


@pytest.fixture()
def keyspace_engine(engine: Engine) -> Iterator[Engine]:
    """The test engine; keyspace notifications are switched off again afterwards."""
    before = engine.redis.config_get("notify-keyspace-events")["notify-keyspace-events"]
    yield engine
    engine.redis.config_set("notify-keyspace-events", before)


def flat(hints: list[object]) -> list[object]:
    """Event batches unpacked into their events; keyspace changes as they are."""
    out: list[object] = []
    for h in hints:
        out.extend(h.events() if isinstance(h, EventBatch) else [h])
    return out


def poll_until(watch: Watch, kind: str, timeout: float = 3.0) -> list[object]:
    """Hints until an event of ``kind`` arrived (and a little after)."""
    hints: list[object] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        hints.extend(flat(watch.poll(timeout=0.1)))
        if any(getattr(h, "kind", None) == kind for h in hints):
            hints.extend(flat(watch.poll(timeout=0.1)))
            break
    return hints


# keyspace notifications and CONFIG SET: one Redis's (a cluster's console uses events alone)
@pytest.mark.single_redis
def test_enable_keyspace_keeps_existing_flags(keyspace_engine: Engine) -> None:
    keyspace_engine.redis.config_set("notify-keyspace-events", "Ex")
    assert enable_keyspace_events(keyspace_engine)
    flags = keyspace_engine.redis.config_get("notify-keyspace-events")["notify-keyspace-events"]
    assert set("Kh") <= set(flags) and set("Ex") <= set(flags)


# keyspace notifications and CONFIG SET: one Redis's (a cluster's console uses events alone)
@pytest.mark.single_redis
def test_watch_hears_events_and_watched_workflow(keyspace_engine: Engine) -> None:
    with Watch(keyspace_engine, stats=True) as watch:
        assert watch.keyspace
        wid = keyspace_engine.push(shapes.diamond4())
        watch.watch_workflows([wid])
        time.sleep(0.05)
        keyspace_engine.pause(wid)
        hints = poll_until(watch, "workflow.paused")
    kinds = {getattr(h, "kind", None) for h in hints}
    assert "workflow.paused" in kinds
    assert KeyChange("workflow", wid, "hset") in hints
    assert any(isinstance(h, KeyChange) and h.kind == "stats" for h in hints)


def test_watch_without_keyspace_uses_events_only(engine: Engine) -> None:
    with Watch(engine, keyspace=False) as watch:
        wid = engine.push(shapes.diamond4())
        watch.watch_workflows([wid])  # ignored
        hints = poll_until(watch, "workflow.pushed")
    assert [h.kind for h in hints if not isinstance(h, KeyChange)] == ["workflow.pushed"]
    assert not any(isinstance(h, KeyChange) for h in hints)


def test_changes_coalesce() -> None:
    from engine import Event

    c = Changes()
    c.add_event(Event("workflow.pushed", "1", 10.2))
    c.add_event(Event("task.claimed", "1", 10.3, 0, {"agent": "a"}))
    c.add_event(Event("task.succeeded", "1", 10.4, 0))
    c.add_event(Event("task.failed", "2", 11.0, 3, {"error": "x"}))
    c.add_event(Event("agent.dead", "", 11.0, None, {"agent": "a"}))
    assert c.wids == {"1", "2"} and c.pushed == 1 and c.agents and c.stats
    assert c.finished == {10: 1, 11: 1}
    d = Changes(resync=True, pushed=2)
    d.merge(c)
    assert d.resync and d.pushed == 3 and len(d.events) == 5 and d.workflows_changed
    assert not Changes()


def test_feed_connects_coalesces_and_stops(engine: Engine) -> None:
    feed = Feed(engine, keyspace=False, poll_s=0.05)
    stop = threading.Event()
    messages: list[FeedMessage] = []
    thread = threading.Thread(target=feed.run, args=(stop, messages.append))
    thread.start()
    try:
        deadline = time.monotonic() + 3
        while not messages and time.monotonic() < deadline:
            time.sleep(0.02)
        assert isinstance(messages[0], Connected) and not messages[0].reconnect
        assert feed.drain().resync
        ids = engine.push_many([shapes.diamond4() for _ in range(3)])
        deadline = time.monotonic() + 3
        got = Changes()
        while got.pushed < 3 and time.monotonic() < deadline:
            got.merge(feed.drain())
            time.sleep(0.02)
        assert got.pushed == 3 and got.wids == set(ids)
    finally:
        stop.set()
        thread.join(3)
    assert not thread.is_alive()


def test_feed_reports_loss(engine: Engine) -> None:
    dead = make_engine("redis://127.0.0.1:1/0", "rf")
    feed = Feed(dead, keyspace=False)
    stop = threading.Event()
    messages: list[FeedMessage] = []
    thread = threading.Thread(target=feed.run, args=(stop, messages.append))
    thread.start()
    deadline = time.monotonic() + 5
    while not messages and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    thread.join(3)
    assert messages and type(messages[0]).__name__ == "Lost"
    assert not thread.is_alive()
