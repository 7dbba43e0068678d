"""Workflow files: the native form and the two seed formats, with file:line in errors.

Native (YAML or JSON)::

    name: report
    retry_backoff: 1.0            # optional, seconds before the first retry; doubles each time
    retry_backoff_max: 600        # optional, seconds: the longest delay between retries
    tasks:
      - name: fetch
        type: io                  # optional, default ""
        payload: {url: "..."}     # optional, any JSON value
        priority: 5               # optional, higher first
        max_attempts: 3           # optional, default 1
      - name: build
        after: [fetch]

Seed 002 (``workflows:`` with ``steps:`` and ``depends:``): each step is a task whose type
is its ``queue`` (default: the step name). A step with ``task:`` carries that sub-task's
definition and ``itemListKey`` in its payload for its handler to fan out over.

Seed 000 (a list of tasks with ``Name``, ``Type``, ``Payload``, ``Parents``, ``Children``,
optionally under ``{Name: ..., Tasks: [...]}``): both sides of every edge must agree.
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
from pathlib import Path
from typing import Any

import yaml

from .definition import DEFAULT_BACKOFF_MAX, Workflow
from .errors import DefinitionError


class _Located(dict[str, Any]):
    line: int | None = None


class _LineLoader(yaml.SafeLoader):
    """A safe loader that remembers the line of every mapping."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> _Located:
    loader.flatten_mapping(node)
    out = _Located()
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, "a mapping key must be a plain value", key_node.start_mark
            ) from None
        if key in out:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        out[key] = loader.construct_object(value_node, deep=True)
    out.line = node.start_mark.line + 1
    return out


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class _JSONLineDecoder(json.JSONDecoder):
    """A JSON decoder whose objects remember their line, like :class:`_LineLoader`'s.

    JSON is parsed as JSON, not as YAML: YAML 1.1 reads ``1e3`` as a string and
    rejects tab indentation, both valid JSON.
    """

    def __init__(self, source: str) -> None:
        super().__init__()

        def parse_object(
            s_and_end: tuple[str, int], strict: bool, scan_once: Any, *_: Any
        ) -> tuple[_Located, int]:
            s, end = s_and_end
            pairs, after = json.decoder.JSONObject(  # type: ignore[attr-defined]
                s_and_end, strict, scan_once, None, list, self.memo
            )
            located = _Located()
            located.line = s.count("\n", 0, end) + 1
            for key, value in pairs:
                if key in located:
                    raise DefinitionError(
                        f"{source}:{located.line}: invalid JSON: duplicate key {key!r}"
                    )
                located[key] = value
            return located, after

        self.memo: dict[str, str] = {}
        self.parse_object = parse_object
        # The C scanner ignores parse_object; the pure-Python one calls it. (json.scanner
        # has py_make_scanner, but the standard library's type stubs leave it out.)
        self.scan_once = json.scanner.py_make_scanner(self)  # type: ignore[attr-defined]


