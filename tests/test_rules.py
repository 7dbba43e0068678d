"""Trigger rules, failure branches and upstream_failed, on a real Redis.

``engine/core/rules.py`` is the reference: its table is run against the Lua half, random
workflows with random rules and forced outcomes are run by real agents and compared
with a model written here from FEATURES.md §2.3's table and with ``engine.plan``.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import (
    ROOT,
    Hand,
    assert_stats_agree,
    cli,
    one_line_error,
    run_agent,
    snapshot,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lua_helpers import run_lua

from engine import DefinitionError, Engine, Task, TaskFailed, Workflow, load_text
from engine.core.rules import FINALLY, RULES, decide, explain, simulate, workflow_result
from engine.spec.definition import plan, resolve, validate
from engine.store.codec import RULE_BASE, compile_workflow

BRANCH = ROOT / "demos" / "branch.yaml"


# -- the table, on both sides -------------------------------------------------------------


def test_the_lua_table_is_the_python_table(engine: Engine) -> None:
    cases = [
        (rule, n, s, f, k)
        for rule in (*RULES, FINALLY)
        for n in range(1, 5)
        for s, f, k in itertools.product(range(n + 1), repeat=3)
        if s + f + k <= n
    ]
    got = run_lua(
        engine,
        """
        local out = {}
        local cases = cjson.decode(ARGV[3])
        for _, c in ipairs(cases) do
          local packed = c[3] + RB * c[5] + RB2 * c[4]
          local s, f, k = rule_counts(packed)
          out[#out + 1] = {rule_decide(c[1], c[2], s, f, k) or 'wait', packed, s, f, k}
        end
        return cjson.encode(out)
        """,
        json.dumps(cases),
    )
    for (rule, n, s, f, k), (verdict, packed, ls, lf, lk) in zip(
        cases, json.loads(got), strict=True
    ):
        assert verdict == (decide(rule, n, s, f, k) or "wait"), (rule, n, s, f, k)
        assert packed == s + RULE_BASE * k + RULE_BASE**2 * f and (ls, lf, lk) == (s, f, k)


def final_decision(rule: str, s: int, f: int, k: int) -> str:
    """FEATURES.md §2.3's table once every parent has ended (d == n)."""
    n = s + f + k
    return {
        "all_success": "run" if s == n else "upstream_failed" if f else "skipped",
        "all_done": "run",
        "finally": "run",
        "all_failed": "run" if f == n else "skipped",
        "one_success": "run" if s else "upstream_failed" if f else "skipped",
        "one_failed": "run" if f else "skipped",
        "none_failed": "run" if f == 0 else "upstream_failed",
        "none_failed_min_one_success": "upstream_failed" if f else "run" if s else "skipped",
    }[rule]


@pytest.mark.parametrize("rule", [*RULES, FINALLY])
def test_a_decision_never_changes_as_more_parents_end(rule: str) -> None:
    """What decide() says early is what the whole table says once every parent ended,
    whatever the others do: so an end state does not depend on the order of ends."""
    for n in range(1, 6):
        for s, f, k in itertools.product(range(n + 1), repeat=3):
            if s + f + k > n:
                continue
            early = decide(rule, n, s, f, k)
            left = n - s - f - k
            finals = {
                final_decision(rule, s + a, f + b, k + left - a - b)
                for a in range(left + 1)
                for b in range(left - a + 1)
            }
            if early is None:  # undecided, or a rule that must wait for every parent
                assert len(finals) > 1 or finals == {"run"}, (rule, n, s, f, k, finals)
            else:
                assert finals == {early}, (rule, n, s, f, k, finals)


def test_why_lines() -> None:
    states = ["succeeded"] * 3 + ["failed", "waiting"]
    assert explain("all_success", states) == "all_success: 3/5 succeeded, 1 failed, 1 pending"
    assert explain("all_success", states, "upstream_failed") == (
        "all_success: 3/5 succeeded, 1 failed, 1 pending → upstream_failed"
    )
    assert explain("one_failed", ["upstream_failed"], "waiting") == (
        "one_failed: 0/1 succeeded, 1 failed (1 upstream) → runs"
    )
    assert explain("finally", ["skipped", "waiting"], "waiting") == (
        "all_done (finally): 0/2 succeeded, 1 skipped, 1 pending → waiting"
    )


# -- definitions --------------------------------------------------------------------------


def branch() -> Workflow:
    wf = Workflow("release", retry_backoff=0.0)
    build = wf.task("build")
    deploy = wf.task("deploy", after=[build])
    wf.task("announce", after=[deploy])
    wf.task("rollback", on_failure=[deploy])
    wf.task("report", finally_=True)
    return wf


def test_sugar_resolves_to_rules_and_edges() -> None:
    wf = branch()
    validate(wf)
    parents, rules = resolve(wf)
    assert parents == [[], ["build"], ["deploy"], ["deploy"], ["announce", "rollback"]]
    assert rules == ["all_success", "all_success", "all_success", "one_failed", "finally"]
    # the YAML form is the same workflow
    [loaded] = load_text(BRANCH.read_text(), str(BRANCH))
    assert resolve(loaded) == resolve(wf)


def test_a_finally_without_after_waits_for_every_task_that_could_end_last() -> None:
    wf = Workflow("w")
    a = wf.task("a")
    x = wf.task("x")
    b = wf.task("b", after=[a])  # a: b waits for it alone
    wf.task("c", after=[b, x])  # b, x: c can be decided without either (upstream_failed)
    wf.task("tidy", finally_=True)
    validate(wf)
    assert resolve(wf)[0][-1] == ["x", "b", "c"]


def static_of(wf: Workflow) -> dict[str, Any]:
    """The definition fields push.lua stores for ``wf`` (see its header)."""
    d = compile_workflow(wf).definition
    pos = 3 + 3 * d[2]
    pos += d[pos] + 1
    pairs = d[pos + 1 : pos + 1 + 2 * d[pos]]
    return dict(zip(pairs[::2], pairs[1::2], strict=True))


def test_only_tasks_with_a_rule_store_one() -> None:
    wf = Workflow("plain")
    a = wf.task("a")
    b = wf.task("b", after=[a])
    wf.task("c", after=[a, b])
    static = static_of(wf)
    assert static["2W"] == 2 and not [f for f in static if f.endswith("G") or f in ("hf", "fy")]
    ruled = Workflow("ruled")
    a = ruled.task("a")
    b = ruled.task("b", after=[a], trigger="all_done")
    ruled.task("c", after=[a, b])
    ruled.task("h", on_failure=[b])
    ruled.task("z", finally_=True)
    static = static_of(ruled)
    assert (static["1W"], static["1G"], static["2W"], "2G" in static) == (
        "1r",
        "all_done",
        2,
        False,
    )
    assert (static["3G"], static["4G"], static["hf"], static["fy"]) == (
        "one_failed", "finally", "3", "4",
    )  # fmt: skip


BAD = [
    ({"trigger": "always"}, "task 'b': unknown trigger 'always' (one of: all_success,"),
    ({"trigger": 3}, "task 'b': unknown trigger 3"),
    ({"on_failure": ["nope"], "after": []}, "task 'b' on_failure names unknown task 'nope'"),
    ({"on_failure": ["b"], "after": []}, "task 'b': on_failure names itself"),
    ({"on_failure": [], "after": []}, "task 'b': on_failure names no task"),
    (
        {"on_failure": ["a"], "trigger": "all_done"},
        "task 'b': on_failure runs it when one of them failed (trigger one_failed): give",
    ),
    (
        {"on_failure": ["c"], "after": ["a"]},
        "task 'b': after names 'a', which is not in on_failure",
    ),
    ({"on_failure": ["a"], "finally": True}, "task 'b': give on_failure or finally, not both"),
    ({"finally": "yes"}, "task 'b': finally must be true or false, not 'yes'"),
    ({"finally": True, "trigger": "one_failed"}, "task 'b': finally runs once its parents"),
    ({"trigger": "one_failed", "after": []}, "task 'b': trigger one_failed needs parents"),
    ({"map": "a", "trigger": "all_done"}, "task 'b': a map runs over its parent's output"),
]


@pytest.mark.parametrize(("fields", "says"), BAD)
def test_bad_rules_are_refused_with_what_and_where(fields: dict[str, Any], says: str) -> None:
    task = {"name": "b", "after": ["a"], **fields}
    doc = {"name": "w", "tasks": [{"name": "a"}, task, {"name": "c", "after": ["a"]}]}
    text = "\n".join(["name: w", "tasks:"] + [f"  - {json.dumps(t)}" for t in doc["tasks"]])
    with pytest.raises(DefinitionError) as e:
        [wf] = load_text(text, "w.yaml")
        compile_workflow(wf)
    message = str(e.value)
    assert message.startswith("w.yaml:4: ") and says in message, message
    assert "\n" not in message


def test_nothing_may_run_after_a_finally_without_after() -> None:
    wf = Workflow("w")
    wf.task("a")
    wf.task("tidy", finally_=True)
    wf.task("later", after=["tidy"])
    with pytest.raises(DefinitionError, match="runs after 'tidy', a finally task without 'after'"):
        validate(wf)


def test_a_cycle_through_on_failure_is_refused() -> None:
    wf = Workflow("w")
    wf.task("a", after=["h"])
    wf.task("h", on_failure=["a"])
    with pytest.raises(DefinitionError, match="has a cycle: "):
        validate(wf)


def test_the_cli_refuses_bad_rules_and_writes_nothing(
    engine: Engine, cli_env: dict[str, str], tmp_path: Path
) -> None:
    before = snapshot(engine.redis)
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: w\ntasks:\n  - name: a\n  - name: h\n    on_failure: [ghost]\n")
    for args in (["push", str(bad)], ["plan", str(bad)], ["viz", str(bad)]):
        result = cli(*args, env=cli_env)
        assert result.returncode == 2, result
        err = one_line_error(result)
        assert "bad.yaml:4: task 'h' on_failure names unknown task 'ghost'" in err
    for assume, says in (
        ("ghost=failed", "has no task 'ghost'"),
        ("deploy=exploded", "an outcome is one of succeeded, failed, skipped"),
        ("deploy", "give TASK=OUTCOME"),
    ):
        result = cli("plan", str(BRANCH), "--assume", assume, env=cli_env)
        assert result.returncode == 2 and says in one_line_error(result), result
    assert snapshot(engine.redis) == before


# -- running them -------------------------------------------------------------------------


def stepper(fail: set[str]) -> Any:
    def run(task: Task) -> Any:
        if task.name in fail:
            raise TaskFailed(f"{task.name} failed")
        return task.name

    return run


def states(engine: Engine, wid: str) -> dict[str, str]:
    return {t.name: t.state.value for t in engine.status(wid).tasks}


@pytest.mark.parametrize(
    ("fail", "want", "result"),
    [
        (
            set(),
            {"deploy": "succeeded", "announce": "succeeded", "rollback": "skipped"},
            "succeeded",
        ),
        (
            {"deploy"},
            {"deploy": "failed", "announce": "upstream_failed", "rollback": "succeeded"},
            "succeeded",  # handled by rollback
        ),
        (
            {"deploy", "rollback"},
            {"deploy": "failed", "announce": "upstream_failed", "rollback": "failed"},
            "failed",
        ),
        (
            {"report"},
            {"deploy": "succeeded", "announce": "succeeded", "rollback": "skipped"},
            "succeeded",  # a finally task's failure is shown, and ignored
        ),
        (
            {"build"},
            {"deploy": "upstream_failed", "announce": "upstream_failed", "rollback": "succeeded"},
            "succeeded",  # rollback handles deploy's upstream failure, downstream of build
        ),
    ],
)
def test_the_two_branches_of_a_step(
    engine: Engine, fail: set[str], want: dict[str, str], result: str
) -> None:
    wid = engine.push(branch())
    run_agent(engine, {"": stepper(fail)})
    got = states(engine, wid)
    assert {k: got[k] for k in want} == want
    assert got["report"] == ("failed" if "report" in fail else "succeeded")
    st = engine.status(wid)
    assert st.state == result
    assert st.task("rollback").trigger == "one_failed" and st.task("report").trigger == "finally"
    planned = engine.plan(branch(), dict.fromkeys(fail, "failed"))
    assert planned.state == result and {t.name: t.state for t in planned.tasks} == got
    assert_stats_agree(engine)


def test_upstream_failed_and_skipped_have_events_and_counts(engine: Engine) -> None:
    wid = engine.push(branch())
    run_agent(engine, {"": stepper({"deploy"})})
    st = engine.status(wid)
    assert (st.failed, st.upstream_failed, st.skipped, st.succeeded) == (1, 1, 0, 3)
    kinds = {(e.kind, e.task_name, json.dumps(e.data)) for e in engine.events() if e.wid == wid}
    assert ("task.upstream_failed", "announce", '{"parent": 1}') in kinds
    [summary] = engine.summaries([wid])
    assert summary.upstream_failed == 1
    assert engine.stats().tasks["upstream_failed"] == 1

    ok = engine.push(branch())
    run_agent(engine, {"": stepper(set())})
    assert ("task.skipped", "rollback") in {
        (e.kind, e.task_name) for e in engine.events() if e.wid == ok
    }


def test_a_skip_cascades_through_all_success_and_stops_where_it_is_allowed(
    engine: Engine,
) -> None:
    wf = Workflow("skips")
    a = wf.task("a")
    h = wf.task("h", on_failure=[a])  # skipped: a succeeds
    h2 = wf.task("h2", after=[h])  # all_success: skipped with it
    j = wf.task("j", after=[a, h2])  # all_success: skipped (a succeeded, h2 skipped)
    wf.task("nf", after=[a, h2], trigger="none_failed")  # a skip is no failure: runs
    wf.task("nfm", after=[h, h2], trigger="none_failed_min_one_success")  # none succeeded
    wf.task("done", after=[j], trigger="all_done")  # runs after a skip
    wid = engine.push(wf)
    run_agent(engine, {"": stepper(set())})
    assert states(engine, wid) == {
        "a": "succeeded",
        "h": "skipped",
        "h2": "skipped",
        "j": "skipped",
        "nf": "succeeded",
        "nfm": "skipped",
        "done": "succeeded",
    }
    assert engine.state(wid) == "succeeded"
    assert_stats_agree(engine)


def test_one_success_runs_as_soon_as_one_parent_succeeded(engine: Engine) -> None:
    wf = Workflow("race")
    fast = wf.task("fast")
    slow = wf.task("slow")
    wf.task("first", after=[fast, slow], trigger="one_success")
    wid = engine.push(wf)
    hand = Hand(engine)
    tasks = {t.name: t for t in hand.claim()}
    hand.succeed(tasks["fast"])
    first = hand.claim_one()
    assert first.name == "first" and states(engine, wid)["slow"] == "running"
    hand.succeed(first)
    hand.fail(tasks["slow"])
    # slow failed after first ran: nothing handles it, the workflow fails
    assert engine.state(wid) == "failed"
    assert_stats_agree(engine)


def test_a_paused_workflow_holds_a_failure_branch(engine: Engine) -> None:
    wid = engine.push(branch())
    hand = Hand(engine)
    hand.succeed(hand.claim_one())
    deploy = hand.claim_one()
    engine.pause(wid)
    hand.fail(deploy)
    assert states(engine, wid)["rollback"] == "ready" and hand.claim() == []
    engine.release(wid)
    assert hand.claim_one().name == "rollback"
    assert_stats_agree(engine)


def test_retry_runs_failed_tasks_again_and_decides_downstream_again(engine: Engine) -> None:
    wid = engine.push(branch())
    run_agent(engine, {"": stepper({"deploy", "rollback"})})
    assert engine.state(wid) == "failed"
    assert states(engine, wid)["report"] == "succeeded"
    # deploy and rollback failed; announce is upstream_failed; report (finally) runs again
    assert engine.retry(wid) == 4
    assert states(engine, wid) == {
        "build": "succeeded",
        "deploy": "ready",
        "announce": "waiting",
        "rollback": "waiting",
        "report": "waiting",
    }
    assert_stats_agree(engine)
    run_agent(engine, {"": stepper(set())})
    assert states(engine, wid) == {
        "build": "succeeded",
        "deploy": "succeeded",
        "announce": "succeeded",
        "rollback": "skipped",
        "report": "succeeded",
    }
    st = engine.status(wid)
    assert st.state == "succeeded" and (st.failed, st.upstream_failed) == (0, 0)
    assert_stats_agree(engine)


def test_retry_of_one_task_keeps_what_other_parents_still_decide(engine: Engine) -> None:
    wf = Workflow("two")
    x = wf.task("x")
    y = wf.task("y")
    wf.task("both", after=[x, y])  # upstream_failed by x and by y
    wf.task("after_x", after=[x], trigger="all_done")
    wid = engine.push(wf)
    run_agent(engine, {"": stepper({"x", "y"})})
    engine.retry(wid, ["x"])
    # both stays upstream_failed: y alone still decides it; after_x ran and stays
    assert states(engine, wid) == {
        "x": "ready", "y": "failed", "both": "upstream_failed", "after_x": "succeeded",
    }  # fmt: skip
    assert_stats_agree(engine)
    run_agent(engine, {"": stepper(set())})
    assert engine.state(wid) == "failed"
    engine.retry(wid, ["y"])
    assert states(engine, wid)["both"] == "waiting"
    run_agent(engine, {"": stepper(set())})
    assert engine.state(wid) == "succeeded"
    assert_stats_agree(engine)


def test_an_empty_map_skipped_reaches_the_rules_below_it(engine: Engine) -> None:
    wf = Workflow("maps")
    split = wf.task("split")
    count = wf.task("count", map=split["items"], on_empty="skip")
    wf.task("total", after=[count])  # skipped with it
    wf.task("anyway", after=[count], trigger="none_failed")  # a skip is no failure
    wf.task("alarm", on_failure=[count])  # nothing failed: skipped
    wid = engine.push(wf)
    run_agent(engine, {"": lambda t: {"items": []}})
    assert states(engine, wid) == {
        "split": "succeeded", "count": "skipped", "total": "skipped", "anyway": "succeeded",
        "alarm": "skipped",
    }  # fmt: skip
    assert engine.state(wid) == "succeeded"


def test_a_failed_map_fires_its_failure_branch(engine: Engine) -> None:
    wf = Workflow("maps")
    split = wf.task("split")
    count = wf.task("count", map=split["items"])
    wf.task("total", after=[count])
    wf.task("alarm", on_failure=[count])
    wid = engine.push(wf)

    def run(task: Task) -> Any:
        if task.name == "count" and task.item == 2:
            raise TaskFailed("no")
        return {"items": [1, 2, 3]} if task.name == "split" else task.name

    run_agent(engine, {"": run})
    assert states(engine, wid) == {
        "split": "succeeded", "count": "failed", "total": "upstream_failed", "alarm": "succeeded",
    }  # fmt: skip
    assert engine.state(wid) == "succeeded"


# -- random workflows, random rules, forced outcomes, real agents -------------------------


@dataclass
class Case:
    """A random workflow: ``parents[i]`` are task indexes, ``rules[i]`` its rule (None:
    the default), ``outcome[i]`` how it ends if it runs: ok, fail, or flaky (fails its
    first attempt, succeeds its second)."""

    parents: list[list[int]]
    rules: list[str | None]
    outcome: list[str]
    order: list[int]
    tail: bool = False  # one more task: finally, without after (after everything)

    def workflow(self, name: str) -> Workflow:
        wf = Workflow(name, retry_backoff=0.0)
        for i in self.order:
            rule = self.rules[i]
            wf.task(
                f"t{i}",
                payload=i,
                after=[f"t{p}" for p in self.parents[i]],
                trigger=None if rule in (None, "finally") else rule,
                finally_=rule == "finally",
                max_attempts=2 if self.outcome[i] == "flaky" else 1,
                type="b" if i % 3 == 2 else "",
            )
        if self.tail:
            n = len(self.parents)
            attempts = 2 if self.outcome[n] == "flaky" else 1
            wf.task(f"t{n}", payload=n, finally_=True, type="b", max_attempts=attempts)
        return wf

    @property
    def size(self) -> int:
        return len(self.parents) + self.tail

    @property
    def forced(self) -> dict[str, str]:
        return {f"t{i}": "failed" for i, how in enumerate(self.outcome) if how == "fail"}

    def model(self) -> tuple[list[str], str]:
        """Every task's end and the workflow's, from the table at d == n (a model of its
        own: no engine code). The tail task runs once every other task has ended."""
        n = len(self.parents)
        parents, rules = self.parents, self.rules
        if self.tail:
            parents = [*self.parents, list(range(n))]
            rules = [*self.rules, "finally"]
            n += 1
        end: dict[int, str] = {}
        while len(end) < n:
            for i in range(n):
                if i in end or any(p not in end for p in parents[i]):
                    continue
                ups = [end[p] for p in parents[i]]
                s = ups.count("succeeded")
                f = ups.count("failed") + ups.count("upstream_failed")
                k = ups.count("skipped")
                go = final_decision(rules[i] or "all_success", s, f, k) if ups else "run"
                ran = "failed" if self.outcome[i] == "fail" else "succeeded"
                end[i] = ran if go == "run" else go
        states = [end[i] for i in range(n)]
        children: list[list[int]] = [[] for _ in range(n)]
        for i, ps in enumerate(parents):
            for p in ps:
                children[p].append(i)

        def below(i: int) -> set[int]:
            out, todo = set(), [i]
            while todo:
                for c in children[todo.pop()]:
                    if c not in out:
                        out.add(c)
                        todo.append(c)
            return out

        unhandled = [
            i
            for i in range(n)
            if states[i] == "failed"
            and rules[i] != "finally"
            and not any(
                states[h] == "succeeded" and rules[h] in ("one_failed", "all_failed")
                for h in below(i)
            )
        ]
        return states, "failed" if unhandled else "succeeded"


RULE_CHOICES = [None, None, *RULES[1:], "finally"]


@st.composite
def cases(draw: st.DrawFn, max_tasks: int = 10) -> Case:
    n = draw(st.integers(1, max_tasks))
    outcome = [draw(st.sampled_from(["ok", "ok", "fail", "flaky"])) for _ in range(n + 1)]
    parents = [
        sorted(draw(st.sets(st.integers(0, i - 1), min_size=1, max_size=3)))
        if i and draw(st.integers(0, 4))
        else []
        for i in range(n)
    ]
    rules = [draw(st.sampled_from(RULE_CHOICES)) if parents[i] else None for i in range(n)]
    order = draw(st.permutations(range(n)))
    tail = draw(st.integers(0, 3)) == 0
    return Case(parents, rules, outcome if tail else outcome[:n], list(order), tail)


class Forced:
    """A handler that ends each task as its case says, and checks it runs once per
    attempt, never before its rule let it."""

    def __init__(self, cases: dict[str, Case]) -> None:
        self.cases = cases
        self.lock = threading.Lock()
        self.runs: Counter[tuple[str, str]] = Counter()

    def __call__(self, task: Task) -> Any:
        case = self.cases[task.workflow_id]
        i = int(task.name[1:])
        with self.lock:
            self.runs[(task.workflow_id, task.name)] += 1
        how = case.outcome[i]
        if how == "fail" or (how == "flaky" and task.attempt == 1):
            raise TaskFailed(f"{task.name}: {how}")
        return i


@pytest.fixture(scope="module")
def rules_engine(session_url: str):
    eng = Engine.connect(session_url)
    yield eng
    eng.redis.flushall()
    eng.close()


@settings(
    # REDISFLOW_RULES_EXAMPLES=1000 for a deeper search than the suite's default
    max_examples=int(os.environ.get("REDISFLOW_RULES_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(batch=st.lists(cases(), min_size=1, max_size=3), concurrency=st.sampled_from([1, 4]))
def test_random_rules_end_as_the_model_and_the_plan_say(
    rules_engine: Engine, batch: list[Case], concurrency: int
) -> None:
    engine = rules_engine
    engine.redis.flushall()
    workflows = [c.workflow(f"w{k}") for k, c in enumerate(batch)]
    ids = engine.push_many(workflows)
    handler = Forced(dict(zip(ids, batch, strict=True)))
    # two agents, each serving one type: tasks of one workflow run on both at once
    threads = [
        threading.Thread(
            target=run_agent,
            args=(engine, {typ: handler}),
            kwargs={"agent_id": f"a{typ or 0}", "concurrency": concurrency},
        )
        for typ in ("", "b")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    # an agent of one type stops when it finds no work, while the other type's may still
    # release some: one more serving both finishes what is left
    run_agent(engine, {"": handler, "b": handler}, agent_id="last")
    for wid, case, wf in zip(ids, batch, workflows, strict=True):
        status = engine.status(wid)
        want, result = case.model()
        got = [status.task(f"t{i}").state.value for i in range(case.size)]
        assert got == want, (case, got)
        assert status.state == result, (case, got)
        planned = plan(wf, case.forced)
        assert [planned.task(f"t{i}").state for i in range(case.size)] == want
        assert planned.state == result
        # a task runs once per attempt, and only when its rule let it
        for i, end in enumerate(want):
            runs = handler.runs[(wid, f"t{i}")]
            if end in ("skipped", "upstream_failed"):
                assert runs == 0
            else:
                assert runs == (2 if case.outcome[i] == "flaky" else 1)
    assert_stats_agree(engine)


@settings(max_examples=300, deadline=None)
@given(case=cases(max_tasks=14))
def test_the_planner_is_the_model(case: Case) -> None:
    """engine.core.rules (incremental decisions) against the table applied at the end."""
    want, result = case.model()
    planned = plan(case.workflow("w"), case.forced)
    assert [t.state for t in sorted(planned.tasks, key=lambda t: int(t.name[1:]))] == want
    assert planned.state == result
    wf = case.workflow("w")
    validate(wf)
    ups, rules = resolve(wf)
    index = {t.name: i for i, t in enumerate(wf.tasks)}
    parents = [[index[p] for p in ps] for ps in ups]
    got = simulate(
        parents, rules, lambda i: "failed" if wf.tasks[i].name in case.forced else "succeeded"
    )
    assert workflow_result(got, parents, rules)[0] == result


def test_the_python_api_refuses_the_same_way() -> None:
    wf = Workflow("w")
    wf.task("a")
    with pytest.raises(DefinitionError, match="task 'h': on_failure must be a list of tasks"):
        wf.task("h", on_failure=5)  # type: ignore[arg-type]
    wf.task("f", after=["a"], finally_="yes")  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="task 'f': finally must be true or false"):
        validate(wf)


def test_viz_draws_failure_branches_and_states(engine: Engine, cli_env: dict[str, str]) -> None:
    wid = engine.push(branch())
    run_agent(engine, {"": stepper({"deploy"})})
    mermaid = cli("viz", wid, env=cli_env)
    assert mermaid.returncode == 0, mermaid.stderr
    text = mermaid.stdout
    assert text.startswith('---\ntitle: "release #') and "flowchart LR" in text
    assert 't2["⇣ announce"]' in text and 't4(["✔ report"])' in text  # finally: a stadium
    assert "t1 --> t2" in text and "t1 -. on failure .-> t3" in text
    assert "t2 -. done .-> t4" in text
    assert "linkStyle 2 stroke:#c62828" in text  # the third edge drawn: the failure branch
    assert "class t2 upstream_failed" in text and "class t1 failed" in text
    dot = cli("viz", wid, "--format", "dot", env=cli_env).stdout
    assert 't1 -> t3 [style=dashed, color="#c62828"' in dot and "t0 -> t1;" in dot
    # a file, coloured by a plan
    planned = cli("viz", str(BRANCH), "--assume", "deploy=failed", env=cli_env).stdout
    assert "class t2 upstream_failed" in planned
    plain = cli("viz", str(BRANCH), env=cli_env).stdout
    assert "classDef" not in plain and 't3["rollback"]' in plain


def test_status_and_plan_say_why(engine: Engine, cli_env: dict[str, str]) -> None:
    wid = engine.push(branch())
    run_agent(engine, {"": stepper({"deploy"})})
    wide = {**cli_env, "COLUMNS": "200"}
    out = cli("status", wid, env=wide)
    assert out.returncode == 0, out.stderr
    assert "1 failed, 1 upstream_failed, 0 skipped" in out.stdout
    assert "failures handled by a failure branch: deploy" in out.stdout
    assert "all_success: 0/1 succeeded, 1 failed → upstream_failed" in out.stdout
    assert "one_failed" in out.stdout and "finally" in out.stdout
    planned = cli("plan", str(BRANCH), "--assume", "deploy=failed,rollback=failed", env=wide)
    assert planned.returncode == 0, planned.stderr
    assert "workflow release: failed (failures that fail it: deploy, rollback)" in planned.stdout
    as_json = json.loads(cli("plan", str(BRANCH), "--json", env=wide).stdout)
    assert as_json["state"] == "succeeded"
    assert {t["name"]: t["state"] for t in as_json["tasks"]}["rollback"] == "skipped"
