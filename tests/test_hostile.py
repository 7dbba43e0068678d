"""Hostile and oversized input: refused quickly, in one line naming what and where, with
nothing written; big legal workflows load; the CLI survives odd names and arguments."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import BIN, Hand, snapshot

from engine import DefinitionError, Engine, Workflow, load_file, load_text
from engine.cli.main import run
from engine.spec.definition import DEFAULT_MAX_TASKS, MAX_DEPTH, MAX_FILE_DEPTH, validate

DIGITS = 5000  # past Python's 4,300-digit int/str conversion limit


def _alias_bomb(levels: int = 9, width: int = 9) -> str:
    lines = ['a0: &a0 ["lol"]']
    for i in range(1, levels + 1):
        refs = ", ".join(f"*a{i - 1}" for _ in range(width))
        lines.append(f"a{i}: &a{i} [{refs}]")
    body = "\n".join("      " + line for line in lines)
    return f"name: w\ntasks:\n  - name: t\n    payload:\n{body}\n"


def _native_json(task: dict[str, Any], name: str = "w") -> str:
    return json.dumps({"name": name, "tasks": [task]}, indent=1)


# name -> (file name, content, pattern the one-line message must match)
HOSTILE: dict[str, tuple[str, str, str]] = {
    "long integer payload (JSON)": (
        "w.json",
        '{"name": "w",\n "tasks": [{"name": "a", "payload": ' + "9" * DIGITS + "}]}",
        r"w.json:2: invalid JSON: an integer of more than \d+ digits",
    ),
    "long integer priority (YAML)": (
        "w.yaml",
        "name: w\ntasks:\n  - name: a\n    priority: " + "9" * DIGITS + "\n",
        r"w.yaml:4:15: invalid YAML: a number of more than \d+ digits",
    ),
    "payload nested 5,000 deep (JSON)": (
        "w.json",
        '{"name": "w", "tasks": [{"name": "a", "payload": ' + "[" * 5000 + "]" * 5000 + "}]}",
        rf"w.json:1: invalid JSON: nested more than {MAX_FILE_DEPTH} levels deep",
    ),
    "payload nested 150 deep (JSON)": (
        "w.json",
        '{"name": "w", "tasks": [{"name": "a", "payload": ' + "[" * 150 + "]" * 150 + "}]}",
        rf"w.json:1: invalid JSON: nested more than {MAX_FILE_DEPTH} levels deep",
    ),
    "payload nested 5,000 deep (YAML flow)": (
        "w.yaml",
        "name: w\ntasks:\n  - name: a\n    payload: " + "[" * 5000 + "]" * 5000 + "\n",
        rf"w.yaml:4:\d+: invalid YAML: nested more than {MAX_FILE_DEPTH} levels deep",
    ),
    "payload nested 1,000 deep (YAML block)": (
        "w.yaml",
        "name: w\ntasks:\n  - name: a\n    payload:\n"
        + "".join(" " * (6 + i) + f"k{i}:\n" for i in range(1000)),
        rf"w.yaml:\d+:\d+: invalid YAML: nested more than {MAX_FILE_DEPTH} levels deep",
    ),
    "lone surrogate in a task name (JSON)": (
        "w.json",
        '{"name": "w", "tasks": [{"name": "\\ud800"}]}',
        r"w.json:1: task name '\\ud800' holds '\\ud800' at 0: no control characters",
    ),
    "lone surrogate in a workflow name (JSON)": (
        "w.json",
        '{"name": "a\\udfffb", "tasks": [{"name": "a"}]}',
        r"w.json:1: workflow name 'a\\udfffb' holds",
    ),
    "lone surrogate in a type (JSON)": (
        "w.json",
        '{"name": "w", "tasks": [{"name": "a", "type": "\\ud800"}]}',
        r"w.json:1: task 'a': type '\\ud800' holds",
    ),
    "lone surrogate in a payload (JSON)": (
        "w.json",
        '{"name": "w", "tasks": [{"name": "a", "payload": ["\\ud800"]}]}',
        r"w.json:1: task 'a': payload holds a lone surrogate",
    ),
    "lone surrogate in a payload key (JSON)": (
        "w.json",
        '{"name": "w", "tasks": [{"name": "a", "payload": {"\\ud800": 1}}]}',
        r"w.json:1: task 'a': payload holds a lone surrogate",
    ),
    "lone surrogate escape (YAML)": (
        "w.yaml",
        'name: "\\ud800"\ntasks: [{name: a}]\n',
        r"w.yaml:1:\d+: invalid YAML: ",
    ),
    "task list: a name that is a list": (
        "w.yaml",
        "- Name: [a]\n  Parents: []\n",
        r"w.yaml:1: a task's Name must be a string, not \['a'\]",
    ),
    "task list: a workflow name that is a map": (
        "w.yaml",
        "Name: {a: 1}\nTasks:\n  - Name: a\n",
        r"w.yaml:1: workflow name must be a string, not \{'a': 1\}",
    ),
    "task list: Tasks: 3": ("w.yaml", "Name: w\nTasks: 3\n", r"w.yaml:1: 'Tasks' must be a list"),
    "task list: Parents that is a map": (
        "w.yaml",
        "- Name: a\n  Parents: {b: 1}\n",
        r"w.yaml:1: Parents must be a list of task names",
    ),
    "steps manager: steps given as strings": (
        "w.yaml",
        "workflows:\n  - name: w\n    steps: [a, b]\n",
        r"w.yaml: a step must be a mapping, not str",
    ),
    "steps manager: a step name that is a list": (
        "w.yaml",
        "workflows:\n  - name: w\n    steps:\n      - name: [a]\n",
        r"w.yaml:4: a step's name must be a string",
    ),
    "steps manager: a task used by a list": (
        "w.yaml",
        "workflows:\n  - name: w\n    steps:\n      - {name: a, task: [x]}\n",
        r"w.yaml:4: step 'a': task must be a string",
    ),
    "steps manager: a sub-task's steps as a string": (
        "w.yaml",
        "workflows:\n  - name: w\n    steps:\n      - {name: a, task: x}\n"
        "    tasks:\n      - {name: x, steps: abc}\n",
        r"w.yaml:4: task 'x': 'steps' must be a list",
    ),
    "steps manager: tasks: 3": (
        "w.yaml",
        "workflows:\n  - name: w\n    steps: [{name: a}]\n    tasks: 3\n",
        r"w.yaml:2: 'tasks' must be a list",
    ),
    "steps manager: workflows: 3": (
        "w.yaml", "workflows: 3\n", r"w.yaml:1: 'workflows' must be a list"
    ),
    "YAML alias bomb": (
        "w.yaml",
        _alias_bomb(),
        r"w.yaml:\d+:\d+: invalid YAML: aliases expand the document past \d+ values",
    ),
    "recursive YAML alias": (
        "w.yaml",
        "name: w\ntasks: [{name: a, payload: &x [*x]}]\n",
        r"w.yaml:2:\d+: invalid YAML: alias \*x refers to a node that contains it",
    ),
    "NUL in YAML": ("w.yaml", "name: w\x00\ntasks: []\n", r"w.yaml:1: invalid YAML: .*U\+0000"),
    "NUL in a JSON string": (
        "w.json",
        '{"name": "w\x00", "tasks": []}',
        r"w.json:1:\d+: invalid JSON: Invalid control character",
    ),
    "escaped NUL in a task name": (
        "w.json",
        '{"name": "w", "tasks": [{"name": "a\\u0000b"}]}',
        r"w.json:1: task name 'a\\x00b' holds '\\x00' at 1",
    ),
    "line break in a workflow name": (
        "w.yaml",
        'name: "a\\nb"\ntasks: [{name: a}]\n',
        r"w.yaml:1: workflow name 'a\\nb' holds '\\n' at 1",
    ),
    "line separator in a type": (
        "w.yaml",
        'name: w\ntasks: [{name: a, type: "x\\Ly"}]\n',
        r"w.yaml:2: task 'a': type 'x\\u2028y' holds",
    ),
    "control characters in an unknown field": (
        "w.yaml",
        'name: w\ntasks: [{name: a, "b\\x01\\nc": 1}]\n',
        r"w.yaml:2: task 'a' has unknown field 'b\\x01\\nc'",
    ),
    "empty task name": (
        "w.json",
        _native_json({"name": ""}),
        r"w.json:4: a task of workflow 'w' has no name",
    ),
    "blank type": (
        "w.json",
        _native_json({"name": "a", "type": "  "}),
        r"w.json:4: task 'a': type is only blanks",
    ),
    "name of 5,000 characters": (
        "w.yaml",
        "name: " + "x" * 5000 + "\ntasks: [{name: a}]\n",
        r"w.yaml:1: workflow name is 5000 characters long; at most 1000",
    ),
    "NaN in JSON": (
        "w.json",
        '{"name": "w", "tasks": [{"name": "a", "payload": NaN}]}',
        r"w.json:1: invalid JSON: NaN is not a JSON value",
    ),
    "infinity in YAML": (
        "w.yaml",
        "name: w\ntasks: [{name: a, payload: [.inf]}]\n",
        r"w.yaml:2: task 'a': payload is not JSON-serialisable",
    ),
    "python tag in YAML": (
        "w.yaml",
        "name: !!python/object/apply:os.system [echo]\ntasks: []\n",
        r"w.yaml:1:\d+: invalid YAML: unsupported tag",
    ),
    "two YAML documents": ("w.yaml", "name: w\n---\nname: x\n", r"w.yaml:2:1: invalid YAML: "),
    "a list as a mapping key": ("w.yaml", "? [a]\n: 1\n", r"w.yaml:1:\d+: invalid YAML: a mapping"),
    "a duplicate key in a JSON payload": (
        "w.json",
        '{"name": "w",\n "tasks": [{"name": "a", "payload": {"x": 1, "x": 2}}]}',
        r"w.json:2: invalid JSON: duplicate key 'x'",
    ),
    "a long cycle, shown short": (
        "w.json",
        json.dumps(
            {
                "name": "w",
                "tasks": [{"name": f"t{i}", "after": [f"t{(i - 1) % 500}"]} for i in range(500)],
            }
        ),
        r"^w.json:1: workflow .w. has a cycle: t0 -> .* \.\.\. \d+ more -> .{0,60}$",
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_input_is_refused_in_one_line(case: str) -> None:
    name, text, pattern = HOSTILE[case]
    start = time.perf_counter()
    with pytest.raises(DefinitionError) as e:
        for wf in load_text(text, name):
            validate(wf)
    elapsed = time.perf_counter() - start
    message = str(e.value)
    assert message.isprintable(), repr(message)
    assert re.search(pattern, message), message
    assert elapsed < 5, f"{case}: {elapsed:.1f}s"  # a guard against hangs, not a benchmark


@pytest.mark.parametrize("parser", ["CSafeLoader", "SafeLoader"])
@pytest.mark.parametrize("opener", ["[", "{a: "])
def test_deep_yaml_flow_gets_our_message_from_either_parser(
    parser: str, opener: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libyaml refuses flow nesting past its own limit before the events reach ours:
    the message is the same either way (and with the pure-Python parser, which has none)."""
    import yaml

    from engine.spec import loader

    if not hasattr(yaml, parser):
        pytest.skip(f"PyYAML without {parser}")
    monkeypatch.setattr(loader, "_YAMLParser", getattr(yaml, parser))
    closer = "]" if opener == "[" else "}"
    text = "name: w\ntasks:\n  - name: a\n    payload: " + opener * 5000 + closer * 5000 + "\n"
    with pytest.raises(DefinitionError) as e:
        load_text(text, "w.yaml")
    assert re.fullmatch(
        rf"w.yaml:4:\d+: invalid YAML: nested more than {MAX_FILE_DEPTH} levels deep",
        str(e.value),
    )


