"""Task timeouts enforced by the engine: an attempt past its deadline is failed (and
retried) by any agent's housekeeping, its late result is rejected, and its agent tells the
handler (task.cancelled) or kills the --exec command."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Any

import pytest
from engine_helpers import Hand, assert_stats_agree, cli, run_agent

from engine import DefinitionError, Engine, StateError, Task, Workflow
from engine.spec.loader import load_text
from engine.store.codec import compile_workflow


def slow(timeout: float = 0.3, attempts: int = 1) -> Workflow:
    wf = Workflow("slow", retry_backoff=0.01)
    a = wf.task("hang", timeout=timeout, max_attempts=attempts)
    wf.task("after", after=[a])
    return wf


def test_a_hung_attempt_is_failed_by_housekeeping_and_its_late_result_rejected(
    engine: Engine,
) -> None:
    wid = engine.push(slow())
    hand = Hand(engine, "hung")
    [task] = hand.claim()
    assert task.timeout == 0.3
    hand.heartbeat()  # the agent is alive: only the timeout can end this attempt
    engine.maintain()
    assert engine.state(wid) == "running"  # not yet past its deadline
    time.sleep(0.35)
    engine.maintain()
    st = engine.status(wid)
    assert st.state == "failed"
    assert st.task("hang").error == "timed out after 0.3s (the task's timeout)"
    assert st.task("after").state in ("skipped", "upstream_failed")
    assert hand.succeed(task, "too late") == 0  # rejected by the fencing token
    assert engine.redis.zcard(engine.keys.shard_of(wid).timeouts) == 0
    assert_stats_agree(engine)


def test_a_timed_out_attempt_is_retried_elsewhere(engine: Engine) -> None:
    wid = engine.push(slow(attempts=2))
    hand = Hand(engine, "hung")
    [first] = hand.claim()
    time.sleep(0.35)
    engine.maintain()
    time.sleep(0.05)  # its retry backoff
    attempts: list[int] = []
    run_agent(engine, {"": lambda t: attempts.append(t.attempt)}, agent_id="healthy")
    assert engine.state(wid) == "succeeded"
    assert attempts == [2, 1]  # hang's second attempt, then after
    assert hand.succeed(first, "late") == 0


def test_a_handler_is_told_through_cancelled(engine: Engine) -> None:
    wid = engine.push(slow(timeout=0.3))
    seen: dict[str, Any] = {}

    def handler(task: Task) -> Any:
        if task.name == "hang":
            seen["told"] = task.cancelled.wait(5)  # set at the deadline by the agent
            return "gave up"
        return None

    run_agent(engine, {"": handler}, maintain_s=0.1)
    assert seen == {"told": True}
    st = engine.status(wid)
    assert st.state == "failed" and "timed out" in (st.task("hang").error or "")


def test_an_async_handler_is_cancelled_at_its_timeout(engine: Engine) -> None:
    wid = engine.push(slow(timeout=0.2))
    cancelled = threading.Event()

    async def handler(task: Task) -> Any:
        if task.name == "hang":
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                cancelled.set()
                raise
        return None

    began = time.monotonic()
    run_agent(engine, {"": handler})
    assert time.monotonic() - began < 5
    assert cancelled.is_set()
    assert "timed out after 0.2s" in (engine.status(wid).task("hang").error or "")


@pytest.mark.same_on_cluster
def test_an_exec_command_past_its_timeout_is_killed(
    engine: Engine, cli_env: dict, tmp_path
) -> None:
    f = tmp_path / "w.yaml"
    f.write_text("name: sleepy\ntasks:\n  - name: nap\n    timeout: 500ms\n")
    wid = cli("push", str(f), env=cli_env).stdout.strip()
    mark = tmp_path / "survived"
    script = f"import time; time.sleep(3); open({str(mark)!r}, 'w').write('x')"
    began = time.monotonic()
    out = cli(
        "--id", "ex", "--exec", f"{sys.executable} -c \"{script}\"", "--until-idle",
        tool="redisflow-agent", env=cli_env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert time.monotonic() - began < 3
    time.sleep(3)
    assert not mark.exists()  # the command was killed, not left running
    assert "timed out after 0.5s" in (engine.status(wid).task("nap").error or "")


def test_timeouts_of_items_and_steps(engine: Engine) -> None:
    wf = Workflow("mapped")
    split = wf.task("split")
    steps = Workflow("s")
    steps.task("quick", timeout=5)
    wf.task("each", map=split, steps=steps, tolerate=1)
    # long enough that item 0 (which returns at once) never meets it on a loaded machine
    wf.task("plain", map=split, timeout=1.5, tolerate=1)
    wid = engine.push(wf)
    got: list[Any] = []

    def run(task: Task) -> Any:
        if task.name == "split":
            return [0, 1]
        got.append((task.name, task.timeout))
        if task.name == "plain" and task.item == 1:
            task.cancelled.wait(30)
        return task.item

    run_agent(engine, {"": run}, concurrency=4, maintain_s=0.1)
    st = engine.status(wid)
    assert st.state == "succeeded"
    assert sorted(got) == [("plain", 1.5), ("plain", 1.5), ("quick", 5.0), ("quick", 5.0)]
    [failed] = engine.items(wid, "plain", state="failed")
    assert failed.index == 1 and "timed out" in (failed.error or "")


@pytest.mark.parametrize(
    "value, says",
    [(0, "above 0"), (-1, "above 0"), ("soon", "is not a duration"), (True, "timeout must be")],
)
def test_bad_timeouts_are_refused(value: Any, says: str) -> None:
    with pytest.raises(DefinitionError, match=says):
        if isinstance(value, str):
            load_text(f"name: w\ntasks:\n  - name: a\n    timeout: {value}\n", "w.yaml")
        else:
            wf = Workflow("w")
            wf.task("a", timeout=value)
            compile_workflow(wf)


def test_a_deadline_ends_a_workflow_failed_and_nothing_more_starts(engine: Engine) -> None:
    wf = Workflow("bounded", deadline=0.4)
    a = wf.task("long")
    wf.task("next", after=[a])
    wid = engine.push(wf)
    hand = Hand(engine)
    [long] = hand.claim()
    engine.maintain()
    assert engine.state(wid) == "running"
    time.sleep(0.45)
    engine.maintain()
    st = engine.status(wid)
    assert (st.state, st.reason) == ("failed", "deadline")
    assert st.task("next").state == "cancelled"
    assert hand.succeed(long, "done") == 1  # a running task's outcome is still recorded
    assert engine.status(wid).task("next").state == "cancelled"  # and starts nothing
    assert [e.data for e in engine.events(50) if e.kind == "workflow.failed"] == [
        {"error": "deadline"}
    ]
    with pytest.raises(StateError, match="failed past its deadline"):
        engine.retry(wid)
    assert_stats_agree(engine)


def test_a_deadline_counts_from_a_scheduled_start_and_reads_from_yaml(engine: Engine) -> None:
    [wf] = load_text("name: w\ndeadline: 300ms\ntasks:\n  - name: a\n", "w.yaml")
    assert wf.deadline == 0.3
    wid = engine.push(wf, start_in=0.5)
    time.sleep(0.4)
    engine.maintain()
    assert engine.state(wid) == "scheduled"  # its deadline has not begun
    time.sleep(0.15)
    engine.maintain()  # starts it; its deadline runs from now
    assert engine.state(wid) == "running"
    time.sleep(0.35)
    engine.maintain()
    assert engine.status(wid).reason == "deadline"
    bad = Workflow("w", deadline=-1)
    bad.task("a")
    with pytest.raises(DefinitionError, match="deadline must be"):
        engine.push(bad)


def test_a_delay_holds_a_task_after_its_parents_and_a_root_after_the_start(
    engine: Engine,
) -> None:
    wf = Workflow("waits")
    a = wf.task("first", delay=0.3)
    wf.task("then", after=[a], delay=0.3)
    wid = engine.push(wf)
    hand = Hand(engine)
    assert hand.claim() == []  # the root waits out its delay
    st = engine.status(wid).task("first")
    assert st.state == "ready" and st.ready_at is not None and st.ready_at > time.time()
    time.sleep(0.35)
    [first] = hand.claim()
    hand.succeed(first)
    assert hand.claim() == []  # its child waits too
    assert engine.pause(wid) == 0
    time.sleep(0.35)
    assert hand.claim() == []  # held while paused
    engine.release(wid)
    engine.maintain()
    time.sleep(0.05)
    [then] = hand.claim()
    hand.succeed(then)
    assert engine.state(wid) == "succeeded"


def test_a_delayed_task_can_be_cancelled_and_bad_delays_are_refused(engine: Engine) -> None:
    [wf] = load_text("name: w\ntasks:\n  - name: a\n    delay: 10m\n", "w.yaml")
    assert wf.tasks[0].delay == 600
    wid = engine.push(wf)
    assert engine.cancel(wid) == 1
    assert engine.redis.zcard(engine.keys.shard_of(wid).delayed) == 0
    for bad, says in ((-1, "delay must be"), ("soon", "is not a duration")):
        with pytest.raises(DefinitionError, match=says):
            if isinstance(bad, str):
                load_text(f"name: w\ntasks:\n  - name: a\n    delay: {bad}\n", "w.yaml")
            else:
                w = Workflow("w")
                w.task("a", delay=bad)
                compile_workflow(w)
    m = Workflow("w")
    s = m.task("s")
    m.task("m", map=s, delay=5)
    with pytest.raises(DefinitionError, match="a map cannot have a delay"):
        compile_workflow(m)
