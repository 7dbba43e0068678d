"""Signals kept for waits not reached yet, on a real redis-server: each run and name has a
mailbox (a Redis list) capped by count and by bytes, read in arrival order, deleted when
the run ends; an earlier release's kept list is moved into it when first touched. Who
sent a signal is recorded as claimed and as authenticated, in status and events."""

from __future__ import annotations

import getpass
import json
import re

import pytest
from engine_helpers import cli, run_agent, scan_keys
from redis.crc import key_slot

from engine import Engine, StateError, Workflow
from engine.runtime.wait_keeper import WaitKeeper


def gate(ship: str = "") -> Workflow:
    """prepare -> approve (waits for signal approve) -> ship (of type ``ship``): a signal
    before prepare has run is kept."""
    wf = Workflow("gate")
    a = wf.task("prepare")
    g = wf.task("approve", after=[a], wait={"signal": "approve"})
    wf.task("ship", type=ship, after=[g])
    return wf


def advance(engine: Engine) -> None:
    """Run the handlers there are to run, then one pass of the wait keeper."""
    run_agent(engine, {"": lambda t: None})
    WaitKeeper(engine).step()


def mailbox(engine: Engine, wid: str | int, name: str = "approve") -> list[str]:
    """The run's kept signals ``name``, oldest first, as stored: record, newline, payload."""
    return engine.redis.lrange(engine.keys.shard_of(wid).mailbox(wid, name), 0, -1)


def payloads(engine: Engine, wid: str | int) -> list[object]:
    return [json.loads(s.split("\n", 1)[1]) for s in mailbox(engine, wid)]


def kept_bytes(engine: Engine, wid: str | int) -> int:
    return int(engine.redis.hget(engine.keys.shard_of(wid).signals(wid), "bytes") or 0)


def kept_anything(engine: Engine, wid: str | int) -> bool:
    """Whether the run keeps signals: a mailbox, its bytes, an earlier release's list."""
    shard = engine.keys.shard_of(wid)
    if scan_keys(engine.redis, f"{shard.prefix}:w:{wid}:sq:*"):
        return True
    return any(f == "bytes" or f.startswith("q:") for f in engine.redis.hkeys(shard.signals(wid)))


def test_early_signals_go_in_a_list_and_are_taken_oldest_first(engine: Engine) -> None:
    # ship is of a type no agent here runs: the run stays running (its end would delete
    # what is kept) whichever wait keeper, the agent's own or the test's, delivers first
    wid = engine.push(gate(ship="later"))
    for k in range(3):
        assert engine.signal(wid, "approve", {"n": k}, comment=f"c{k}").outcome == "kept"
    box = engine.keys.shard_of(wid).mailbox(wid, "approve")
    assert engine.redis.type(box) == "list"
    kept = mailbox(engine, wid)
    assert payloads(engine, wid) == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert kept_bytes(engine, wid) == sum(len(s.encode()) for s in kept)
    # the same slot as the run's hash (one shard: one hash tag)
    assert key_slot(box.encode()) == key_slot(engine.keys.shard_of(wid).workflow(wid).encode())
    advance(engine)
    st = engine.status(wid)
    assert st.task("approve").output == {"n": 0}
    assert st.task("approve").signal["comment"] == "c0"  # type: ignore[index]
    assert len(mailbox(engine, wid)) == 2
    assert kept_bytes(engine, wid) == sum(len(s.encode()) for s in mailbox(engine, wid))


