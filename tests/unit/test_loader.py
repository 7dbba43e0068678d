"""Workflow files: the native form, the steps manager's steps and redis.workflow's task list
(no Redis)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from engine import DefinitionError, load_file, load_text
from engine.spec.definition import validate

ROOT = Path(__file__).resolve().parents[2]

NATIVE = """\
name: report
retry_backoff: 0.5
retry_backoff_max: 30
tasks:
  - name: fetch
    type: io
    payload: {url: "http://x"}
    priority: 5
    max_attempts: 3
  - name: parse
    after: fetch
  - name: build
    after: [fetch, parse]
"""


def test_native_yaml() -> None:
    [wf] = load_text(NATIVE, "r.yaml")
    assert wf.name == "report" and wf.retry_backoff == 0.5 and wf.retry_backoff_max == 30
    fetch, parse, build = wf.tasks
    assert (fetch.type, fetch.payload, fetch.priority, fetch.max_attempts) == (
        "io",
        {"url": "http://x"},
        5,
        3,
    )
    assert parse.after == ["fetch"] and parse.type == "" and parse.payload is None
    assert build.after == ["fetch", "parse"]
    assert [t.where for t in wf.tasks] == ["r.yaml:5", "r.yaml:10", "r.yaml:12"]
    validate(wf)


def test_native_json_is_read_as_json() -> None:
    text = (
        '{\n\t"name": "j",\n\t"tasks": [\n\t\t{"name": "a", "payload": 1e3},\n'
        '\t\t{"name": "b", "payload": "\\ud83d\\ude00 \\/", "after": ["a"]}\n\t]\n}\n'
    )
    [wf] = load_text(text, "w.json")
    a, b = wf.tasks
    assert a.payload == 1000.0 and isinstance(a.payload, float)
    assert b.payload == "\U0001f600 /"
    assert (a.where, b.where) == ("w.json:4", "w.json:5")


def test_native_json_round_trips_what_json_dumps_writes(tmp_path: Path) -> None:
    doc = {
        "name": "dumped",
        "tasks": [
            {"name": "a", "payload": {"n": [1, 2.5, None, True], "s": "x\ty\n"}},
            {"name": "b", "after": ["a"], "priority": -3},
        ],
    }
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc, indent="\t"))
    [wf] = load_file(path)
    assert wf.tasks[0].payload == doc["tasks"][0]["payload"]
    assert wf.tasks[1].priority == -3


def test_steps_book_word_counts() -> None:
    [wf] = load_file(ROOT / "demos" / "steps-book-word-counts.yaml")
    assert wf.name == "book-word-counts"
    by = {t.name: t for t in wf.tasks}
    assert set(by) == {"book-split", "section-counts", "sum-splits", "store-title"}
    # each step's queue is its name; the map's items run the sub-task's step
    assert {n: t.type for n, t in by.items()} == {
        "book-split": "book-split",
        "section-counts": "segment-word-counts",
        "sum-splits": "sum-splits",
        "store-title": "store-title",
    }
    assert by["section-counts"].after == ["book-split"]
    assert by["sum-splits"].after == ["section-counts"]
    assert by["store-title"].after == []
    spec = by["section-counts"].map
    assert spec is not None and (spec.over, spec.key) == ("book-split", "sections")
    assert spec.gather == "sections"  # the manager's gather: its output is one object
    assert by["section-counts"].payload == {
        "task": "word-counts",
        "itemListKey": "sections",
        "item": "section",
        "steps": ["segment-word-counts"],
    }
    assert by["sum-splits"].payload is None  # it reads the gather, its parent's output
    validate(wf)


def test_steps_other_documented_fields() -> None:
    text = (
        "workflows:\n  - name: w\n    vhosts: [a, b]\n    steps:\n"
        "      - name: a\n        depends: [__start__]\n"
    )
    [wf] = load_text(text, "s.yaml")
    assert wf.tasks[0].after == []


@pytest.mark.parametrize(
    ("tasks", "says"),
    [
        (
            "      itemListKey: s\n      steps: [{name: x, task: t}, {name: y}]\n",
            "a task inside a task's steps is not supported",
        ),
        ("      itemListKey: s\n      steps: []\n", "task 't' has no steps"),
        ("      steps: [{name: x}]\n      itemListKey: 3\n", "itemListKey must be a string"),
        ("      steps: [{name: x}]\n", "needs an itemListKey"),
    ],
)
def test_steps_maps_it_cannot_run_are_refused(tasks: str, says: str) -> None:
    text = (
        "workflows:\n  - name: w\n    steps:\n      - name: a\n"
        "      - name: b\n        task: t\n        depends: [a]\n"
        "    tasks:\n    - name: t\n" + tasks
    )
    with pytest.raises(DefinitionError, match=says):
        load_text(text, "s.yaml")


def test_native_map() -> None:
    text = (
        "name: m\ntasks:\n  - name: split\n"
        "  - name: count\n    map: {over: split, key: sections, concurrency: 10, "
        "tolerate: '5%', on_empty: skip}\n"
        "  - name: total\n    after: [count]\n"
    )
    [wf] = load_text(text, "m.yaml")
    count = wf.tasks[1]
    assert count.after == ["split"] and count.map is not None
    assert (count.map.key, count.map.concurrency, count.map.tolerate, count.map.on_empty) == (
        "sections", 10, "5%", "skip",
    )  # fmt: skip
    bad = "name: m\ntasks:\n  - name: a\n    map: {key: x}\n"
    with pytest.raises(DefinitionError, match="^m.yaml:3: map needs 'over'"):
        load_text(bad, "m.yaml")


def test_task_list_priority_keeps_its_meaning() -> None:
    text = "- {Name: a, Priority: 5}\n- {Name: b, Priority: -2}\n- {Name: c, Priority: 100000}\n"
    [wf] = load_text(text, "p.yaml")
    # redis.workflow runs the lowest Priority first; redisflow the highest
    assert [t.priority for t in wf.tasks] == [-5, 2, -999]


def test_steps_queue_and_unknown_task() -> None:
    text = "workflows:\n  - name: w\n    steps:\n      - name: a\n        queue: q1\n"
    [wf] = load_text(text, "s.yaml")
    assert wf.tasks[0].type == "q1"
    bad = "workflows:\n  - name: w\n    steps:\n      - name: a\n        task: nope\n"
    with pytest.raises(DefinitionError, match=r"^s.yaml:4: step 'a' uses unknown task 'nope'"):
        load_text(bad, "s.yaml")


def test_task_list_sample() -> None:
    [wf] = load_file(ROOT / "demos" / "task-list-sample.yaml")
    assert wf.name == "TestWorkflow"
    assert [(t.name, t.payload, t.after) for t in wf.tasks] == [
        ("TestNode1", "Node1", []),
        ("TestNode2", "Node2", ["TestNode1"]),
        ("TestNode3", "Node3", ["TestNode2"]),
        ("TestNode4", "Node4", ["TestNode2"]),
    ]


def test_task_list_bare_list_takes_workflow_name_from_tasks() -> None:
    text = (
        "- {Name: a, Workflow: wf1, Type: t, Payload: {k: 1}, Children: [b]}\n"
        "- {Name: b, Parents: [a], Priority: 2}\n"
    )
    [wf] = load_text(text, "list.yaml")
    assert wf.name == "wf1"
    # redis.workflow pops the lowest Priority first: the sign flips into redisflow's
    assert wf.tasks[0].type == "t" and wf.tasks[1].priority == -2


TASK_LIST_BAD = [
    (
        "- {Name: a, Children: [b]}\n- {Name: b}\n",
        "list.yaml:1: task 'a' lists 'b' as a child, but 'b' does not list 'a' among its Parents",
    ),
    (
        "- {Name: a, Children: []}\n- {Name: b, Parents: [a]}\n",
        "list.yaml:2: task 'b' lists 'a' as a parent, but 'a' does not list 'b' among its Children",
    ),
    ("- {Name: a, Children: [zz]}\n", "list.yaml:1: task 'a' lists unknown child 'zz'"),
    (
        "- {Name: a}\n- {Name: a, Children: [b]}\n- {Name: b, Parents: [a]}\n",
        "list.yaml:2: duplicate task name 'a' (first defined at list.yaml:1)",
    ),
    ("- {Name: a, Colour: red}\n", "list.yaml:1: task 'a' has unknown field 'Colour'"),
]


@pytest.mark.parametrize(("text", "message"), TASK_LIST_BAD)
def test_task_list_errors(text: str, message: str) -> None:
    with pytest.raises(DefinitionError) as e:
        load_text(text, "list.yaml")
    assert str(e.value).startswith(message)


def test_unknown_parent_is_caught_at_validation_with_its_line() -> None:
    [wf] = load_text("- {Name: a}\n- {Name: b, Parents: [ghost]}\n", "list.yaml")
    with pytest.raises(DefinitionError, match="^list.yaml:2: task 'b' depends on unknown task"):
        validate(wf)


@pytest.mark.parametrize(
    ("text", "source", "pattern"),
    [
        ("name: x\ntasks:\n  - name: a\n   after: [b\n", "w.yaml", r"^w.yaml:4:\d+: invalid YAML"),
        ("name: x\ntasks: [\n", "w.yaml", r"^w.yaml:3:\d+: invalid YAML: "),
        ("name: x\n\ttasks: []\n", "w.yaml", r"^w.yaml:2:\d+: invalid YAML: "),
        ("name: x\nname: y\ntasks: []\n", "w.yaml", r"^w.yaml:2:1: invalid YAML: duplicate key"),
        ('{"name": "x",\n "tasks": [,]}', "w.json", r"^w.json:2:\d+: invalid JSON: "),
        ('{"name": "x",\n "tasks": []', "w.json", r"^w.json:2:\d+: invalid JSON: "),
        ("", "w.yaml", r"^w.yaml: the file is empty$"),
        ("  \n", "w.json", r"^w.json: the file is empty$"),
        ("just text", "w.yaml", r"^w.yaml: not a workflow file"),
        ("name: x\ntasks: 3\n", "w.yaml", r"^w.yaml:1: 'tasks' must be a list"),
        (
            "name: x\ntasks:\n  - name: a\n    colour: red\n",
            "w.yaml",
            r"^w.yaml:3: task 'a' has unknown field 'colour'",
        ),
        (
            "name: x\ntasks:\n  - name: a\n    after: [1]\n",
            "w.yaml",
            r"^w.yaml:3: after must be a list of task names",
        ),
        ("name: x\ntasks:\n  - just a string\n", "w.yaml", r"^w.yaml: a task must be a mapping"),
    ],
)
def test_malformed_files_name_file_and_line(text: str, source: str, pattern: str) -> None:
    with pytest.raises(DefinitionError) as e:
        load_text(text, source)
    message = str(e.value)
    assert re.search(pattern, message), message
    assert "\n" not in message


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(DefinitionError, match="no such file"):
        load_file(tmp_path / "absent.yaml")
    with pytest.raises(DefinitionError, match="cannot read"):
        load_file(tmp_path)
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(DefinitionError, match="cannot read"):
        load_file(bad)
