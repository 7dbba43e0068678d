"""Wait tasks and signals on a real redis-server: a signal before, during and after its
wait is reached; signal ids applied once; timeouts of every kind; sleeps; pause, cancel,
retry and cleanup of a waiting run; the CLI; nothing held by an agent while waiting."""

from __future__ import annotations

import json
import random
import threading

import pytest
from engine_helpers import Hand, assert_stats_agree, cli, run_agent, scan_keys, wait_for

from engine import DefinitionError, Engine, NotFoundError, StateError, Workflow
from engine.runtime.wait_keeper import WaitKeeper
from engine.spec.loader import load_text


def gate(timeout: str | None = None, on_timeout: str = "fail") -> Workflow:
    wf = Workflow("gate")
    a = wf.task("prepare")
    w: dict[str, object] = {"signal": "approve"}
    if timeout is not None:
        w.update(timeout=timeout, on_timeout=on_timeout)
    g = wf.task("approve", after=[a], wait=w)
    wf.task("ship", after=[g])
    return wf


def keep(engine: Engine) -> None:
    """One pass of the wait keeper (what every agent runs on a wake-up)."""
    WaitKeeper(engine).step()


def echo(engine: Engine, seen: list[tuple[str, object]] | None = None) -> None:
    def handler(t: object) -> object:
        if seen is not None:
            seen.append((t.name, t.parents))  # type: ignore[attr-defined]
        return {"done": t.name}  # type: ignore[attr-defined]

    run_agent(engine, {"": handler})


def test_a_signal_ends_the_wait_and_its_payload_is_the_output(engine: Engine) -> None:
    wid = engine.push(gate())
    echo(engine)  # prepare runs; approve is reached; ship waits
    keep(engine)
    st = engine.status(wid)
    assert st.state == "running"
    assert st.task("approve").state == "suspended"
    assert st.task("approve").agent is None
    assert st.task("ship").state == "waiting"
    done = engine.signal(wid, "approve", {"ok": True}, by="alice", comment="looks good")
    assert (done.outcome, done.task) == ("delivered", "approve")
    seen: list[tuple[str, object]] = []
    echo(engine, seen)
    st = engine.status(wid)
    assert st.state == "succeeded"
    assert st.task("approve").output == {"ok": True}
    sig = st.task("approve").signal
    assert sig is not None
    assert (sig["name"], sig["by"], sig["comment"]) == ("approve", "alice", "looks good")
    assert seen and seen[0][0] == "ship"
    assert_stats_agree(engine)


def test_a_signal_sent_before_the_wait_is_reached_is_kept_for_it(engine: Engine) -> None:
    wid = engine.push(gate())
    assert engine.signal(wid, "approve", [1, 2]).outcome == "kept"
    echo(engine)  # prepare runs, then the keeper (in the agent) gives approve its signal
    keep(engine)
    echo(engine)
    st = engine.status(wid)
    assert st.state == "succeeded"
    assert st.task("approve").output == [1, 2]
    assert not engine.redis.exists(engine.keys.shard_of(wid).signals(wid)) or not any(
        k.startswith(b"q:") for k in engine.redis.hkeys(engine.keys.shard_of(wid).signals(wid))
    )


def test_a_signal_to_a_wait_reached_but_not_activated_ends_it(engine: Engine) -> None:
    wf = Workflow("root-wait")
    g = wf.task("approve", wait={"signal": "go"})
    wf.task("after", after=[g])
    wid = engine.push(wf)  # approve is ready (queued for the keeper), never activated
    assert engine.status(wid).task("approve").state == "ready"
    assert engine.signal(wid, "go").outcome == "delivered"
    keep(engine)  # the queue entry is gone: nothing to activate
    echo(engine)
    assert engine.state(wid) == "succeeded"
    assert engine.status(wid).task("approve").attempts == 1


def test_a_signal_id_is_applied_once(engine: Engine) -> None:
    wf = Workflow("two")
    wf.task("a", wait={"signal": "s"})
    wf.task("b", wait={"signal": "s"})
    wid = engine.push(wf)
    first = engine.signal(wid, "s", 1, signal_id="x")
    again = engine.signal(wid, "s", 2, signal_id="x")
    assert (first.outcome, first.task) == ("delivered", "a")
    assert (again.outcome, again.task) == ("duplicate:delivered", "a")
    st = engine.status(wid)
    assert st.task("a").output == 1
    assert st.task("b").state == "ready"  # the repeat reached nothing
    assert engine.signal(wid, "s", 3, signal_id="y").task == "b"
    assert engine.state(wid) == "succeeded"


def test_signals_in_random_order_each_reach_one_wait(engine: Engine) -> None:
    rng = random.Random(7)
    wf = Workflow("many")
    prev = wf.task("start")
    names = [f"s{k}" for k in range(6)]
    for n in names:
        prev = wf.task(n, after=[prev], wait={"signal": n})
    wid = engine.push(wf)
    order = names[:]
    rng.shuffle(order)
    for n in order:  # most arrive before their wait is reached: kept
        engine.signal(wid, n, n.upper())
    for _ in range(len(names) + 1):
        echo(engine)
        keep(engine)
    st = engine.status(wid)
    assert st.state == "succeeded"
    assert [st.task(n).output for n in names] == [n.upper() for n in names]
    assert_stats_agree(engine)


