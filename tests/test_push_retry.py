"""A push survives a lost connection: it is sent again, and a call whose reply was lost is
not applied twice (its push token)."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from engine_helpers import assert_stats_agree
from test_agent import sabotage

from engine import EmbeddedRedis, Engine, Workflow
from engine.store.codec import compile_workflow


def small(name: str = "w") -> Workflow:
    wf = Workflow(name)
    a = wf.task("a")
    wf.task("b", after=[a])
    return wf


def test_the_same_push_call_twice_stores_one_workflow(engine: Engine) -> None:
    shard = engine.keys.shard(0)
    call = engine.store.calls.push_call(
        shard, [(compile_workflow(small()), "")], "tok-1", "me@here"
    )
    first = engine.store.scripts.run(call)
    again = engine.store.scripts.run(call)
    assert first == again and len(first) == 1
    assert engine.count() == 1
    other = engine.store.scripts.run(
        engine.store.calls.push_call(shard, [(compile_workflow(small()), "")], "tok-2", "me@here")
    )
    assert other != first and engine.count() == 2
    assert_stats_agree(engine)


@pytest.mark.parametrize("after_running", [True, False])
def test_a_push_whose_connection_drops_is_sent_again_once(
    engine: Engine, after_running: bool
) -> None:
    fired = sabotage(engine, "push", after_running=after_running)
    ids = engine.push_many([small("x"), small("y"), small("x")])
    assert fired
    assert len(ids) == len(set(ids)) == 3
    assert engine.count() == 3  # not 6: the calls that ran were not applied again
    assert sorted(s.name for s in engine.summaries(ids)) == ["x", "x", "y"]
    assert_stats_agree(engine)


def test_a_push_waits_out_a_redis_restart(tmp_path) -> None:
    aof = ["--dir", str(tmp_path), "--appendonly", "yes", "--appendfsync", "always"]
    server = EmbeddedRedis(extra_args=aof).start()
    engine = Engine.connect(server.url, push_retry_s=20)
    engine.push(small())
    server.stop()
    pushed: list[str] = []
    # the push runs in a thread; the server restarts from this one (a redis-server dies
    # with the thread that started it)
    t = threading.Thread(target=lambda: pushed.append(engine.push(small("after"))))
    began = time.monotonic()
    t.start()
    time.sleep(1.0)
    again = EmbeddedRedis(port=server.port, extra_args=aof).start()
    try:
        t.join(30)
        assert pushed, "the push gave up"
        assert time.monotonic() - began >= 1.0  # it waited for the server
        assert engine.status(pushed[0]).name == "after"
        assert engine.count() == 2
    finally:
        engine.close()
        again.stop()


def test_a_push_gives_up_after_its_retry_time() -> None:
    server = EmbeddedRedis().start()
    engine = Engine.connect(server.url, push_retry_s=0.5)
    server.stop()
    with pytest.raises(redis.ConnectionError):
        engine.push(small())
    engine.close()


def ran_nothing_first(monkeypatch: pytest.MonkeyPatch, reply: Exception, times: int) -> list[int]:
    """Make a push batch's first call come back ``reply`` (the call not sent, as a shard
    failing over answers) for the first ``times`` sends, the batch's other calls sent for
    real; returns the number of calls of each send."""
    from engine.store.scripts import ScriptBatch

    real = ScriptBatch.execute
    sends: list[int] = []

    def flaky(self: ScriptBatch) -> list:
        sends.append(len(self.calls))
        if len(sends) > times:
            return real(self)
        first, self.calls = self.calls[0], self.calls[1:]
        try:
            out = real(self)
        finally:
            self.calls.insert(0, first)
        return [reply, *out]

    monkeypatch.setattr(ScriptBatch, "execute", flaky)
    return sends


def test_a_call_a_failing_over_shard_refused_is_sent_again(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("engine.client.PUSH_BATCH", 2)  # three calls in one round trip
    sends = ran_nothing_first(monkeypatch, redis.exceptions.ClusterDownError("down"), 2)
    ids = engine.push_many([small(f"w{n}") for n in range(6)])
    assert sends == [3, 3, 3]
    assert len(ids) == len(set(ids)) == 6
    assert engine.count() == 6  # the calls that ran the first time were not applied again
    assert sorted(s.name for s in engine.summaries(ids)) == [f"w{n}" for n in range(6)]
    assert_stats_agree(engine)


def test_a_refused_call_still_refuses_when_the_retry_time_is_up(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.errors import PartialWriteError

    monkeypatch.setattr("engine.client.PUSH_BATCH", 2)
    monkeypatch.setattr(engine, "push_retry_s", 0.0)
    sends = ran_nothing_first(monkeypatch, redis.exceptions.ClusterDownError("down"), 1)
    with pytest.raises(PartialWriteError) as caught:
        engine.push_many([small(f"w{n}") for n in range(6)])
    assert sends == [3]
    assert "down" in str(caught.value)
    assert engine.count() == 4  # the two calls sent ran; the refused one wrote nothing


def test_a_full_memory_is_reported_not_waited_out(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.errors import PartialWriteError

    monkeypatch.setattr("engine.client.PUSH_BATCH", 2)
    sends = ran_nothing_first(monkeypatch, redis.exceptions.OutOfMemoryError("OOM"), 1)
    with pytest.raises(PartialWriteError):
        engine.push_many([small(f"w{n}") for n in range(6)])
    assert sends == [3]
    assert engine.count() == 4
