"""Workflow inputs: one per run, stored once per workflow, seen by every task; the
definition stays shared across runs with different inputs."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from engine_helpers import cli, one_line_error, run_agent, scan_keys, snapshot

from engine import DefinitionError, Engine, Task, Workflow, exec_handler


def template() -> Workflow:
    wf = Workflow("import-file")
    a = wf.task("fetch")
    wf.task("load", after=[a])
    return wf


def test_every_task_sees_its_runs_input_and_the_definition_is_stored_once(
    engine: Engine,
) -> None:
    wf = template()
    inputs = [{"file": f"f{i}.csv", "rows": i} for i in range(50)]
    ids = engine.push_many([wf] * 50, inputs)
    seen: dict[tuple[str, str], object] = {}

    def handler(task: Task) -> object:
        seen[(task.workflow_id, task.name)] = task.input
        return task.input["rows"]

    run_agent(engine, {"": handler})
    for wid, given in zip(ids, inputs, strict=True):
        assert seen[(wid, "fetch")] == seen[(wid, "load")] == given
        status = engine.status(wid)
        assert status.input == given and status.state == "succeeded"
        assert status.to_dict()["input"] == given
    definitions = [k for k in scan_keys(engine.redis) if ":d:" in k]
    # 50 inputs, one stored definition (once on each shard that holds some of the runs)
    assert len({k.rsplit(":", 1)[1] for k in definitions}) == 1
    assert len(definitions) == len({engine.keys.shard_of(w) for w in ids})


def test_push_with_one_input_and_without(engine: Engine) -> None:
    with_input = engine.push(template(), input=[1, "two", None])
    without = engine.push(template())
    assert engine.status(with_input).input == [1, "two", None]
    assert engine.status(without).input is None


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({1, 2}, "not JSON-serialisable"),
        ("x" * 2000, "over the 1024-byte limit"),
        ("\ud800", "not valid Unicode"),
        (float("nan"), "not JSON-serialisable"),
    ],
)
def test_a_bad_input_is_refused_and_nothing_is_written(
    redis_url: str, value: object, says: str
) -> None:
    with Engine.connect(redis_url, max_payload=1024) as engine:
        before = snapshot(engine.redis)
        with pytest.raises(DefinitionError, match=says):
            engine.push(template(), input=value)
        assert snapshot(engine.redis) == before


def test_a_deeply_nested_input_is_refused(engine: Engine) -> None:
    deep: object = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(DefinitionError, match="nested too deeply"):
        engine.push(template(), input=deep)
    assert engine.count() == 0


def test_inputs_must_match_the_workflows(engine: Engine) -> None:
    with pytest.raises(DefinitionError, match="2 inputs for 3 workflows"):
        engine.push_many([template()] * 3, [1, 2])
    assert engine.count() == 0


def test_exec_handlers_get_the_input_in_their_json(engine: Engine) -> None:
    wid = engine.push(template(), input={"who": "exec"})
    script = "import json,sys; t=json.load(sys.stdin); print(json.dumps(t['input']['who']))"
    handler = exec_handler(f'{sys.executable} -c "{script}"')
    run_agent(engine, {"": handler})
    assert engine.status(wid).task("load").output == "exec"


def test_cli_push_input_json_and_file(engine: Engine, cli_env: dict, tmp_path: Path) -> None:
    flow = tmp_path / "flow.yaml"
    flow.write_text("name: cli-input\ntasks:\n  - name: a\n")
    out = cli("push", str(flow), "--input", '{"day": "2026-11-22"}', env=cli_env)
    assert out.returncode == 0, out.stderr
    wid = out.stdout.strip()
    status = cli("status", wid, "--json", env=cli_env)
    assert json.loads(status.stdout)["input"] == {"day": "2026-11-22"}
    text = cli("status", wid, env=cli_env)
    assert 'input {"day":"2026-11-22"}' in text.stdout
    given = tmp_path / "in.json"
    given.write_text("[1, 2, 3]")
    out = cli("push", str(flow), "--input", f"@{given}", "--copies", "2", env=cli_env)
    for wid in out.stdout.split():
        assert engine.status(wid).input == [1, 2, 3]


@pytest.mark.parametrize(
    ("arg", "says"),
    [("{nope", "the input is not JSON"), ("@/no/such/file.json", "cannot read the input file")],
)
def test_cli_bad_input_is_one_line_and_writes_nothing(
    engine: Engine, cli_env: dict, tmp_path: Path, arg: str, says: str
) -> None:
    flow = tmp_path / "flow.yaml"
    flow.write_text("name: cli-input\ntasks:\n  - name: a\n")
    before = snapshot(engine.redis)
    out = cli("push", str(flow), "--input", arg, env=cli_env)
    assert out.returncode == 2
    assert says in one_line_error(out)
    assert snapshot(engine.redis) == before


# Inputs of every stored form (codec.input_layout): one field, pieces, a key of its own;
# multi-byte characters across the pieces' cuts.
STORED_FORMS = {
    "one field": {"id": 7},
    "pieces": {"note": "é" * 30 + "€" * 10 + "😀" * 5},
    "own key": {"file": "s3://uploads/2026/11/00000001.csv", "rows": ["ünïcødé 😀"] * 40},
    "own key, 2 KB": {"blob": "a€😀" * 250},
}


def stored_values(engine: Engine, wid: str) -> dict[str, str]:
    return engine.redis.hgetall(engine.keys.shard_of(wid).workflow(wid))


@pytest.mark.parametrize("form", STORED_FORMS)
def test_every_stored_form_reads_back_identical_everywhere(
    engine: Engine, cli_env: dict, form: str
) -> None:
    given = STORED_FORMS[form]
    wf = template()
    ids = engine.push_many([wf] * 3, [given] * 3)
    raw = stored_values(engine, ids[0])
    own = engine.redis.get(engine.keys.shard_of(ids[0]).workflow_input(ids[0]))
    assert (raw["in"][0] == "#", "in2" in raw, own is not None) == {
        "one field": (False, False, False),
        "pieces": (True, True, False),
    }.get(form, (True, False, True))
    # no value the workflow hash holds is too long for a compact listpack (64 bytes)
    assert max(len(v.encode()) for v in raw.values()) <= 64
    assert engine.redis.object("encoding", engine.keys.shard_of(ids[0]).workflow(ids[0])) == (
        "listpack"
    )
    seen: list[object] = []

    def handler(task: Task) -> object:
        seen.append(task.input)
        return None

    run_agent(engine, {"": handler})
    assert seen == [given] * 6
    for wid in ids:
        assert engine.status(wid).input == given
    out = cli("status", ids[0], "--json", env=cli_env)
    assert json.loads(out.stdout)["input"] == given


@pytest.mark.parametrize("form", ["pieces", "own key"])
def test_an_exec_handler_gets_a_long_input_in_its_json(engine: Engine, form: str) -> None:
    given = STORED_FORMS[form]
    wid = engine.push(template(), input=given)
    script = "import json,sys; t=json.load(sys.stdin); print(json.dumps(t['input']))"
    handler = exec_handler(f'{sys.executable} -c "{script}"')
    run_agent(engine, {"": handler})
    status = engine.status(wid)
    assert status.task("fetch").output == status.task("load").output == given


@pytest.mark.parametrize("form", ["pieces", "own key"])
def test_cleanup_and_retention_leave_nothing_of_a_long_input(engine: Engine, form: str) -> None:
    given = STORED_FORMS[form]
    first, _ = engine.push_many([template()] * 2, [given] * 2)
    run_agent(engine, {"": lambda task: None})
    engine.cleanup(first)  # by hand
    assert [k for k in scan_keys(engine.redis) if f":w:{first}" in k] == []
    engine.retention_s = 0.001  # and by retention, in housekeeping
    time.sleep(0.01)
    assert engine.maintain()[3] == 1
    assert [k for k in scan_keys(engine.redis) if ":w:" in k] == []
    assert engine.count() == 0 and engine.stats().tasks.get("succeeded", 0) == 0


def test_map_items_see_their_workflows_long_input(engine: Engine) -> None:
    given = STORED_FORMS["own key"]
    wf = Workflow("items-input")
    split = wf.task("split")
    wf.task("each", map=split, concurrency=3)
    wid = engine.push(wf, input=given)
    seen: list[object] = []

    def handler(task: Task) -> object:
        seen.append(task.input)
        return [1, 2, 3, 4, 5] if task.name == "split" else task.item

    run_agent(engine, {"": handler})
    assert engine.status(wid).state == "succeeded"
    assert seen == [given] * 6
