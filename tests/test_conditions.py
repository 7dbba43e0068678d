"""Conditions (``when:``), error kinds (NonRetryable, Abort, Skip; ``--exec`` exit codes)
and input schemas, on a real Redis. ``engine.spec.definition.plan`` (the rules reference with
conditions) is what the engine must agree with."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
from engine_helpers import Hand, assert_stats_agree, cli, one_line_error, run_agent, snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_http_server import Client, client  # noqa: F401 - the fixture

from engine import (
    Abort,
    DefinitionError,
    Engine,
    NonRetryable,
    Skip,
    Task,
    TaskFailed,
    Workflow,
    exec_handler,
    load_text,
)
from engine.core.outcomes import exit_codes
from engine.core.rules import RULES
from engine.http.triggers import new_trigger
from engine.schedules import parse_schedule
from engine.spec.conditions import check_when, references
from engine.spec.definition import plan
from engine.store.codec import compile_workflow, decode_claim_row


def states(engine: Engine, wid: str) -> dict[str, str]:
    return {t.name: t.state.value for t in engine.status(wid).tasks}


def outputs_of(outputs: dict[str, Any]) -> Any:
    """A handler whose output is ``outputs[task name]`` (None when absent)."""

    def handler(t: Task) -> Any:
        return outputs.get(t.name)

    return handler


# -- when: over DAG shapes, against the planner ---------------------------------------------


def branch_and_join() -> Workflow:
    """check -> yes | no (conditions), each -> its own step; a join after both branches
    (none_failed_min_one_success: the Airflow join), and a plain all_success join that a
    skipped branch skips."""
    wf = Workflow("branch")
    check = wf.task("check")
    yes = wf.task("yes", after=[check], when='parents.check.output.status == "ok"')
    no = wf.task("no", after=[check], when='parents.check.output.status != "ok"')
    y2 = wf.task("yes2", after=[yes])
    n2 = wf.task("no2", after=[no])
    wf.task("join", after=[y2, n2], trigger="none_failed_min_one_success")
    wf.task("strict_join", after=[y2, n2])
    wf.task("report", after=["join"], when="input.report && run.id != ''")
    return wf


@pytest.mark.parametrize(
    ("status", "report"), [("ok", True), ("bad", True), ("ok", False), ("bad", False)]
)
def test_branches_and_joins_agree_with_the_planner(
    engine: Engine, status: str, report: bool
) -> None:
    wf = branch_and_join()
    outputs = {"check": {"status": status}}
    wid = engine.push(wf, {"report": report})
    ran: list[str] = []

    def handler(t: Task) -> Any:
        ran.append(t.name)
        return outputs.get(t.name)

    run_agent(engine, {"": handler})
    got = states(engine, wid)
    planned = plan(wf, outputs=outputs, input={"report": report})
    assert got == {t.name: t.state for t in planned.tasks}
    assert sorted(ran) == sorted(t.name for t in planned.tasks if t.runs)
    taken = "yes" if status == "ok" else "no"
    other = "no" if status == "ok" else "yes"
    assert got[taken] == got[taken + "2"] == "succeeded"
    assert got[other] == got[other + "2"] == "skipped"
    assert got["join"] == "succeeded" and got["strict_join"] == "skipped"
    assert got["report"] == ("succeeded" if report else "skipped")
    st = engine.status(wid)
    assert st.state.value == planned.state == "succeeded"
    skipped = {t.name: t for t in st.tasks}[other]
    assert skipped.when is not None and skipped.skip_reason is not None
    assert f"parents.check.output={json.dumps(outputs['check'], separators=(',', ':'))}" in (
        skipped.skip_reason
    )
    assert "parents.check.state=succeeded" in skipped.skip_reason
    assert_stats_agree(engine)


def test_state_of_a_failed_parent_under_all_done(engine: Engine) -> None:
    wf = Workflow("cleanup")
    a = wf.task("a")
    b = wf.task("b")
    wf.task("on_fail", after=[a, b], trigger="all_done", when='parents.a.state == "failed"')
    wf.task("on_ok", after=[a, b], trigger="all_done", when='parents.a.state == "succeeded"')
    wid = engine.push(wf)

    def handler(t: Task) -> Any:
        if t.name == "a":
            raise TaskFailed("boom")
        return None

    run_agent(engine, {"": handler})
    got = states(engine, wid)
    assert got == {"a": "failed", "b": "succeeded", "on_fail": "succeeded", "on_ok": "skipped"}
    planned = plan(wf, {"a": "failed"})
    assert {t.name: t.state for t in planned.tasks} == got


def test_a_condition_on_input_alone_and_a_root(engine: Engine) -> None:
    wf = Workflow("roots")
    wf.task("big", when="input.n > 10")
    wf.task("small", when="input.n <= 10")
    wf.task("named", when='parents["big"].state == "succeeded"', after=["big"])
    small = engine.push(wf, {"n": 3})
    big = engine.push(wf, {"n": 30})
    run_agent(engine, {"": lambda t: None})
    assert states(engine, small) == {"big": "skipped", "small": "succeeded", "named": "skipped"}
    assert states(engine, big) == {"big": "succeeded", "small": "skipped", "named": "succeeded"}
    assert (
        engine.status(small).tasks[0].skip_reason == 'when input.n > 10 was false (input={"n":3})'
    )


def test_an_evaluation_error_fails_the_task_without_a_retry(engine: Engine) -> None:
    wf = Workflow("broken")
    a = wf.task("a")
    wf.task("b", after=[a], when="parents.a.output.missing == 1", max_attempts=5)
    wf.task("c", after=[a], when="parents.a.output.n", max_attempts=5)  # not a boolean
    wf.task("after_b", after=["b"])
    wid = engine.push(wf)
    ran: list[str] = []

    def handler(t: Task) -> Any:
        ran.append(t.name)
        return {"n": 1}

    run_agent(engine, {"": handler})
    st = engine.status(wid)
    by = {t.name: t for t in st.tasks}
    assert ran == ["a"]
    assert by["b"].state.value == "failed" and by["b"].attempts == 1
    assert by["b"].error is not None and "when parents.a.output.missing == 1" in by["b"].error
    assert "missing" in by["b"].error
    assert by["c"].state.value == "failed" and "not true or false" in (by["c"].error or "")
    assert by["after_b"].state.value == "upstream_failed"
    assert st.state.value == "failed"
    assert_stats_agree(engine)


def test_async_handlers_decide_conditions_too(engine: Engine) -> None:
    wf = Workflow("async")
    a = wf.task("a")
    wf.task("b", after=[a], when="parents.a.output == 2")
    wf.task("c", after=[a], when="parents.a.output == 1")
    wid = engine.push(wf)

    async def handler(t: Task) -> Any:
        return 1

    run_agent(engine, {"": handler})
    assert states(engine, wid) == {"a": "succeeded", "b": "skipped", "c": "succeeded"}


def test_the_plain_claim_row_carries_no_condition(engine: Engine) -> None:
    wf = Workflow("plain")
    wf.task("a")
    assert "+" not in compile_workflow(wf).digest
    wf.tasks[0].when = "true"
    assert compile_workflow(wf).digest.endswith("+F")
    # a row of a conditional task: the expression and the parents' states
    extras = '{"when":"x","states":["succeeded","failed"]}'
    row = ["\0".join(["1", "2", "t", "", "1", '["a","b"]', extras]), "null", "", 0, 2, "1", ""]
    task = decode_claim_row(row)
    assert task._when == "x" and task._states == {"a": "succeeded", "b": "failed"}
    plain = decode_claim_row(["\0".join(["1", "0", "t", "", "1", "[]", ""]), "null", "", 0, 0])
    assert plain._when is None


# -- refused at push: one line, nothing written ---------------------------------------------


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        ("parents.a.output ==", "task 'b': when: ERROR: <input>:1:"),
        ("parents.zz.output == 1", "reads parents.zz, which is not a parent of 'b'"),
        ('parents["c"].output == 1', "reads parents.c, which is not a parent of 'b'"),
        ("foo == 1", "unknown variable 'foo'"),
        ("run.key == 'x'", "reads run.key; run has: id"),
        ("", "must be a CEL expression"),
        (5, "must be a CEL expression"),
    ],
)
def test_bad_conditions_are_refused(engine: Engine, when: Any, expected: str) -> None:
    wf = Workflow("bad")
    a = wf.task("a")
    wf.task("b", after=[a], when=when)
    wf.task("c")
    before = snapshot(engine.redis)
    with pytest.raises(DefinitionError) as e:
        engine.push(wf)
    assert expected in str(e.value) and "\n" not in str(e.value)
    assert snapshot(engine.redis) == before


def test_messages_about_a_condition_are_one_line(engine: Engine) -> None:
    wf = Workflow("lines")
    a = wf.task("a")
    wf.task("b", after=[a], when="parents.a.output\n  == ")
    with pytest.raises(DefinitionError) as e:
        engine.push(wf)
    assert "\n" not in str(e.value)
    wf.tasks[1].when = "input.n\n  > 3"
    wid = engine.push(wf, {"n": 1})
    run_agent(engine, {"": lambda t: None})
    assert engine.status(wid).tasks[1].skip_reason == 'when input.n > 3 was false (input={"n":1})'


def test_names_inside_strings_and_macros_are_no_references() -> None:
    text = 'parents.a.output == "parents.b" && input.l.all(x, x > 1) && run.id != ""'
    assert references(text) == (["a"], ["id"], {"x"})
    assert check_when(text, "t", ["a"], None) == text


def test_a_map_or_a_step_cannot_have_a_condition(engine: Engine) -> None:
    wf = Workflow("maps")
    a = wf.task("a")
    wf.task("m", map=a, when="true")
    with pytest.raises(DefinitionError, match="a map cannot have when"):
        engine.push(wf)
    wf = Workflow("steps")
    a = wf.task("a")
    wf.task("m", map=a, steps=[Workflow("s").task("s1", when="true")])
    with pytest.raises(DefinitionError, match="when is not supported"):
        engine.push(wf)


BAD_FILE = """\
name: bad
tasks:
  - name: a
  - name: b
    after: [a]
    when: parents.nope.output == 1
