"""Bounds on a ``when:`` condition's cost, on a real Redis with real agents: comprehensions
nested too deep are refused when stored, and an evaluation past its budget is stopped and
fails its task once, its handler never run (evaluated in a worker process, so the agent's
lease heartbeat keeps going meanwhile)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import httpx
import pytest
from engine_helpers import (
    cli,
    one_line_error,
    run_agent,
    snapshot,
    spawn_agent,
    stop_process,
    wait_for,
)
from test_http_server import Client, client  # noqa: F401 - the fixture

from engine import DefinitionError, Engine, Task, Workflow
from engine.spec.condition_pool import ConditionPool
from engine.spec.conditions import MAX_NESTING, nesting

# three comprehensions, one inside another, over 3,000 items: 2.7e10 evaluations (hours)
SLOW = "input.l.all(x, input.l.all(y, input.l.all(z, x + y + z >= 0)))"
# four: refused when stored
DEEP = "input.l.all(a, input.l.all(b, input.l.all(c, input.l.all(d, a == b))))"


DEEP_FILE = f"""\
name: deep
tasks:
  - name: a
  - name: b
    after: [a]
    when: '{DEEP}'
"""


def test_nesting_counts_comprehensions_inside_one_another() -> None:
    assert nesting(SLOW) == MAX_NESTING == 3
    assert nesting(DEEP) == 4
    assert nesting("input.l.map(x, x).filter(y, y > 0).all(z, z > 1)") == 1  # one after another
    assert nesting('input.l.all(x, x == "l.all(y, l.all(z, true))")') == 1  # in a string
    assert nesting("input.n > 1 // l.all(x, l.all(y, l.all(z, l.all(w, true))))") == 0
    assert nesting("input.l.all(x, [x].exists(y, (input.l.map(z, z)).all(w, w > y)))") == 3


def test_a_slow_condition_fails_its_task_once_and_no_handler_runs(
    engine: Engine, cli_env: dict[str, str], tmp_path: Path
) -> None:
    """Two agent processes with a short lease: the first to claim the task stops its
    evaluation at the budget and fails the task, not retried; neither runs the handler,
    and the other never takes the task over (one attempt)."""
    runs = tmp_path / "runs"
    script = tmp_path / "handler.py"
    script.write_text(f"import sys\nopen({str(runs)!r}, 'a').write(sys.stdin.read() + '\\n')\n")
    wf = Workflow("slow")
    wf.task("check", when=SLOW, max_attempts=5)
    wf.task("after", after=["check"])
    wid = engine.push(wf, {"l": list(range(3000))})
    agents = [
        spawn_agent("--id", f"a{k}", "--exec", f"{sys.executable} {script}", "--lease", "2",
                    "--condition-budget", "1", env=cli_env)  # fmt: skip
        for k in range(2)
    ]
    try:
        wait_for(lambda: engine.status(wid).state.value != "running", 90, "the run to end")
    finally:
        for agent in agents:
            stop_process(agent, signal.SIGKILL)
    st = engine.status(wid)
    check, after = st.tasks
    assert (st.state.value, check.state.value, after.state.value) == (
        "failed", "failed", "upstream_failed"
    )  # fmt: skip
    assert check.attempts == 1
    assert check.error == f"when {SLOW}: exceeded its 1s budget (evaluation stopped; not retried)"
    assert not runs.exists()


def test_an_agent_goes_on_after_a_condition_over_budget(engine: Engine) -> None:
    """In-process: the budget's task fails; the next conditions are decided by a fresh
    evaluator, and plain tasks run."""
    wf = Workflow("after-budget")
    wf.task("slow", when=SLOW)
    wf.task("quick", after=["slow"], trigger="all_done", when="input.l.size() == 3000")
    wf.task("plain", after=["quick"])
    wid = engine.push(wf, {"l": list(range(3000))})
    ran: list[str] = []

    def handler(t: Task) -> None:
        ran.append(t.name)

    run_agent(engine, {"": handler}, condition_budget_s=0.5)
    by = {t.name: t for t in engine.status(wid).tasks}
    assert by["slow"].state.value == "failed" and "exceeded its 0.5s budget" in (
        by["slow"].error or ""
    )
    assert ran == ["quick", "plain"]


def test_comprehensions_nested_too_deep_are_refused_at_push(engine: Engine) -> None:
    wf = Workflow("deep")
    wf.task("a")
    wf.task("b", after=["a"], when=DEEP)
    before = snapshot(engine.redis)
    with pytest.raises(DefinitionError) as e:
        engine.push(wf, {"l": [1]})
    assert str(e.value) == (
        "task 'b': when nests comprehensions (all, exists, exists_one, map, filter) 4 deep; "
        "at most 3: each level multiplies the work by its list's length"
    )
    with pytest.raises(DefinitionError, match="4 deep"):
        engine.put_template(DEEP_FILE)
    assert snapshot(engine.redis) == before


def test_the_cli_and_http_refuse_comprehensions_nested_too_deep(
    engine: Engine,
    cli_env: dict[str, str],
    tmp_path: Path,
    client: Client,  # noqa: F811
) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text(DEEP_FILE)
    before = snapshot(engine.redis)
    for command in (["push", str(path)], ["template", "put", str(path)]):
        r = cli(*command, env=cli_env)
        assert r.returncode == 2, r.stderr
        err = one_line_error(r)
        assert "deep.yaml:4: task 'b': when nests comprehensions" in err and "4 deep" in err
    api: httpx.Client = client()
    body = {"tasks": [{"name": "a"}, {"name": "b", "after": ["a"], "when": DEEP}]}
    r = api.put("/v1/templates/deep", json=body)
    assert r.status_code == 400 and "when nests comprehensions" in r.text and "4 deep" in r.text
    after = snapshot(engine.redis)
    after.pop(engine.keys.shard(0).http_counters, None)
    assert after == before


def test_an_evaluator_that_ended_while_idle_is_replaced() -> None:
    pool = ConditionPool(1, 5.0)
    try:
        assert pool.evaluate("input.n < 2", {"input": {"n": 1}}) == ("ok", True)
        [worker] = pool._idle
        worker.proc.kill()  # from outside, between two evaluations
        worker.proc.wait()
        assert pool.evaluate("input.n < 2", {"input": {"n": 3}}) == ("ok", False)
    finally:
        pool.close()