@pytest.mark.parametrize(
    ("on_timeout", "approve", "ship", "final"),
    [
        ("fail", "failed", "upstream_failed", "failed"),
        ("succeed", "succeeded", "succeeded", "succeeded"),
        ("skip", "skipped", "skipped", "succeeded"),
    ],
)
def test_a_timeout_ends_the_wait_as_on_timeout_says(
    engine: Engine, on_timeout: str, approve: str, ship: str, final: str
) -> None:
    wid = engine.push(gate(timeout="0.001", on_timeout=on_timeout))
    echo(engine)
    wait_for(lambda: (keep(engine), engine.status(wid).task("approve").state)[1] == approve)
    echo(engine)
    st = engine.status(wid)
    assert (st.task("ship").state, st.state) == (ship, final)
    sig = st.task("approve").signal
    assert sig is not None and sig["timed_out"] is True
    if on_timeout == "fail":
        assert st.task("approve").error == "no signal approve within 0.001s"
    assert engine.redis.zcard(engine.keys.shard_of(wid).timers) == 0
    assert_stats_agree(engine)


def test_a_signal_after_the_timeout_is_refused(engine: Engine) -> None:
    wid = engine.push(gate(timeout="0.001", on_timeout="skip"))
    echo(engine)
    wait_for(lambda: (keep(engine), engine.state(wid))[1] == "succeeded")
    with pytest.raises(StateError, match="only a workflow that has not finished"):
        engine.signal(wid, "approve")


def test_a_sleep_ends_by_the_clock_and_until_in_the_past_at_once(engine: Engine) -> None:
    wf = Workflow("naps")
    a = wf.task("nap", wait={"sleep": 0.001})
    b = wf.task("alarm", wait={"until": "2000-01-01T00:00Z"})
    wf.task("after", after=[a, b])
    wid = engine.push(wf)
    st = engine.status(wid)
    assert st.task("nap").wait == {"sleep": 0.001}
    wait_for(lambda: (keep(engine), engine.status(wid).task("nap").state)[1] == "succeeded")
    echo(engine)
    assert engine.state(wid) == "succeeded"


def test_a_rejection_fails_the_wait_and_runs_its_failure_branch(engine: Engine) -> None:
    wf = Workflow("review")
    g = wf.task("approve", wait={"signal": "approve"})
    wf.task("ship", after=[g])
    wf.task("tell", on_failure=[g])
    wid = engine.push(wf)
    keep(engine)
    engine.signal(wid, "approve", reject=True, by="bob", comment="not yet")
    echo(engine)
    st = engine.status(wid)
    assert st.task("approve").state == "failed"
    assert st.task("approve").error == "rejected by bob: not yet"
    assert st.task("tell").state == "succeeded"
    assert st.task("ship").state == "upstream_failed"


def test_refusals_name_what_is_wrong_and_write_nothing(engine: Engine) -> None:
    wid = engine.push(gate())
    before = engine.redis.hgetall(engine.keys.shard_of(wid).workflow(wid))
    with pytest.raises(StateError, match="no task waiting for signal nope .it waits for approve"):
        engine.signal(wid, "nope")
    with pytest.raises(NotFoundError, match="workflow 999 does not exist"):
        engine.signal(999, "approve")
    with pytest.raises(DefinitionError, match="payload must be JSON"):
        engine.signal(wid, "approve", {"x": float("nan")})
    with pytest.raises(DefinitionError, match="signal name"):
        engine.signal(wid, "")
    assert engine.redis.hgetall(engine.keys.shard_of(wid).workflow(wid)) == before
    engine.cancel(wid)
    with pytest.raises(StateError, match="is cancelled"):
        engine.signal(wid, "approve")


def test_pause_holds_a_wait_and_cancel_cleanup_leave_nothing(engine: Engine) -> None:
    wid = engine.push(gate(timeout="1h"))
    echo(engine)
    keep(engine)
    shard = engine.keys.shard_of(wid)
    assert engine.redis.zcard(shard.timers) == 1
    engine.pause(wid)
    engine.signal(wid, "approve", "yes")  # ends the wait; ship is held (paused)
    st = engine.status(wid)
    assert (st.task("approve").state, st.task("ship").state) == ("succeeded", "ready")
    assert engine.redis.zcard(shard.queue("")) == 0
    engine.release(wid)
    echo(engine)
    assert engine.state(wid) == "succeeded"
    wid2 = engine.push(gate(timeout="1h"))
    engine.signal(wid2, "approve", "early")  # kept
    assert engine.redis.exists(engine.keys.shard_of(wid2).signals(wid2))
    engine.pause(wid2)
    engine.cancel(wid2)
    assert engine.status(wid2).task("approve").state == "cancelled"
    engine.cleanup(wid2)
    engine.cleanup(wid)
    for s in engine.keys.all_shards():
        assert scan_keys(engine.redis, f"{s.prefix}:w:*") == set()
        assert engine.redis.zcard(s.timers) == 0
        assert engine.redis.zcard(s.queue("~wait")) == 0
    assert_stats_agree(engine)