"""


def test_the_cli_refuses_a_bad_condition(
    engine: Engine, cli_env: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD_FILE)
    before = snapshot(engine.redis)
    r = cli("push", str(path), env=cli_env)
    assert r.returncode == 2
    err = one_line_error(r)
    assert "bad.yaml:4: task 'b': when reads parents.nope" in err
    assert snapshot(engine.redis) == before


# -- the loader and the planner's CLI -------------------------------------------------------

PLAN_FILE = """\
name: deploy
input_schema:
  type: object
  properties: {env: {enum: [prod, dev]}}
tasks:
  - name: check
  - name: ship
    after: [check]
    when: 'parents.check.output.ok && input.env == "prod"'
  - name: notify
    after: [ship]
"""


def test_plan_shows_the_branch_taken(tmp_path: Path) -> None:
    path = tmp_path / "deploy.yaml"
    path.write_text(PLAN_FILE)
    wf = load_text(PLAN_FILE, "deploy.yaml")[0]
    assert wf.tasks[1].when == 'parents.check.output.ok && input.env == "prod"'
    r = cli("plan", str(path), "--json", "--output", 'check={"ok":false}', "--input",
            '{"env":"prod"}')  # fmt: skip
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    by = {t["name"]: t for t in got["tasks"]}
    assert by["ship"]["state"] == "skipped" and not by["ship"]["runs"]
    assert (
        "was false" in by["ship"]["why"]
        and 'parents.check.output={"ok":false}' in (by["ship"]["why"])
    )
    assert by["notify"]["state"] == "skipped"
    # an output not given: not decided, taken as true, and it says what to give
    r = cli("plan", str(path), "--json")
    by = {t["name"]: t for t in json.loads(r.stdout)["tasks"]}
    assert by["ship"]["runs"] and "give --output check=JSON, --input JSON" in by["ship"]["why"]
    # failed check: the rule decides first
    r = cli("plan", str(path), "--json", "--assume", "check=failed")
    by = {t["name"]: t for t in json.loads(r.stdout)["tasks"]}
    assert by["ship"]["state"] == "upstream_failed"
    trap = tmp_path / "trap.yaml"
    trap.write_text(PLAN_FILE.replace("    after: [ship]", "    after: [ship, check]"))
    r = cli("plan", str(trap))
    assert "note: task 'notify' joins 'ship', which has a condition" in r.stdout
    r = cli("plan", str(path), "--output", "nope=1")
    assert r.returncode == 2 and "--output: " in one_line_error(r)


# -- error kinds ---------------------------------------------------------------------------


def kinds_workflow() -> Workflow:
    wf = Workflow("kinds")
    a = wf.task("a", max_attempts=4)
    wf.task("after_a", after=[a])
    wf.task("handler", on_failure=[a])
    return wf


def test_non_retryable_fails_at_once(engine: Engine) -> None:
    wid = engine.push(kinds_workflow())

    def handler(t: Task) -> Any:
        if t.name == "a":
            raise NonRetryable("bad request")
        return None

    run_agent(engine, {"": handler})
    by = {t.name: t for t in engine.status(wid).tasks}
    assert by["a"].state.value == "failed" and by["a"].attempts == 1 and by["a"].failures == 1
    assert by["a"].error == "bad request"
    assert by["handler"].state.value == "succeeded"  # an ordinary failure: handled
    assert engine.status(wid).state.value == "succeeded"
    assert_stats_agree(engine)


def test_skip_skips_the_task_and_its_children(engine: Engine) -> None:
    wid = engine.push(kinds_workflow())

    def handler(t: Task) -> Any:
        if t.name == "a":
            raise Skip("nothing to do today")
        return None

    run_agent(engine, {"": handler})
    st = engine.status(wid)
    assert states(engine, wid) == {"a": "skipped", "after_a": "skipped", "handler": "skipped"}
    assert st.tasks[0].skip_reason == "nothing to do today"
    assert st.state.value == "succeeded" and st.skipped == 3
    assert_stats_agree(engine)


def test_abort_ends_the_run_failed_and_cancels_the_rest(engine: Engine) -> None:
    wf = Workflow("abort")
    a = wf.task("a", max_attempts=3)
    wf.task("after_a", after=[a])
    wf.task("handler", on_failure=[a])
    wf.task("tidy", finally_=True)
    slow = wf.task("other")
    wf.task("after_other", after=[slow])
    wid = engine.push(wf)
    ran: list[str] = []

    def handler(t: Task) -> Any:
        ran.append(t.name)
        if t.name == "a":
            raise Abort("the account is closed")
        return None

    run_agent(engine, {"": handler}, batch=1)
    st = engine.status(wid)
    got = states(engine, wid)
    assert st.state.value == "failed" and st.reason == "abort"
    assert got["a"] == "failed" and st.tasks[0].attempts == 1
    assert st.tasks[0].error == "the account is closed"
    for name in ("after_a", "handler", "tidy"):
        assert got[name] == "cancelled" and name not in ran
    assert ran[0] == "a"
    with pytest.raises(Exception, match="aborted"):
        engine.retry(wid)
    assert_stats_agree(engine)


def test_a_skip_from_an_item_fails_it(engine: Engine) -> None:
    wf = Workflow("items")
    a = wf.task("a")
    wf.task("m", map=a)
    wid = engine.push(wf)

    def handler(t: Task) -> Any:
        if t.name == "a":
            return [1, 2]
        raise Skip("no")

    run_agent(engine, {"": handler})
    assert engine.status(wid).state.value == "failed"


SCRIPT = """\
import json, sys
task = json.load(sys.stdin)
how = task["payload"]
if how == "json":
    print("some log line")
    print(json.dumps({"error": {"kind": "abort", "message": "stop everything"}}))
    sys.exit(1)