def test_a_full_mailbox_refuses_by_count_and_by_bytes_writing_nothing(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    wid = engine.push(gate())
    for k in range(100):
        engine.signal(wid, "approve", k)
    shard = engine.keys.shard_of(wid)
    before = (mailbox(engine, wid), engine.redis.hgetall(shard.signals(wid)))
    with pytest.raises(StateError, match=f"workflow {wid} already keeps 100 signals approve"):
        engine.signal(wid, "approve", 100)
    assert (mailbox(engine, wid), engine.redis.hgetall(shard.signals(wid))) == before

    engine.max_payload = 1000  # a run keeps at most 8 payloads of that: 8,000 bytes
    wid = engine.push(gate())
    big = "x" * 900
    kept = 0
    while True:
        try:
            engine.signal(wid, "approve", big)
        except StateError as e:
            refusal = str(e)
            break
        kept += 1
    assert kept == 8  # 8 records of ~950 bytes: the ninth would pass 8,000
    assert re.search(r"keeps \d+ bytes of signals .* pass the 8000-byte limit per run", refusal)
    before = (mailbox(engine, wid), engine.redis.hgetall(shard.signals(wid)))
    small = cli("signal", str(wid), "approve", "--data", "1", "--max-payload", "1000", env=cli_env)
    assert small.returncode == 0, small.stderr  # a small one still fits
    over = cli("signal", str(wid), "approve", "--data", json.dumps(big), "--max-payload",
               "1000", env=cli_env)  # fmt: skip
    assert over.returncode == 2
    assert "8000-byte limit per run" in over.stderr
    assert len(mailbox(engine, wid)) == len(before[0]) + 1


def test_signals_kept_by_an_earlier_release_are_moved_and_read_in_order(
    engine: Engine,
) -> None:
    wid = engine.push(gate())
    sk = engine.keys.shard_of(wid).signals(wid)
    old = [{"p": json.dumps(k), "by": "old", "at": 1} for k in range(3)]
    engine.redis.hset(sk, "q:approve", json.dumps(old))  # as the earlier release kept them
    assert engine.signal(wid, "approve", 3).outcome == "kept"
    assert not engine.redis.hexists(sk, "q:approve")
    assert payloads(engine, wid) == [0, 1, 2, 3]
    assert kept_bytes(engine, wid) == sum(len(s.encode()) for s in mailbox(engine, wid))

    wid = engine.push(gate())  # untouched until its wait takes one
    sk = engine.keys.shard_of(wid).signals(wid)
    engine.redis.hset(sk, "q:approve", json.dumps(old))
    advance(engine)
    assert engine.status(wid).task("approve").output == 0
    assert engine.status(wid).task("approve").signal["by"] == "old"  # type: ignore[index]
    assert payloads(engine, wid) == [1, 2]


def test_kept_signals_go_when_the_run_is_cancelled_or_ends(engine: Engine) -> None:
    cancelled = engine.push(gate())
    engine.signal(cancelled, "approve", "early")
    assert kept_anything(engine, cancelled)
    engine.cancel(cancelled)
    assert not kept_anything(engine, cancelled)

    done = engine.push(gate())  # two kept, one taken: the other outlives its wait
    engine.signal(done, "approve", 1)
    engine.signal(done, "approve", 2)
    failed = engine.push(gate())  # prepare fails: its wait is never reached
    engine.signal(failed, "approve", 1)
    sk = engine.keys.shard_of(failed).signals(failed)
    engine.redis.hset(sk, "q:approve", json.dumps([{"p": "0", "by": "old", "at": 1}]))

    def handler(t: object) -> object:
        if t.workflow_id == str(failed):  # type: ignore[attr-defined]
            raise RuntimeError("no")
        return None

    run_agent(engine, {"": handler})
    WaitKeeper(engine).step()
    run_agent(engine, {"": handler})
    assert (engine.state(done), engine.state(failed)) == ("succeeded", "failed")
    assert not kept_anything(engine, done)
    assert not kept_anything(engine, failed)  # an earlier release's list too


def test_who_sent_a_signal_as_claimed_and_as_authenticated(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    wf = Workflow("two")
    wf.task("a", wait={"signal": "go"})
    wf.task("b", wait={"signal": "go"})
    wid = engine.push(wf)
    engine.signal(wid, "go", by="the-ceo", identity="svc-deploy")
    sig = engine.status(wid).task("a").signal
    assert sig is not None
    assert (sig["by"], sig["identity"]) == ("the-ceo", "svc-deploy")
    sent = cli("signal", str(wid), "go", "--by", "the-ceo", env=cli_env)
    assert sent.returncode == 0, sent.stderr
    sig = engine.status(wid).task("b").signal
    assert sig is not None
    assert sig["by"] == "the-ceo"
    assert sig["identity"].startswith(getpass.getuser() + "@")  # the OS user, not --by
    shown = cli("status", str(wid), env=cli_env).stdout
    assert f"signal go by the-ceo (as {sig['identity']})" in shown
    events = [e for e in engine.events(20) if e.kind == "workflow.signal"]
    assert {(e.data["by"], e.data["identity"]) for e in events} == {
        ("the-ceo", "svc-deploy"), ("the-ceo", sig["identity"])
    }  # fmt: skip

    early = engine.push(gate())  # kept, then delivered: who sent it stays with it
    engine.signal(early, "approve", by="alice", identity="svc-deploy")
    advance(engine)
    sig = engine.status(early).task("approve").signal
    assert sig is not None
    assert (sig["by"], sig["identity"]) == ("alice", "svc-deploy")


def test_events_label_a_signal_by_its_fields(engine: Engine, cli_env: dict[str, str]) -> None:
    wid = engine.push(gate())
    engine.signal(wid, "approve", by="alice", identity="svc")
    (e,) = [e for e in engine.events(10) if e.kind == "workflow.signal"]
    assert e.data == {"signal": "approve", "outcome": "kept", "by": "alice", "identity": "svc"}
    shown = cli("events", env=cli_env).stdout
    line = next(t for t in shown.splitlines() if "workflow.signal" in t)
    assert line.endswith(f"{wid} signal=approve outcome=kept by=alice identity=svc"), line