@pytest.mark.parametrize(
    "case",
    ["long integer payload (JSON)", "YAML alias bomb", "line break in a workflow name"],
)
def test_hostile_push_exits_2_and_writes_nothing(
    case: str, redis_url: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, text, pattern = HOSTILE[case]
    path = tmp_path / name
    path.write_text(text)
    before = snapshot(engine.redis)  # empty but for a cluster's stored layout
    assert cli_run(["push", str(path), "--url", redis_url]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("redisflow: "), err
    assert re.search(pattern, err), err
    assert snapshot(engine.redis) == before


def test_hostile_push_through_the_console_script(
    cli_env: dict[str, str], engine: Engine, tmp_path: Path
) -> None:
    path = tmp_path / "w.json"
    path.write_text(HOSTILE["lone surrogate in a task name (JSON)"][1])
    before = snapshot(engine.redis)  # empty but for a cluster's stored layout
    result = subprocess.run(
        [str(BIN / "redisflow"), "push", str(path)],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    assert "holds '\\ud800'" in result.stderr
    assert snapshot(engine.redis) == before


def test_yaml_merge_keys_are_applied() -> None:
    text = (
        "name: w\ntasks:\n"
        "  - &base {name: a, type: io, priority: 3, payload: {k: 1}}\n"
        "  - <<: *base\n    name: b\n    priority: 4\n    after: a\n"
        "  - <<: [{name: c, type: x}, *base]\n    after: [a, b]\n"
    )
    [wf] = load_text(text, "m.yaml")
    a, b, c = wf.tasks
    assert (b.name, b.type, b.priority, b.payload, b.after) == ("b", "io", 4, {"k": 1}, ["a"])
    assert (c.name, c.type, c.priority) == ("c", "x", 3)  # the first mapping listed wins
    assert b.where == "m.yaml:4"
    validate(wf)
    with pytest.raises(DefinitionError, match=r"m.yaml:2:\d+: invalid YAML: duplicate key 'x'"):
        load_text("name: w\ntasks: [{<<: {x: 1}, x: 2, x: 3}]\n", "m.yaml")
    with pytest.raises(DefinitionError, match="a merge key"):
        load_text("name: w\ntasks: [{<<: 3, name: a}]\n", "m.yaml")


def test_markup_and_unicode_names_load() -> None:
    [wf] = load_text("name: '[/]'\ntasks: [{name: '[bold]', type: 'é:{x}*'}]\n", "r.yaml")
    validate(wf)
    assert (wf.name, wf.tasks[0].name, wf.tasks[0].type) == ("[/]", "[bold]", "é:{x}*")


def _write(path: Path, doc: dict[str, Any]) -> None:
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text = json.dumps(doc) if path.suffix == ".json" else yaml.dump(doc, Dumper=dumper)
    path.write_text(text)


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_max_tasks_is_refused_before_the_tasks_are_built(suffix: str, tmp_path: Path) -> None:
    tasks = [{"name": f"t{i}"} for i in range(11)]
    path = tmp_path / f"w{suffix}"
    _write(path, {"name": "w", "tasks": tasks})
    with pytest.raises(DefinitionError, match=r"w\.(json|yaml):\d+: more than 10 tasks"):
        load_file(path, max_tasks=10)
    [wf] = load_file(path, max_tasks=11)
    with pytest.raises(DefinitionError, match="has 11 tasks; at most 10"):
        validate(wf, max_tasks=10)
    _write(path, {"workflows": [{"name": "w", "steps": tasks}]})
    with pytest.raises(DefinitionError, match="more than 10 tasks"):
        load_file(path, max_tasks=10)
    _write(path, {"Name": "w", "Tasks": [{"Name": t["name"]} for t in tasks]})
    with pytest.raises(DefinitionError, match="more than 10 tasks"):
        load_file(path, max_tasks=10)


def test_push_max_tasks_option(
    redis_url: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "w.json"
    _write(path, {"name": "w", "tasks": [{"name": f"t{i}"} for i in range(5)]})
    before = snapshot(engine.redis)  # empty but for a cluster's stored layout
    assert cli_run(["push", str(path), "--url", redis_url, "--max-tasks", "4"]) == 2
    assert "more than 4 tasks" in capsys.readouterr().err
    assert snapshot(engine.redis) == before
    assert cli_run(["push", str(path), "--url", redis_url, "--max-tasks", "5"]) == 0
    too_many = str(DEFAULT_MAX_TASKS + 1)
    assert cli_run(["push", str(path), "--url", redis_url, "--max-tasks", too_many]) == 2
    assert f"must be at most {DEFAULT_MAX_TASKS}" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_200k_tasks_are_refused_and_a_100k_chain_loads(suffix: str, tmp_path: Path) -> None:
    path = tmp_path / f"big{suffix}"
    if suffix == ".json":
        _write(path, {"name": "w", "tasks": [{"name": f"t{i}"} for i in range(200_000)]})
    else:  # written by hand: the YAML dumper takes longer than the test
        path.write_text("name: w\ntasks:\n" + "".join(f"- name: t{i}\n" for i in range(200_000)))
    with pytest.raises(DefinitionError, match=f"big{suffix}:\\d+: more than {DEFAULT_MAX_TASKS}"):
        load_file(path)
    if suffix == ".json":
        tasks: list[dict[str, Any]] = [{"name": "t0"}]
        tasks += [{"name": f"t{i}", "after": [f"t{i - 1}"]} for i in range(1, DEFAULT_MAX_TASKS)]
        _write(path, {"name": "w", "tasks": tasks})
    else:
        path.write_text(
            "name: w\ntasks:\n- name: t0\n"
            + "".join(f"- name: t{i}\n  after: [t{i - 1}]\n" for i in range(1, DEFAULT_MAX_TASKS))
        )
    [wf] = load_file(path)
    assert len(validate(wf)) == DEFAULT_MAX_TASKS
    assert wf.tasks[-1].after == [f"t{DEFAULT_MAX_TASKS - 2}"]


BAD_BUILDS: dict[str, tuple[Callable[[Workflow], Any], str]] = {
    "name is a list": (lambda wf: wf.task(["a"]), r"task name must be a string"),  # type: ignore[arg-type]
    "type is a number": (lambda wf: wf.task("a", type=3), r"type must be a string"),  # type: ignore[arg-type]
    "after is a number": (lambda wf: wf.task("a", after=3), r"after must be a list"),  # type: ignore[arg-type]
    "after holds a list": (lambda wf: wf.task("a", after=[["x"]]), r"a parent must be a task name"),  # type: ignore[list-item]
    "huge priority": (lambda wf: wf.task("a", priority=10**5000), r"priority <an integer"),
    "huge max_attempts": (
        lambda wf: wf.task("a", max_attempts=10**5000),
        r"max_attempts must be at most",
    ),
    "huge integer payload": (lambda wf: wf.task("a", payload=10**5000), r"not JSON-serialisable"),
    "deep payload": (lambda wf: wf.task("a", payload=_nested(2000)), r"nested more than"),
    "self-containing payload": (lambda wf: wf.task("a", payload=_self_list()), r"contains itself"),
    "shared-reference bomb": (lambda wf: wf.task("a", payload=_bomb()), r"more than \d+ values"),
    "surrogate payload": (lambda wf: wf.task("a", payload="\udc80"), r"lone surrogate"),
    "surrogate name": (lambda wf: wf.task("a\udc80"), r"task name 'a\\udc80' holds"),
    "NaN payload": (lambda wf: wf.task("a", payload=float("nan")), r"not JSON-serialisable"),
    "object payload": (lambda wf: wf.task("a", payload=object()), r"not JSON-serialisable"),
    "not a task": (lambda wf: wf.tasks.append("a"), r"not a task: 'a'"),  # type: ignore[arg-type]
}


def cli_run(args: list[str]) -> int:
    """``redisflow ARGS`` in this process, as its entry point exits."""
    try:
        return run(args)
    except SystemExit as e:  # argparse's usage errors
        return e.code if isinstance(e.code, int) else 2


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def _self_list() -> list[Any]:
    value: list[Any] = []
    value.append(value)
    return value


def _bomb() -> list[Any]:
    value: list[Any] = ["lol"]
    for _ in range(9):
        value = [value] * 9
    return value


@pytest.mark.parametrize("case", sorted(BAD_BUILDS))
def test_a_bad_workflow_built_in_python_raises_definition_error(case: str) -> None:
    build, pattern = BAD_BUILDS[case]
    start = time.perf_counter()
    with pytest.raises(DefinitionError) as e:
        wf = Workflow("w")
        build(wf)
        validate(wf)
    assert re.search(pattern, str(e.value)), str(e.value)
    assert str(e.value).isprintable()
    assert time.perf_counter() - start < 5


def test_huge_backoffs_are_refused() -> None:
    for bad in (10**5000, 1e300, True):
        wf = Workflow("w", retry_backoff=bad)
        wf.task("a")
        with pytest.raises(DefinitionError, match="retry_backoff must be a number of seconds"):
            validate(wf)


# -- the CLI -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["status", "nope"],
        ["cancel", "nope"],
        ["cleanup", "nope"],
        ["pause", "1x"],
        ["release", "-1"],
        ["retry", "٣"],  # a digit, but not an ASCII one
        ["status", "9" * 5000],
        ["list", "--name", "a\nb"],
        ["retry", "1", "--task", "\udcff"],
    ],
)
def test_bad_arguments_exit_2_in_one_line(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Refused while parsing arguments: no Redis is needed, none is started.
    assert cli_run([*args, "--url", "redis://127.0.0.1:1/0"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("redisflow"), err
    assert err.isprintable() or err.endswith("\n") and err[:-1].isprintable(), repr(err)


def test_markup_in_names_does_not_break_text_output(
    redis_url: str, engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    wf = Workflow("[/]w[bold")
    wf.task("[/]a", type="[red]")
    wid = engine.push(wf)
    Hand(engine, agent_id="[/]agent")
    for args in (["status", wid], ["list"], ["agents"], ["stats"]):
        assert cli_run([*args, "--url", redis_url]) == 0, args
    printed = capsys.readouterr().out
    for text in ("[/]w[bold", "[/]a", "[red]", "[/]agent"):
        assert text in printed, (text, printed)


def test_agent_refuses_a_non_utf8_id_in_one_line(cli_env: dict[str, str]) -> None:
    for bad in (b"\xff\xfeagent", b"a\nb"):
        result = subprocess.run(
            [str(BIN / "redisflow-agent"), b"--id", bad, "--exec", "cat", "--until-idle"],
            env=cli_env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        err = result.stderr.decode("utf-8", "replace")
        assert result.returncode == 2, err
        assert len(err.splitlines()) == 1 and "--id" in err, err
    result = subprocess.run(
        [str(BIN / "redisflow-agent"), "--type", "a\x01", "--exec", "cat"],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr


def _deep(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


def _as_yaml(doc: Any, block: bool) -> str:
    import yaml

    return str(yaml.safe_dump(doc, default_flow_style=not block, width=10**6))


def test_depth_counts_the_same_in_json_and_yaml(engine: Engine) -> None:
    """A payload nests MAX_DEPTH levels, counted from itself, in JSON and YAML alike (at a
    task, and in a map's step, the deepest place a file puts one); one level more is
    refused by both in the same words; a file nested past MAX_FILE_DEPTH anywhere is
    refused by both in the same words."""
    ok, over = _deep(MAX_DEPTH), _deep(MAX_DEPTH + 1)

    def files(payload: Any, in_step: bool = False) -> dict[str, str]:
        task: dict[str, Any] = {"name": "a", "payload": payload}
        tasks: list[dict[str, Any]] = [task]
        if in_step:
            tasks = [
                {"name": "split"},
                {"name": "a", "after": ["split"], "map": {"over": "split", "key": "x"},
                 "steps": [{"name": "s", "payload": payload}]},
            ]  # fmt: skip
        doc = {"name": "w", "tasks": tasks}
        return {
            "w.json": json.dumps(doc),
            "w.yaml": _as_yaml(doc, block=True),
            "w.yml": _as_yaml(doc, block=False),
        }

    for in_step in (False, True):
        for source, text in files(ok, in_step).items():
            wf = load_text(text, source)[0]
            engine.compile(wf)
            if not in_step:
                assert wf.tasks[0].payload == ok, source
                wid = engine.push(wf)
                assert engine.status(wid).tasks[0].payload == ok, source
        said = set()
        for source, text in files(over, in_step).items():
            with pytest.raises(DefinitionError) as e:
                engine.compile(load_text(text, source)[0])
            said.add(re.sub(r"^w\.(?:json|ya?ml)(?::\d+)?", "", str(e.value)))
        assert len(said) == 1, said
        assert f"payload is nested more than {MAX_DEPTH} levels deep" in said.pop()
    schema: Any = {}
    for _ in range(MAX_FILE_DEPTH):
        schema = {"not": schema}
    doc = {"name": "w", "input_schema": schema, "tasks": [{"name": "a"}]}
    for source, text in {
        "w.json": json.dumps(doc),
        "w.yaml": _as_yaml(doc, block=True),
        "w.yml": _as_yaml(doc, block=False),
    }.items():
        with pytest.raises(
            DefinitionError, match=rf"nested more than {MAX_FILE_DEPTH} levels deep"
        ):
            load_text(text, source)