sys.exit({"fatal": 100, "abort": 101, "skip": 102, "custom": 7, "plain": 1}.get(how, 0))
"""


@pytest.mark.parametrize(
    ("how", "state", "attempts", "run_state"),
    [
        ("fatal", "failed", 1, "failed"),
        ("abort", "failed", 1, "failed"),
        ("json", "failed", 1, "failed"),
        ("skip", "skipped", 1, "succeeded"),
        ("custom", "failed", 1, "failed"),
        ("plain", "failed", 3, "failed"),
    ],
)
def test_exec_exit_codes_and_json_errors(
    engine: Engine, tmp_path: Path, how: str, state: str, attempts: int, run_state: str
) -> None:
    script = tmp_path / "h.py"
    script.write_text(SCRIPT)
    wf = Workflow("exec", retry_backoff=0)
    wf.task("t", how, max_attempts=3)
    wf.task("u")  # a root that runs either way (unless the run aborts first)
    wid = engine.push(wf)
    codes = exit_codes(["7=non_retryable"])
    run_agent(engine, {"": exec_handler(f"{sys.executable} {script}", exit_codes=codes)})
    st = engine.status(wid)
    t = st.tasks[0]
    assert (t.state.value, t.attempts, st.state.value) == (state, attempts, run_state)
    if how in ("abort", "json"):
        assert st.reason == "abort"
    if how == "json":
        assert t.error == "stop everything"


def test_the_agent_cli_takes_exit_codes(
    engine: Engine, cli_env: dict[str, str], tmp_path: Path
) -> None:
    script = tmp_path / "h.py"
    script.write_text(SCRIPT)
    wf = Workflow("exec-cli", retry_backoff=0)
    wf.task("t", "custom", max_attempts=3)
    wid = engine.push(wf)
    r = cli("--exec", f"{sys.executable} {script}", "--exit-code", "7=non_retryable",
            "--until-idle", tool="redisflow-agent", env=cli_env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert engine.status(wid).tasks[0].attempts == 1
    r = cli("--exec", "true", "--exit-code", "7=maybe", tool="redisflow-agent", env=cli_env)
    assert r.returncode == 2 and "--exit-code '7=maybe'" in r.stderr


# -- input schemas -------------------------------------------------------------------------

TEMPLATE = """\
name: orders
input_schema:
  type: object
  required: [customer]
  properties:
    customer:
      type: object
      required: [id]
      properties: {id: {type: integer}}