def _parse(text: str, source: str) -> Any:
    if source.endswith(".json"):
        if not text.strip():
            return None
        try:
            return _JSONLineDecoder(source).decode(text)
        except json.JSONDecodeError as e:
            raise DefinitionError(f"{source}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
        except RecursionError:
            raise DefinitionError(f"{source}: invalid JSON: nested too deeply") from None
    try:
        return yaml.load(text, Loader=_LineLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        what = e.problem or e.context or "malformed YAML"
        raise DefinitionError(f"{where}: invalid YAML: {what}") from None
    except yaml.YAMLError as e:
        raise DefinitionError(f"{source}: invalid YAML: {e}") from None


def _where(source: str, node: Any) -> str:
    line = getattr(node, "line", None)
    return f"{source}:{line}" if line else source


def _names(value: Any, what: str, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise DefinitionError(f"{where}: {what} must be a list of task names, not {value!r}")


def _mapping(node: Any, what: str, where: str) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise DefinitionError(f"{where}: {what} must be a mapping, not {type(node).__name__}")
    return node


def _known(node: dict[str, Any], allowed: set[str], what: str, where: str) -> None:
    extra = sorted(set(node) - allowed, key=str)
    if extra:
        raise DefinitionError(
            f"{where}: {what} has unknown field {extra[0]!r} (known: {', '.join(sorted(allowed))})"
        )


NATIVE_TASK = {"name", "type", "payload", "priority", "after", "max_attempts"}


def _native(doc: dict[str, Any], source: str) -> list[Workflow]:
    where = _where(source, doc)
    _known(doc, {"name", "tasks", "retry_backoff", "retry_backoff_max"}, "the workflow", where)
    tasks = doc.get("tasks")
    if not isinstance(tasks, list):
        raise DefinitionError(f"{where}: 'tasks' must be a list of tasks")
    wf = Workflow(
        doc.get("name") or "",
        retry_backoff=doc.get("retry_backoff", 1.0),
        retry_backoff_max=doc.get("retry_backoff_max", DEFAULT_BACKOFF_MAX),
        where=where,
    )
    for node in tasks:
        here = _where(source, node)
        t = _mapping(node, "a task", here)
        _known(t, NATIVE_TASK, f"task {t.get('name')!r}", here)
        wf.task(
            t.get("name") or "",
            t.get("payload"),
            type=t.get("type", "") if t.get("type") is not None else "",
            priority=t.get("priority", 0),
            after=_names(t.get("after"), "after", here),
            max_attempts=t.get("max_attempts", 1),
            where=here,
        )
    return [wf]


def _seed002(doc: dict[str, Any], source: str) -> list[Workflow]:
    defs = doc["workflows"]
    if not isinstance(defs, list) or not defs:
        raise DefinitionError(f"{_where(source, doc)}: 'workflows' must be a non-empty list")
    out = []
    for wnode in defs:
        wwhere = _where(source, wnode)
        w = _mapping(wnode, "a workflow", wwhere)
        _known(w, {"name", "steps", "tasks"}, f"workflow {w.get('name')!r}", wwhere)
        subtasks: dict[Any, dict[str, Any]] = {}  # by name as written: not validated yet
        for snode in w.get("tasks") or []:
            s = _mapping(snode, "a task", _where(source, snode))
            subtasks[s.get("name")] = s
        steps = w.get("steps")
        if not isinstance(steps, list):
            raise DefinitionError(f"{wwhere}: 'steps' must be a list of steps")
        wf = Workflow(w.get("name") or "", where=wwhere)
        for snode in steps:
            here = _where(source, snode)
            s = _mapping(snode, "a step", here)
            _known(
                s, {"name", "depends", "task", "queue", "payload"}, f"step {s.get('name')!r}", here
            )
            payload = s.get("payload")
            if s.get("task") is not None:
                sub = subtasks.get(s["task"])
                if sub is None:
                    raise DefinitionError(
                        f"{here}: step {s.get('name')!r} uses unknown task {s['task']!r}"
                    )
                payload = {
                    "task": s["task"],
                    "itemListKey": sub.get("itemListKey"),
                    "steps": [st.get("name") for st in sub.get("steps") or []],
                    **({"payload": payload} if payload is not None else {}),
                }
            wf.task(
                s.get("name") or "",
                payload,
                type=s.get("queue") or s.get("name") or "",
                after=_names(s.get("depends"), "depends", here),
                where=here,
            )
        out.append(wf)
    return out


SEED000_TASK = {"Name", "Type", "Payload", "Parents", "Children", "Workflow", "Priority"}


def _seed000(doc: Any, source: str) -> list[Workflow]:
    if isinstance(doc, dict):
        _known(doc, {"Name", "Tasks"}, "the workflow", _where(source, doc))
        name, tasks, where = doc.get("Name"), doc.get("Tasks"), _where(source, doc)
    else:
        name, tasks, where = None, doc, source
    if not isinstance(tasks, list):
        raise DefinitionError(f"{where}: 'Tasks' must be a list of tasks")
    nodes = []
    for node in tasks:
        here = _where(source, node)
        t = _mapping(node, "a task", here)
        _known(t, SEED000_TASK, f"task {t.get('Name')!r}", here)
        nodes.append((t, here))
        name = name or t.get("Workflow")
    wf = Workflow(name or Path(source).stem, where=where)
    first: dict[Any, str] = {}
    for t, here in nodes:
        # Checked before the edges, which are looked up by name.
        if t.get("Name") in first:
            raise DefinitionError(
                f"{here}: duplicate task name {t.get('Name')!r} "
                f"(first defined at {first[t.get('Name')]})"
            )
        first[t.get("Name")] = here
    parents_of = {t.get("Name"): _names(t.get("Parents"), "Parents", h) for t, h in nodes}
    for t, here in nodes:
        me = t.get("Name")
        for child in _names(t.get("Children"), "Children", here):
            if child not in parents_of:
                raise DefinitionError(f"{here}: task {me!r} lists unknown child {child!r}")
            if me not in parents_of[child]:
                raise DefinitionError(
                    f"{here}: task {me!r} lists {child!r} as a child, "
                    f"but {child!r} does not list {me!r} among its Parents"
                )
    children_of = {t.get("Name"): _names(t.get("Children"), "Children", h) for t, h in nodes}
    for t, here in nodes:
        me = t.get("Name")
        for parent in parents_of[me]:
            if parent in children_of and me not in children_of[parent]:
                raise DefinitionError(
                    f"{here}: task {me!r} lists {parent!r} as a parent, "
                    f"but {parent!r} does not list {me!r} among its Children"
                )
        wf.task(
            me or "",
            t.get("Payload"),
            type=t.get("Type") or "",
            priority=t.get("Priority", 0),
            after=parents_of[me],
            where=here,
        )
    return [wf]


def load_text(text: str, source: str = "<text>") -> list[Workflow]:
    """Parse workflow definitions from YAML/JSON text (format detected from its shape).

    Raises :class:`DefinitionError` naming the file, line and what is wrong. The returned
    workflows are not yet validated as DAGs: :meth:`engine.Engine.push` does that.
    """
    doc = _parse(text, source)
    if doc is None:
        raise DefinitionError(f"{source}: the file is empty")
    if isinstance(doc, dict) and "workflows" in doc:
        return _seed002(doc, source)
    if isinstance(doc, dict) and "tasks" in doc:
        return _native(doc, source)
    if isinstance(doc, dict) and "Tasks" in doc:
        return _seed000(doc, source)
    if isinstance(doc, list) and doc and isinstance(doc[0], dict) and "Name" in doc[0]:
        return _seed000(doc, source)
    raise DefinitionError(
        f"{_where(source, doc)}: not a workflow file: expected 'name' and 'tasks' (native), "
        "'workflows:' (steps/depends), or a list of tasks with Name/Parents/Children"
    )


def load_file(path: str | Path) -> list[Workflow]:
    """Read and parse a workflow file (see :func:`load_text`)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DefinitionError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DefinitionError(f"{p}: cannot read: {e}") from None
    return load_text(text, str(p))
