"""A task's options are declared once (engine/spec/options.py, TASK_OPTIONS): the places
that still spell them out (Workflow.task's keywords, TaskDef's fields) agree with it, and
so do the loader's keys and the codec's fields it names."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from engine.errors import DefinitionError
from engine.spec.definition import TaskDef, Workflow, validate
from engine.spec.loader import MAP_FIELDS, NATIVE_TASK, load_text
from engine.spec.options import BY_KEY, BY_NAME, REQUIRED, TASK_CHECKS, TASK_OPTIONS, Form
from engine.store.codec import fields


def test_workflow_task_takes_every_option_as_declared() -> None:
    """Each keyword of Workflow.task is an option, with the option's type and default."""
    params = list(inspect.signature(Workflow.task).parameters.values())[1:]  # past self
    assert [p.name for p in params if p.kind is not p.KEYWORD_ONLY] == ["name", "payload"]
    given = {p.name: (p.annotation, p.default) for p in params}
    declared = {
        o.name: (o.hint, inspect.Parameter.empty if o.default is REQUIRED else o.default)
        for o in TASK_OPTIONS
    }
    assert given == declared


def test_taskdef_holds_every_option_but_the_maps() -> None:
    """TaskDef's fields are the options a task holds itself, in no other order of
    importance; its map holds the rest (``within="map"``)."""
    own = {o.name for o in TASK_OPTIONS if o.within is None}
    assert {f.name for f in dataclasses.fields(TaskDef)} == own
    for o in TASK_OPTIONS:
        assert o.attr == (None if o.within else o.name)


def test_a_file_knows_the_keys_of_the_options() -> None:
    assert NATIVE_TASK == {
        k for o in TASK_OPTIONS if o.key and "." not in o.key for k in (o.key, *o.aliases)
    }
    assert "finally" in NATIVE_TASK and "finally_" not in NATIVE_TASK
    assert "where" not in NATIVE_TASK
    assert MAP_FIELDS == {"over", "key", "concurrency", "max_items", "on_empty", "tolerate"}
    assert len(BY_KEY) == len(NATIVE_TASK)


def test_every_named_field_is_a_definition_field() -> None:
    for o in TASK_OPTIONS:
        for name in o.fields:
            assert name.startswith("D_") and isinstance(getattr(fields, name), str), (o, name)
        if o.store is not None:
            assert len(o.fields) == 1, o  # a stored option's value goes in its one field


def test_checks_run_once_each_in_the_tables_order() -> None:
    assert len(set(TASK_CHECKS)) == len(TASK_CHECKS)
    order = [o.check for o in TASK_OPTIONS if o.check is not None]
    assert list(TASK_CHECKS) == list(dict.fromkeys(order))


@pytest.mark.parametrize("name", [o.name for o in TASK_OPTIONS if o.form is Form.SECONDS])
def test_a_file_gives_seconds_as_durations(name: str) -> None:
    key = BY_NAME[name].key
    wf = load_text(f"name: w\ntasks:\n  - {{name: a, {key}: 2m}}\n", "w.yaml")[0]
    assert getattr(wf.tasks[0], name) == 120


def test_the_builder_and_a_file_make_the_same_task() -> None:
    """Every option a file gives, given to Workflow.task too, makes an equal TaskDef."""
    text = """
name: w
tasks:
  - {name: a, type: t, payload: {x: 1}, priority: 3, max_attempts: 4, timeout: 2, delay: 1}
  - {name: b, after: [a], when: 'true', rate_limit: {key: k, limit: 3}, before: [c]}
  - {name: c, map: {over: a, key: items, concurrency: 5, tolerate: 1, on_empty: skip,
     max_items: 7}}
  - {name: e, wait: {signal: go}, after: [c]}
  - {name: f, run: tpl, after: [e]}
  - {name: g, on_failure: [a, b]}
  - {name: h, finally: true, trigger: all_done}
"""
    loaded = load_text(text, "w.yaml")[0]
    wf = Workflow("w", where="w.yaml:2")
    a = wf.task("a", {"x": 1}, type="t", priority=3, max_attempts=4, timeout=2, delay=1)
    b = wf.task("b", after=[a], when="true", rate_limit={"key": "k", "limit": 3}, before=["c"])
    c = wf.task("c", map=a["items"], concurrency=5, tolerate=1, on_empty="skip", max_items=7)
    e = wf.task("e", wait={"signal": "go"}, after=[c])
    wf.task("f", run="tpl", after=[e])
    wf.task("g", on_failure=[a, b])
    wf.task("h", finally_=True, trigger="all_done")
    for built, read in zip(wf.tasks, loaded.tasks, strict=True):
        read.where = None
        assert built == read
    validate(loaded)


def test_a_wrong_option_is_named_with_its_task() -> None:
    wf = Workflow("w")
    wf.task("a", priority=1000)
    with pytest.raises(DefinitionError, match=r"task 'a': priority 1000 is outside -999..999"):
        validate(wf)