tasks:
  - name: charge
"""

# where a misfit's rule is in TEMPLATE's schema (a message names it, never the schema's text)
ID_TYPE = "(input_schema at $.properties.customer.properties.id.type)"


def test_input_schema_through_the_api(engine: Engine) -> None:
    wf = load_text(TEMPLATE, "orders.yaml")[0]
    wid = engine.push(wf, {"customer": {"id": 7}})
    assert engine.status(wid).input == {"customer": {"id": 7}}
    before = snapshot(engine.redis)
    for value, where in (
        ({"customer": {"id": "7"}}, f"at $.customer.id: fails 'type' {ID_TYPE}"),
        ({}, "at $: fails 'required' (input_schema at $.required)"),
    ):
        with pytest.raises(DefinitionError) as e:
            engine.push(wf, value)
        assert str(e.value) == f"input does not fit the input_schema of workflow 'orders': {where}"
    with pytest.raises(DefinitionError) as e:  # none at all: what the schema wants, in words
        engine.push(wf)
    assert str(e.value) == (
        "workflow 'orders' needs an input: an object (its input_schema); none was given"
    )
    with pytest.raises(DefinitionError, match=r"\$\.customer\.id"):
        engine.push_many([wf, wf], [{"customer": {"id": 1}}, {"customer": {"id": 1.5}}])
    engine.put_template(TEMPLATE)
    before = snapshot(engine.redis)
    with pytest.raises(DefinitionError, match=r"at \$\.customer"):
        engine.run("orders", {"customer": []})
    assert snapshot(engine.redis) == before
    # the builder
    built = Workflow("b", input_schema={"type": "array", "maxItems": 1})
    built.task("a")
    with pytest.raises(DefinitionError, match=r"at \$: fails 'maxItems'"):
        engine.push(built, [1, 2])


def test_a_bad_schema_is_refused_when_stored(engine: Engine) -> None:
    bad = TEMPLATE.replace("type: integer", "type: intgr")
    before = snapshot(engine.redis)
    with pytest.raises(DefinitionError) as e:
        engine.put_template(bad)
    assert "input_schema is not a valid JSON Schema: at $.properties.customer" in str(e.value)
    assert snapshot(engine.redis) == before
    wf = Workflow("w", input_schema=[1])  # type: ignore[arg-type]
    wf.task("a")
    with pytest.raises(DefinitionError, match="must be a JSON Schema"):
        engine.push(wf)
    # a $ref refers within the schema only: nothing is fetched (tests/test_schema_safety.py)
    wf.input_schema = {"$ref": "http://127.0.0.1:1/schema.json"}
    with pytest.raises(DefinitionError, match=r"input_schema at \$\['\$ref'\]: a \$ref must"):
        engine.push(wf)
    wf.input_schema = {"properties": {"a": {"$ref": "#/nope"}}}
    with pytest.raises(DefinitionError, match="cannot be applied: PointerToNowhere"):
        engine.push(wf, {"a": 1})
    assert snapshot(engine.redis) == before


def test_input_schema_through_the_cli(
    engine: Engine, cli_env: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "orders.yaml"
    path.write_text(TEMPLATE)
    assert cli("template", "put", str(path), env=cli_env).returncode == 0
    before = snapshot(engine.redis)
    for args in (
        ("push", str(path), "--input", '{"customer": {"id": "x"}}'),
        ("run", "orders", "--input", '{"customer": {"id": "x"}}'),
    ):
        r = cli(*args, env=cli_env)
        assert r.returncode == 2, r.stderr
        assert f"at $.customer.id: fails 'type' {ID_TYPE}" in one_line_error(r)
    for args in (("push", str(path)), ("run", "orders")):  # no input at all
        r = cli(*args, env=cli_env)
        assert r.returncode == 2, r.stderr
        assert one_line_error(r) == (
            "redisflow: workflow 'orders' needs an input: an object (its input_schema); "
            "none was given"
        )
    assert snapshot(engine.redis) == before
    bad = tmp_path / "bad.yaml"
    bad.write_text(TEMPLATE.replace("required: [customer]", "required: customer"))
    r = cli("template", "put", str(bad), env=cli_env)
    assert r.returncode == 2 and "input_schema is not a valid JSON Schema" in one_line_error(r)
    r = cli("run", "orders", "--input", '{"customer": {"id": 1}}', env=cli_env)
    assert r.returncode == 0, r.stderr


def test_input_schema_over_http(engine: Engine, client: Client) -> None:  # noqa: F811
    engine.put_template(TEMPLATE)
    api: httpx.Client = client()
    before = snapshot(engine.redis)
    r = api.post("/v1/templates/orders/runs", json={"customer": {"id": "x"}})
    assert r.status_code == 400
    assert "at $.customer.id" in json.dumps(r.json())
    after = snapshot(engine.redis)
    after.pop(engine.keys.shard(0).http_counters, None)  # counted as a rejected request
    assert after == before
    assert api.post("/v1/templates/orders/runs", json={"customer": {"id": 1}}).status_code == 202
    # a webhook trigger's delivery is the input: checked the same
    engine.put_trigger(new_trigger("open", "orders", "none"))
    r = api.post("/v1/triggers/open", json={"customer": {}})
    assert r.status_code == 400 and "at $.customer: fails 'required'" in r.text
    assert api.post("/v1/triggers/open", json={"customer": {"id": 2}}).status_code == 202
    assert engine.count() == 2


def test_status_shows_why_a_task_was_skipped(engine: Engine, cli_env: dict[str, str]) -> None:
    wf = Workflow("why")
    wf.task("a", when="input.go")
    wf.task("b", when="input.go == false")
    wid = engine.push(wf, {"go": False})
    run_agent(engine, {"": lambda t: None})
    r = cli("status", wid, env={**cli_env, "COLUMNS": "250"})
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("a "))
    assert "skipped" in line and 'when input.go was false (input={"go":false})' in line
    st = engine.status(wid)
    assert st.why(st.tasks[0]) == st.tasks[0].skip_reason  # the console's "why" line too
    got = json.loads(cli("status", wid, "--json", env=cli_env).stdout)
    assert got["tasks"][0]["when"] == "input.go" and got["tasks"][1]["skip_reason"] is None


def test_input_schema_of_a_schedule(engine: Engine) -> None:
    engine.put_template(
        textwrap.dedent("""\
        name: nightly
        input_schema:
          type: object
          properties: {region: {enum: [eu, us]}}
          required: [region]
        tasks:
          - name: work
        """)
    )
    before = snapshot(engine.redis)
    with pytest.raises(DefinitionError, match=r"at \$\.region: fails 'enum'"):
        engine.put_schedule(
            parse_schedule(
                {"name": "s", "template": "nightly", "every": "1h", "input": {"region": "mars"}}
            )
        )
    with pytest.raises(DefinitionError, match=r"at \$: fails 'required'"):
        engine.put_schedule(parse_schedule({"name": "s", "template": "nightly", "every": "1h"}))
    assert snapshot(engine.redis) == before
    engine.put_schedule(
        parse_schedule(
            {"name": "s", "template": "nightly", "every": "1h", "input": {"region": "eu"}}
        )
    )
    assert engine.trigger_schedule("s").what == "fired"
    # the template changes under the schedule: its ticks' input is checked again
    engine.put_template(
        textwrap.dedent("""\
        name: nightly
        input_schema:
          type: object
          properties: {region: {enum: [us]}}
        tasks:
          - name: work
        """)
    )
    runs = engine.count()
    with pytest.raises(DefinitionError, match=r"at \$\.region: fails 'enum'"):
        engine.trigger_schedule("s")
    assert engine.count() == runs


def test_an_item_that_aborts_ends_the_run(engine: Engine) -> None:
    wf = Workflow("items-abort")
    a = wf.task("a")
    wf.task("m", map=a, concurrency=1)
    wf.task("after_m", after=["m"])
    wf.task("tidy", finally_=True)
    wid = engine.push(wf)
    seen: list[Any] = []

    def handler(t: Task) -> Any:
        if t.name == "a":
            return [1, 2, 3]
        seen.append(t.item)
        raise Abort("item 1 is poisoned")

    run_agent(engine, {"": handler})
    st = engine.status(wid)
    assert st.state.value == "failed" and st.reason == "abort"
    assert seen == [1]
    got = states(engine, wid)
    assert got["m"] == got["after_m"] == got["tidy"] == "cancelled"
    assert_stats_agree(engine)


# -- random DAGs: the engine ends as the planner says -------------------------------------


@st.composite
def conditional_cases(draw: st.DrawFn) -> tuple[Workflow, set[str], dict[str, Any]]:
    """A random DAG with random trigger rules, failures and conditions over the input, the
    parents' states and their outputs (some of which cannot be evaluated)."""
    n = draw(st.integers(2, 9))
    wf = Workflow(f"r{n}")
    flags: dict[str, bool] = {}
    fail: set[str] = set()
    for i in range(n):
        name = f"t{i}"
        after = sorted(draw(st.sets(st.integers(0, i - 1), max_size=3))) if i else []
        ups = [f"t{p}" for p in after]
        trigger = draw(st.sampled_from([None, None, *RULES[1:]])) if ups else None
        kind = draw(st.sampled_from(["none", "none", "input", "state", "output", "error"]))
        if trigger in ("one_success", "one_failed") and len(ups) > 1:
            kind = "input"  # what it reads of its parents would depend on timing
        when = None
        if kind == "input":
            when = f"input.flags.{name}"
            flags[name] = draw(st.booleans())
        elif ups and kind == "state":
            when = f'parents.{draw(st.sampled_from(ups))}.state == "succeeded"'
        elif ups and kind == "output":
            p = draw(st.sampled_from(ups))
            when = f"parents.{p}.output == {int(p[1:]) % 2}"
        elif ups and kind == "error":
            when = f"parents.{draw(st.sampled_from(ups))}.output.x == 1"
        wf.task(name, after=ups, trigger=trigger, when=when)
        if draw(st.integers(0, 3)) == 0:
            fail.add(name)
    return wf, fail, {"flags": flags, "fail": sorted(fail)}