def test_a_suspended_wait_is_cancelled_with_its_timer(engine: Engine) -> None:
    wid = engine.push(gate(timeout="1h"))
    echo(engine)
    keep(engine)
    engine.cancel(wid)
    assert engine.status(wid).task("approve").state == "cancelled"
    assert engine.redis.zcard(engine.keys.shard_of(wid).timers) == 0
    assert_stats_agree(engine)


def test_retrying_a_timed_out_wait_suspends_it_again(engine: Engine) -> None:
    wid = engine.push(gate(timeout="0.001"))
    echo(engine)
    wait_for(lambda: (keep(engine), engine.state(wid))[1] == "failed")
    engine.retry(wid)
    st = engine.status(wid)
    assert st.task("approve").state == "ready"
    engine.signal(wid, "approve", "second time")
    echo(engine)
    st = engine.status(wid)
    assert st.state == "succeeded"
    assert st.task("approve").output == "second time"


def test_a_stopped_keeper_acts_no_more(engine: Engine) -> None:
    """stop() returns once a pass under way has ended, and no pass starts after it: an
    agent that returned from run() changes nothing more."""
    keeper = WaitKeeper(engine, backstop_s=0.05)
    entered, release = threading.Event(), threading.Event()
    passes: list[int] = []

    def step() -> float | None:
        passes.append(1)
        entered.set()
        release.wait(5)
        return None

    keeper.step = step  # type: ignore[method-assign]
    thread = keeper.start()
    assert entered.wait(5)
    stopper = threading.Thread(target=keeper.stop)
    stopper.start()
    stopper.join(0.2)
    assert stopper.is_alive()  # the pass under way holds it
    release.set()
    stopper.join(5)
    assert not stopper.is_alive()
    seen = len(passes)
    thread.join(5)
    assert not thread.is_alive() and len(passes) == seen


def test_a_waiting_task_holds_no_agent(engine: Engine) -> None:
    wid = engine.push(gate())
    hand = Hand(engine, "h")
    [prep] = hand.claim()
    hand.succeed(prep, None)
    keep(engine)
    assert hand.claim() == []  # nothing to run while approve waits
    assert engine.status(wid).task("approve").agent is None
    assert engine.redis.scard(engine.keys.shard_of(wid).running_of("h")) == 0


def test_wait_definitions_are_checked(engine: Engine) -> None:
    bad = [
        ({"signal": "a", "sleep": 1}, "exactly one of signal, sleep or until"),
        ({"signal": "a", "on_timeout": "explode", "timeout": 1}, "on_timeout must be one of"),
        ({"sleep": "soon"}, "sleep"),
        ({"until": "tomorrow"}, "until must be a time"),
        ({"signal": "a", "when": 1}, "unknown field 'when'"),
        ({"sleep": 1, "timeout": 2}, "timeout goes with a signal"),
    ]
    for spec, message in bad:
        wf = Workflow("w")
        with pytest.raises(DefinitionError, match=message):
            wf.task("x", wait=spec)
    wf = Workflow("w")
    wf.task("x", type="typed", wait={"signal": "a"})
    with pytest.raises(DefinitionError, match="a wait task runs no handler: it takes no a type"):
        engine.push(wf)
    wf = Workflow("w")
    wf.task("x", type="~mine")
    with pytest.raises(DefinitionError, match="names starting with ~ are the engine's"):
        engine.push(wf)
    with pytest.raises(DefinitionError, match=r"w.yaml:3: task 'x': wait: on_timeout"):
        load_text(
            "name: w\ntasks:\n  - name: x\n    wait: {signal: a, timeout: 1h, on_timeout: no}\n",
            "w.yaml",
        )


def test_the_cli_sends_signals_and_status_shows_waits(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    wid = engine.push(
        load_text(
            "name: gate\ntasks:\n  - name: approve\n"
            "    wait: {signal: approve, timeout: 2d, prompt: Ship it?}\n"
            "  - name: ship\n    after: [approve]\n",
            "gate.yaml",
        )[0]
    )
    keep(engine)
    shown = cli("status", wid, env=cli_env)
    assert "waits for signal approve since" in shown.stdout and "Ship it?" in shown.stdout
    done = cli("signal", wid, "approve", "--data", '{"n": 1}', "--id", "k1", "--json", env=cli_env)
    assert json.loads(done.stdout)["outcome"] == "delivered"
    again = cli("signal", wid, "approve", "--id", "k1", env=cli_env)
    assert "was applied before (delivered)" in again.stdout
    bad = cli("signal", wid, "nope", env=cli_env)
    assert bad.returncode == 2
    assert bad.stderr.strip().endswith("has no task waiting for signal nope (it waits for approve)")
    assert engine.status(wid).task("approve").output == {"n": 1}