@pytest.fixture(scope="module")
def session_engine(session_url: str) -> Any:
    eng = Engine.connect(session_url)
    yield eng
    eng.redis.flushall()
    eng.close()


@settings(
    max_examples=int(os.environ.get("REDISFLOW_RULES_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=conditional_cases())
def test_random_conditions_end_as_the_planner_says(
    session_engine: Engine, case: tuple[Workflow, set[str], dict[str, Any]]
) -> None:
    engine = session_engine
    engine.redis.flushall()
    wf, fail, run_input = case
    wid = engine.push(wf, run_input)
    ran: list[str] = []

    def handler(t: Task) -> Any:
        ran.append(t.name)
        if t.name in t.input["fail"]:
            raise TaskFailed("forced")
        return int(t.name[1:])

    run_agent(engine, {"": handler})
    got = states(engine, wid)
    outputs = {t.name: int(t.name[1:]) for t in wf.tasks}
    planned = plan(wf, dict.fromkeys(fail, "failed"), outputs, run_input)
    assert got == {t.name: t.state for t in planned.tasks}, [t.why for t in planned.tasks]
    assert sorted(ran) == sorted(t.name for t in planned.tasks if t.runs)
    assert engine.status(wid).state.value == planned.state


def test_a_rule_that_runs_early_leaves_the_condition_to_timing() -> None:
    wf = Workflow("early")
    a = wf.task("a")
    b = wf.task("b")
    wf.task("c", after=[a, b], trigger="one_success", when='parents.b.state == "succeeded"')
    planned = plan(wf, outputs={"a": 1, "b": 2})
    c = planned.task("c")
    assert c.runs and "one_success may run it before the parents it reads have ended" in c.why


def test_http_refuses_a_bad_template(engine: Engine, client: Client) -> None:  # noqa: F811
    api: httpx.Client = client()
    before = snapshot(engine.redis)
    bad_when = {"tasks": [{"name": "a"}, {"name": "b", "after": ["a"], "when": "parents.x.y"}]}
    r = api.put("/v1/templates/t", json=bad_when)
    assert r.status_code == 400 and "reads parents.x, which is not a parent of 'b'" in r.text
    bad_schema = {"input_schema": {"type": 5}, "tasks": [{"name": "a"}]}
    r = api.put("/v1/templates/t", json=bad_schema)
    assert r.status_code == 400 and "input_schema is not a valid JSON Schema" in r.text
    after = snapshot(engine.redis)
    after.pop(engine.keys.shard(0).http_counters, None)
    assert after == before


def test_abort_cancels_a_suspended_wait_and_wait_tasks_take_no_condition(engine: Engine) -> None:
    wf = Workflow("abort-wait")
    wf.task("approve", wait={"signal": "ok"})
    wf.task("a")
    wid = engine.push(wf)

    def handler(t: Task) -> Any:
        raise Abort("no")

    run_agent(engine, {"": handler})
    st = engine.status(wid)
    assert st.state.value == "failed" and st.reason == "abort"
    assert states(engine, wid) == {"approve": "cancelled", "a": "failed"}
    bad = Workflow("wait-when")
    bad.task("approve", wait={"signal": "ok"}, when="true")
    with pytest.raises(DefinitionError, match="a wait or run: task cannot have when"):
        engine.push(bad)


def test_the_claim_row_brings_the_condition_and_the_parents_states(engine: Engine) -> None:
    """The Lua half (start_task, when_extras) against the codec: a conditional task's row
    has its expression and its parents' states in their order; a plain task's has none;
    a report of "skip" records the reason and skips the children."""
    wf = Workflow("row")
    a = wf.task("a")
    b = wf.task("b")
    c = wf.task("c", after=[b, a], trigger="all_done", when='parents.a.state == "failed"')
    wf.task("d", after=[c])
    wid = engine.push(wf)
    hand = Hand(engine)
    first = {t.name: t for t in hand.claim()}
    assert first["a"]._when is None and first["b"]._when is None
    hand.fail(first["a"], "boom")
    hand.succeed(first["b"], {"n": 1})
    [row] = hand.claim()
    assert row.name == "c" and row._when == 'parents.a.state == "failed"'
    assert row._states == {"b": "succeeded", "a": "failed"}
    assert row.parents == {"b": {"n": 1}, "a": None}
    assert hand.report(row, "skip", "not today") == 1
    st = engine.status(wid)
    assert states(engine, wid)["d"] == "skipped" and st.tasks[2].skip_reason == "not today"
    assert st.state.value == "failed"  # a's failure is not handled
    assert_stats_agree(engine)
