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
        after: [fetch]            # or, on fetch: before: [build] (gush's before:)
        trigger: all_success      # optional: when it runs, by how its parents ended
      - name: alert
        on_failure: [fetch, build]  # optional: runs when one of them failed
      - name: tidy
        finally: true             # optional: runs once the rest has ended, whatever happened
      - name: publish
        after: [build]
        when: 'parents.build.output.size > 0'  # optional: a CEL condition (engine.spec.conditions)

``input_schema:`` (a JSON Schema) at the top makes every run's input fit it
(engine.spec.schemas).

The steps manager's format (``workflows:`` with ``steps:`` and ``depends:``): each step is
a task whose type is its ``queue`` (default: the step name). A step with ``task:`` is a map
over the list under the task's ``itemListKey`` in its parent's output, with the steps
manager's gather (:func:`engine.spec.mapping.gather_of`): where the steps manager and the
native model differ, these files follow the manager (:func:`engine.manager_message` builds
its messages).

redis.workflow's task list (a list of tasks with ``Name``, ``Type``, ``Payload``,
``Parents``, ``Children``, optionally under ``{Name: ..., Tasks: [...]}``): both sides of
every edge must agree.

Hostile input is refused quickly with one line naming the file and line: a file nested
deeper than ``MAX_FILE_DEPTH`` (a payload's ``MAX_DEPTH`` plus ``FRAME_DEPTH`` around it,
counted the same way in JSON and YAML), YAML aliases that expand the document more than
``ALIAS_GROWTH`` times, more tasks than ``max_tasks`` (counted before any task is built),
integers longer than Python converts, and NaN or Infinity in JSON.
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from engine.core.timing import parse_duration
from engine.errors import DefinitionError
from engine.spec.child_specs import run_of
from engine.spec.definition import (
    DEFAULT_BACKOFF_MAX,
    DEFAULT_MAX_TASKS,
    MAX_FILE_DEPTH,
    MAX_STEPS,
    PRIORITY_RANGE,
    TaskDef,
    Workflow,
    depth_past,
    one_line,
    show_value,
)
from engine.spec.mapping import MapSpec, element_key
from engine.spec.messages import refuse_unknown
from engine.spec.options import BY_KEY, MAP_KEYS, WORKFLOW_KEYS, Form
from engine.spec.wait_tasks import WaitSpec, wait_of

_TOO_DEEP = f"nested more than {MAX_FILE_DEPTH} levels deep"


class _Located(dict[str, Any]):
    """A mapping that remembers the line it starts on."""

    line: int | None = None


# -- JSON -------------------------------------------------------------------------------

_WS = re.compile(r"[ \t\n\r]*")
_TASK_LISTS = {"tasks", "Tasks", "steps"}


def _skip(text: str, pos: int) -> int:
    m = _WS.match(text, pos)
    return m.end() if m else pos


class _JSONReader:
    """Reads JSON as JSON (YAML 1.1 reads ``1e3`` as a string and rejects tabs).

    Only the frame of the file is read in Python: the top object, the ``workflows`` list,
    workflows, and the lists of tasks or steps, each task's line noted as its list is
    read. Each task or step, payload included, is read by the standard library's C
    scanner. Lines are counted as the reader moves on, so the file is counted once, and
    a list of more than ``max_tasks`` tasks is refused before the rest is read.
    """

    def __init__(self, text: str, source: str, max_tasks: int) -> None:
        self.text, self.source, self.max_tasks = text, source, max_tasks
        self.pos, self.line = 0, 1
        context = json.JSONDecoder(object_pairs_hook=self._object, parse_constant=self._constant)
        self.scan = json.scanner.make_scanner(context)  # type: ignore[arg-type]

    def _line_at(self, pos: int) -> int:
        self.line += self.text.count("\n", self.pos, pos)
        self.pos = pos
        return self.line

    def _object(self, pairs: list[tuple[str, Any]]) -> _Located:
        out = _Located(pairs)
        if len(out) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    raise self.error(f"duplicate key {show_value(key)}", self.line)
                seen.add(key)
        return out

    def _constant(self, name: str) -> Any:
        raise self.error(f"{name} is not a JSON value", self.line)

    def error(self, what: str, line: int | None) -> DefinitionError:
        return DefinitionError(f"{self.source}:{line}: invalid JSON: {what}")

    def read(self) -> Any:
        text = self.text
        value, end = self._value(_skip(text, 0), "doc", 0)
        end = _skip(text, end)
        if end != len(text):
            raise json.JSONDecodeError("Extra data", text, end)
        return value

    def _value(self, idx: int, role: str, depth: int) -> tuple[Any, int]:
        """The value at ``idx`` in its ``role``: doc, workflow, workflows, tasks, task;
        ``depth``: the lists and objects around it."""
        ch = self.text[idx : idx + 1]
        if ch == "{" and role in ("doc", "workflow"):
            return self._frame_object(idx, role, depth)
        if ch == "[" and role in ("doc", "tasks", "workflows"):
            return self._frame_list(idx, "workflow" if role == "workflows" else "task", depth)
        line = self._line_at(idx) if role == "task" else None
        try:
            value, end = self.scan(self.text, idx)
        except StopIteration as e:
            raise json.JSONDecodeError("Expecting value", self.text, e.value) from None
        self._check_depth(value, idx, end, depth)
        if line is not None and isinstance(value, _Located):
            value.line = line
        return value, end

    def _check_depth(self, value: Any, start: int, end: int, depth: int) -> None:
        """Refuse ``value`` (read from ``text[start:end]`` inside ``depth`` levels) when
        the file nests past :data:`MAX_FILE_DEPTH` there, as the YAML reader does; a value
        with fewer brackets than the levels left is not walked."""
        left = MAX_FILE_DEPTH - depth
        text = self.text
        if text.count("[", start, end) + text.count("{", start, end) <= left:
            return
        if depth_past(value, left):
            raise self.error(_TOO_DEEP, self._line_at(start))

    def _frame_object(self, idx: int, role: str, depth: int) -> tuple[_Located, int]:
        text = self.text
        depth += 1
        out = _Located()
        out.line = self._line_at(idx)
        idx = _skip(text, idx + 1)
        if text[idx : idx + 1] == "}":
            return out, idx + 1
        while True:
            if text[idx : idx + 1] != '"':
                raise json.JSONDecodeError(
                    "Expecting property name enclosed in double quotes", text, idx
                )
            key, idx = json.decoder.scanstring(text, idx + 1, True)  # type: ignore[attr-defined]
            idx = _skip(text, idx)
            if text[idx : idx + 1] != ":":
                raise json.JSONDecodeError("Expecting ':' delimiter", text, idx)
            if key in _TASK_LISTS:
                child = "tasks"
            elif key == "workflows" and role == "doc":
                child = "workflows"
            else:
                child = "value"
            value, idx = self._value(_skip(text, idx + 1), child, depth)
            if key in out:
                raise self.error(f"duplicate key {show_value(key)}", out.line)
            out[key] = value
            closed, idx = self._after_item(idx, "}")
            if closed:
                return out, idx

    def _frame_list(self, idx: int, role: str, depth: int) -> tuple[list[Any], int]:
        text = self.text
        depth += 1
        line = self._line_at(idx)
        out: list[Any] = []
        idx = _skip(text, idx + 1)
        if text[idx : idx + 1] == "]":
            return out, idx + 1
        scan = self.scan
        left = MAX_FILE_DEPTH - depth  # levels a task may nest (brackets fewer: not walked)
        while True:
            if role != "task":
                value, idx = self._value(idx, role, depth)
            elif len(out) == self.max_tasks:
                raise DefinitionError(
                    f"{self.source}:{line}: more than {self.max_tasks} tasks in one workflow"
                )
            else:  # _value(idx, "task"), inlined: this loop runs once per task
                self.line += text.count("\n", self.pos, idx)
                self.pos = start = idx
                try:
                    value, idx = scan(text, idx)
                except StopIteration as e:
                    raise json.JSONDecodeError("Expecting value", text, e.value) from None
                if text.count("[", start, idx) + text.count("{", start, idx) > left:
                    self._check_depth(value, start, idx, depth)
                if type(value) is _Located:
                    value.line = self.line
            out.append(value)
            closed, idx = self._after_item(idx, "]")
            if closed:
                return out, idx

    def _after_item(self, idx: int, close: str) -> tuple[bool, int]:
        """After an item: ``(True, end)`` at the closing bracket, else ``(False, where the
        next item starts)``."""
        text = self.text
        idx = _skip(text, idx)
        ch = text[idx : idx + 1]
        if ch == close:
            return True, idx + 1
        if ch != ",":
            raise json.JSONDecodeError("Expecting ',' delimiter", text, idx)
        return False, _skip(text, idx + 1)


def _read_json(text: str, source: str, max_tasks: int) -> Any:
    reader = _JSONReader(text, source, max_tasks)
    try:
        return reader.read()
    except json.JSONDecodeError as e:
        raise DefinitionError(f"{source}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    except RecursionError:  # far past MAX_FILE_DEPTH: the C scanner's own limit
        raise reader.error(_TOO_DEEP, reader.line) from None
    except ValueError as e:  # int(): more digits than sys.get_int_max_str_digits()
        long = re.search(rf"\d{{{sys.get_int_max_str_digits() + 1}}}", text)
        if long is None:
            raise reader.error(str(e), reader.line) from None
        line = text.count("\n", 0, long.start()) + 1
        raise reader.error(
            f"an integer of more than {sys.get_int_max_str_digits()} digits", line
        ) from None


# -- YAML -------------------------------------------------------------------------------

_YAMLParser: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present
_MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAG = "tag:yaml.org,2002:str"
_INT_TAG = "tag:yaml.org,2002:int"
_DECIMAL = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_MAP_TAGS = {None, "!", "tag:yaml.org,2002:map"}
_SEQ_TAGS = {None, "!", "tag:yaml.org,2002:seq"}
# Aliases may make the document at most this many times larger than its own nodes,
# plus a constant: an alias bomb ("billion laughs") is refused as it starts to expand.
ALIAS_GROWTH, ALIAS_ALLOWANCE = 10, 100_000
_NO_KEY = object()
_MERGE = object()
# libyaml's own refusal of deep flow nesting; its limit (1,000) is past MAX_FILE_DEPTH
_LIBYAML_DEPTH = "maximum nesting depth"


class _Open:
    """A mapping or sequence being built from parser events."""

    __slots__ = (
        "value",
        "is_map",
        "anchor",
        "size",
        "height",
        "key",
        "key_event",
        "merges",
        "tasks",
    )

    def __init__(self, value: Any, is_map: bool, anchor: str | None) -> None:
        self.value = value
        self.is_map = is_map
        self.anchor = anchor
        self.size = 1  # values, aliases expanded (counted inside anchored nodes only)
        self.height = 1
        self.key: Any = _NO_KEY
        self.key_event: Any = None
        self.merges: list[dict[Any, Any]] = []
        self.tasks: int | None = None  # the line of a list of tasks


def _read_yaml(text: str, source: str, max_tasks: int) -> Any:
    """Build the document straight from the parser's events, with every mapping's line.

    No node graph: composing nodes costs several times more than parsing. YAML merge keys
    are applied; nesting depth, alias expansion and task lists are capped as they come.
    """
    try:
        loader = _YAMLParser(text)
    except UnicodeEncodeError as e:  # libyaml reads UTF-8: a str may hold lone surrogates
        line = text.count("\n", 0, e.start) + 1
        raise DefinitionError(f"{source}:{line}: invalid YAML: a lone surrogate") from None
    try:
        return _YAMLBuilder(loader, source, max_tasks).build()
    finally:
        loader.dispose()


_SCALAR, _ALIAS = yaml.ScalarEvent, yaml.AliasEvent
_MAP_START, _SEQ_START = yaml.MappingStartEvent, yaml.SequenceStartEvent
_MAP_END, _SEQ_END = yaml.MappingEndEvent, yaml.SequenceEndEvent


class _YAMLBuilder:
    """A document built from a parser's events (:meth:`build`): each step is a method."""

    def __init__(self, loader: Any, source: str, max_tasks: int) -> None:
        self.loader = loader
        self.source = source
        self.max_tasks = max_tasks
        self.resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]] = (
            loader.yaml_implicit_resolvers
        )
        self.tags: dict[str, str] = {}  # plain scalar -> its resolved tag, for short ones
        self.stack: list[_Open] = []  # the mappings and sequences open, outermost first
        self.anchors: dict[str, tuple[Any, int, int]] = {}  # value, size, height
        self.expanded = 0  # values so far, aliases expanded
        self.documents = 0
        self.anchored = 0  # open anchored nodes
        self.result: Any = None

    def fail(self, mark: Any, what: str) -> DefinitionError:
        return DefinitionError(
            f"{self.source}:{mark.line + 1}:{mark.column + 1}: invalid YAML: {what}"
        )

    def build(self) -> Any:
        """The document: each scalar, alias or node's end is a value, put into the node
        open around it (or, at the top, the result); a node's start opens one."""
        get_event = self.loader.get_event
        tags = self.tags
        stack = self.stack
        events = 0
        while True:
            ev = get_event()
            kind = type(ev)
            events += 1
            if kind is _SCALAR:
                value = ev.value
                # Fast path: a plain scalar already known to be a string, or a quoted one.
                if ev.tag is not None or (ev.implicit[0] and tags.get(value) is not _STR_TAG):
                    value = self.scalar(ev)
                if ev.anchor is not None:
                    self.anchors[ev.anchor] = (value, 1, 0)
                self.expanded += 1
                size, height = 1, 0
            elif kind is _MAP_START or kind is _SEQ_START:
                self.open_node(ev, kind is _MAP_START)
                continue
            elif kind is _MAP_END or kind is _SEQ_END:
                value, size, height = self.close_node()
            elif kind is _ALIAS:
                value, size, height = self.alias(ev, events)
            elif kind is yaml.DocumentStartEvent:
                self.start_document(ev)
                continue
            elif ev is None or kind is yaml.StreamEndEvent:
                return self.result
            else:
                continue
            if stack:
                self.put(value, size, height, ev)
            else:
                self.result = None if value is _MERGE else value

    def open_node(self, ev: Any, is_map: bool) -> None:
        """A mapping or a sequence starts (a list of tasks noted as such)."""
        stack = self.stack
        if ev.tag not in (_MAP_TAGS if is_map else _SEQ_TAGS):
            raise self.fail(ev.start_mark, f"unsupported tag {show_value(ev.tag)}")
        if len(stack) >= MAX_FILE_DEPTH:
            raise self.fail(ev.start_mark, _TOO_DEEP)
        if is_map:
            value = _Located()
            value.line = ev.start_mark.line + 1
            stack.append(_Open(value, True, ev.anchor))
        else:
            opened = _Open([], False, ev.anchor)
            # The lists whose items are tasks: the file itself (redis.workflow's task list),
            # tasks/Tasks of the top mapping, steps of a workflow (the steps manager's format).
            parent = stack[-1] if stack else None
            if parent is None or (
                len(stack) in (1, 3) and parent.is_map and parent.key in _TASK_LISTS
            ):
                opened.tasks = ev.start_mark.line + 1
            stack.append(opened)
        if ev.anchor is not None:
            self.anchored += 1
        self.expanded += 1

    def close_node(self) -> tuple[Any, int, int]:
        """The innermost node ends: its value (merge keys applied), size and height."""
        done = self.stack.pop()
        value, size, height = done.value, done.size, done.height
        if done.merges:
            value = _Located()
            value.line = done.value.line
            for merged in reversed(done.merges):  # the first one listed wins
                value.update(merged)
            value.update(done.value)
        if done.anchor is not None:
            self.anchors[done.anchor] = (value, size, height)
            self.anchored -= 1
        return value, size, height

    def alias(self, ev: Any, events: int) -> tuple[Any, int, int]:
        """An alias: its anchor's value, size and height, within the depth and within
        :data:`ALIAS_GROWTH` times the ``events`` read so far."""
        got = self.anchors.get(ev.anchor)
        if got is None:
            inside = any(o.anchor == ev.anchor for o in self.stack)
            what = "refers to a node that contains it" if inside else "is undefined"
            raise self.fail(ev.start_mark, f"alias *{one_line(ev.anchor)} {what}")
        value, size, height = got
        if len(self.stack) + height > MAX_FILE_DEPTH:
            raise self.fail(ev.start_mark, _TOO_DEEP)
        self.expanded += size
        if self.expanded > ALIAS_GROWTH * events + ALIAS_ALLOWANCE:
            raise self.fail(
                ev.start_mark,
                f"aliases expand the document past {self.expanded} values "
                f"(at most {ALIAS_GROWTH} times its own size)",
            )
        return got

    def start_document(self, ev: Any) -> None:
        """A document starts: the only one a file may hold."""
        self.documents += 1
        if self.documents > 1:
            raise self.fail(ev.start_mark, "expected one document, found another")
        self.anchors.clear()

    def put(self, value: Any, size: int, height: int, ev: Any) -> None:
        """Put a finished value into the open mapping (as a key, a merge or the value
        of the key before it) or sequence."""
        top = self.stack[-1]
        if self.anchored:  # sizes and heights matter only to what an alias may repeat
            top.size += size
            if height >= top.height:
                top.height = height + 1
        if value is _MERGE and (not top.is_map or top.key is not _NO_KEY):
            value = "<<"  # a merge key's text anywhere but as a key
        if not top.is_map:
            if top.tasks is not None and len(top.value) >= self.max_tasks:
                raise DefinitionError(
                    f"{self.source}:{top.tasks}: more than {self.max_tasks} tasks in one workflow"
                )
            top.value.append(value)
        elif top.key is _NO_KEY:
            self.put_key(top, value, ev)
        elif top.key is _MERGE:
            self.put_merges(top, value)
        else:
            top.value[top.key] = value
            top.key = _NO_KEY

    def put_key(self, top: _Open, value: Any, ev: Any) -> None:
        """A mapping's next key: a plain value, not given before."""
        if isinstance(value, (list, dict)):  # noqa: UP038 - faster than list | dict
            raise self.fail(ev.start_mark, "a mapping key must be a plain value")
        if value in top.value or (value is _MERGE and top.merges):
            key = "<<" if value is _MERGE else value
            raise self.fail(ev.start_mark, f"duplicate key {show_value(key)}")
        top.key, top.key_event = value, ev

    def put_merges(self, top: _Open, value: Any) -> None:
        """What a merge key (``<<``) gives: a mapping or a list of them."""
        merges = value if isinstance(value, list) else [value]
        if not merges or not all(isinstance(m, dict) for m in merges):
            raise self.fail(
                top.key_event.start_mark,
                "a merge key (<<) takes a mapping or a list of them",
            )
        top.merges = merges
        top.key = _NO_KEY

    def scalar(self, ev: Any) -> Any:
        tag = ev.tag
        value = ev.value
        if tag is None or tag == "!":
            if not ev.implicit[0]:
                return value  # quoted: a string
            tag = self.tags.get(value)
            if tag is None:
                tag = _STR_TAG
                for candidate, regexp in self.resolvers.get(value[:1], ()):
                    if regexp.match(value):
                        tag = candidate
                        break
                if len(value) <= 64:
                    self.tags[value] = tag
        if tag == _STR_TAG:
            return value
        if tag == _MERGE_TAG:
            return _MERGE
        if tag == _INT_TAG and _DECIMAL.fullmatch(value) and len(value) < 4000:
            return int(value)  # as PyYAML reads it, minus its generality
        construct = self.loader.yaml_constructors.get(tag)
        if construct is None:
            raise self.fail(ev.start_mark, f"unsupported tag {show_value(tag)}")
        node = yaml.ScalarNode(tag, value, ev.start_mark, ev.end_mark, ev.style)
        try:
            return construct(self.loader, node)
        except yaml.MarkedYAMLError as e:
            raise self.fail(ev.start_mark, e.problem or "malformed value") from None
        except ValueError:  # int(): more digits than sys.get_int_max_str_digits()
            raise self.fail(
                ev.start_mark, f"a number of more than {sys.get_int_max_str_digits()} digits"
            ) from None


def _parse(text: str, source: str, max_tasks: int) -> Any:
    if source.endswith(".json"):
        return _read_json(text, source, max_tasks) if text.strip() else None
    try:
        return _read_yaml(text, source, max_tasks)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        what = e.problem or e.context or "malformed YAML"
        if _LIBYAML_DEPTH in what:
            # libyaml (PyYAML 6.0.2+) refuses nesting past its own limit (1,000) while it
            # reads ahead, before the builder sees the events that pass ours: say it our way
            what = _TOO_DEEP
        raise DefinitionError(f"{where}: invalid YAML: {what}") from None
    except yaml.reader.ReaderError as e:
        line = text.count("\n", 0, e.position) + 1
        char = f"U+{e.character:04X}" if isinstance(e.character, int) else repr(e.character)
        raise DefinitionError(
            f"{source}:{line}: invalid YAML: character {char} is not allowed"
        ) from None
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
    if type(value) is list:
        for v in value:
            if type(v) is not str:
                break
        else:
            return list(value)
    raise DefinitionError(f"{where}: {what} must be a list of task names, not {show_value(value)}")


def _mapping(node: Any, what: str, where: str) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise DefinitionError(f"{where}: {what} must be a mapping, not {type(node).__name__}")
    return node


def _list(value: Any, what: str, where: str, max_items: int | None = None) -> list[Any]:
    """``value`` if it is a list (of at most ``max_items`` tasks)."""
    if not isinstance(value, list):
        raise DefinitionError(f"{where}: {what} must be a list, not {show_value(value)}")
    if max_items is not None and len(value) > max_items:
        raise DefinitionError(f"{where}: {len(value)} tasks in one workflow; at most {max_items}")
    return value


def _text(value: Any, what: str, where: str) -> str | None:
    """A name as written, which must be a string when given (validation checks the rest)."""
    if value is None or isinstance(value, str):
        return value
    raise DefinitionError(f"{where}: {what} must be a string, not {show_value(value)} (quote it)")


def _known(
    node: dict[str, Any], allowed: set[str] | frozenset[str], what: str, name: Any, where: str
) -> None:
    """Refuse fields not in ``allowed`` of ``what`` (``name``: its name as written)."""
    whose = what if name is _NO_KEY else f"{what} {show_value(name)}"
    refuse_unknown(node, allowed, f"{where}: {whose}")


NATIVE_WORKFLOW = WORKFLOW_KEYS
NATIVE_TASK = set(BY_KEY)  # a task's keys (engine.spec.options.TASK_OPTIONS)
MAP_FIELDS = {"over", "key", *MAP_KEYS}
MANAGER_WORKFLOW = {"name", "steps", "tasks", "vhosts"}
MANAGER_STEP = {"name", "depends", "task", "queue", "payload"}
MANAGER_TASK = {"name", "itemListKey", "steps"}
MANAGER_START = "__start__"  # the steps manager's explicit root: `depends: [__start__]`


def _map(value: Any, where: str) -> MapSpec | None:
    """A native task's ``map:``: a parent's name, or ``{over, key, concurrency, ...}``."""
    if value is None:
        return None
    if isinstance(value, str):
        return MapSpec(value)
    m = _mapping(value, "map", where)
    _known(m, MAP_FIELDS, "map", _NO_KEY, where)
    over = _text(m.get("over"), "map: over", where)
    if over is None:
        raise DefinitionError(f"{where}: map needs 'over': the parent whose output it maps")
    spec = MapSpec(over, _text(m.get("key"), "map: key", where))
    for key, option in MAP_KEYS.items():
        if key in m:
            setattr(spec, option.name, m[key])
    return spec


def _seconds(value: Any, what: str) -> Any:
    """A number of seconds as written: a number, or a duration like ``"30s"``, ``"5m"``
    (validation checks the number)."""
    return parse_duration(value, what) if isinstance(value, str) else value


def _native(doc: dict[str, Any], source: str, max_tasks: int) -> list[Workflow]:
    where = _where(source, doc)
    _known(doc, NATIVE_WORKFLOW, "the workflow", _NO_KEY, where)
    tasks = _list(doc.get("tasks"), "'tasks'", where, max_tasks)
    wf = Workflow(
        _text(doc.get("name"), "the workflow's name", where) or "",
        retry_backoff=doc.get("retry_backoff", 1.0),
        retry_backoff_max=doc.get("retry_backoff_max", DEFAULT_BACKOFF_MAX),
        where=where,
        deadline=_seconds(doc.get("deadline"), f"{where}: deadline"),
        ttl=_seconds(doc.get("ttl"), f"{where}: ttl"),
        concurrency=doc.get("concurrency"),
        input_schema=doc.get("input_schema"),
        rate_limits=doc.get("rate_limits"),
    )
    wf.tasks = [_native_task(node, source) for node in tasks]
    return [wf]


def _native_task(node: Any, source: str) -> TaskDef:
    """A native task (a step of a map's ``steps:`` too), each key read as its option's
    form says (:data:`engine.spec.options.TASK_OPTIONS`). A hot path: once per task."""
    here = _where(source, node)
    t = _aliased(_mapping(node, "a task", here), here)
    _known(t, NATIVE_TASK, "task", t.get("name"), here)
    get = t.get
    attrs = {attr: get(key, default) for key, attr, default in _AS_WRITTEN}
    attrs["where"] = here
    for key, attr, form, missing in _READ:
        value = get(key)
        if value is None:
            attrs[attr] = [] if missing is _NO_NAMES else missing
        else:
            attrs[attr] = _READERS[form](value, key, here, t)
    _native_steps(attrs, get("steps"), get("name"), here, source)
    return TaskDef(**attrs)


def _whose(here: str, t: dict[str, Any]) -> str:
    """Where a task is and its name as written, to start a message about it."""
    return f"{here}: task {show_value(t.get('name'))}"


def _read_seconds(value: Any, key: str, here: str, t: dict[str, Any]) -> Any:
    if isinstance(value, str):  # the message is built only for a duration to read
        return _seconds(value, f"{_whose(here, t)}: {key}")
    return value


# How a file's value of each form is read (given, the key, where, the task as written).
_READERS: dict[Form, Callable[[Any, str, str, dict[str, Any]], Any]] = {
    Form.NAME: lambda value, key, here, t: value or "",
    Form.TEXT: lambda value, key, here, t: value,
    Form.NAMES: lambda value, key, here, t: _names(value, key, here),
    Form.SECONDS: _read_seconds,
    Form.MAP: lambda value, key, here, t: _map(value, here),
    Form.WAIT: lambda value, key, here, t: wait_of(
        value, f"{here}: task {show_value(t.get('name'))}"
    ),
    Form.RUN: lambda value, key, here, t: run_of(
        value, f"{here}: task {show_value(t.get('name'))}"
    ),
}
_NO_NAMES: Any = object()  # a missing list of names: a new empty list
# A task's keys in a file (the map's steps apart: _native_steps), in the table's order:
# those taken as written (key, attribute, default), and those read by their form (key,
# attribute, form, what a missing or null one is).
_AS_WRITTEN = tuple(
    (key, o.name, o.default)
    for key, o in BY_KEY.items() if key == o.key and o.form is Form.VALUE
)  # fmt: skip
_READ = tuple(
    (key, o.name, o.form,
     _NO_NAMES if o.form is Form.NAMES and o.default is not None
     else "" if o.form is Form.NAME else o.default)
    for key, o in BY_KEY.items() if key == o.key and o.form not in (Form.VALUE, Form.STEPS)
)  # fmt: skip
_ALIASES = {alias: key for key, o in BY_KEY.items() for alias in o.aliases if key == o.key}


def _aliased(t: dict[str, Any], here: str) -> dict[str, Any]:
    """A task's keys with any alias an option has turned into its own key."""
    if not _ALIASES or t.keys().isdisjoint(_ALIASES):
        return t
    out = _Located()
    out.line = getattr(t, "line", None)
    for key, value in t.items():
        own = _ALIASES.get(key, key)
        if own in out:
            raise DefinitionError(
                f"{here}: task {show_value(t.get('name'))} gives {own!r} twice (as {key!r})"
            )
        out[own] = value
    return out


def _native_steps(attrs: dict[str, Any], steps: Any, name: Any, here: str, source: str) -> None:
    """A native task's map (``attrs["map"]``) given its ``steps:`` (each a native task),
    and the parent it maps over added to its ``after`` if missing."""
    spec = attrs["map"]
    if spec is not None and spec.over not in attrs["after"]:
        attrs["after"].append(spec.over)
    if steps is None:
        return
    if spec is None:
        raise DefinitionError(
            f"{here}: task {show_value(name)}: steps need a map: (what each item is)"
        )
    nodes = _list(steps, "'steps'", here)
    if len(nodes) > MAX_STEPS:
        raise DefinitionError(f"{here}: {len(nodes)} steps per item; at most {MAX_STEPS}")
    spec.steps = [_native_task(n, source) for n in nodes]


def _manager_format(doc: dict[str, Any], source: str, max_tasks: int) -> list[Workflow]:
    where = _where(source, doc)
    defs = _list(doc["workflows"], "'workflows'", where)
    if not defs:
        raise DefinitionError(f"{where}: 'workflows' must be a non-empty list")
    out = []
    for wnode in defs:
        wwhere = _where(source, wnode)
        w = _mapping(wnode, "a workflow", wwhere)
        _known(w, MANAGER_WORKFLOW, "workflow", w.get("name"), wwhere)
        steps = _list(w.get("steps"), "'steps'", wwhere, max_tasks)
        subtasks: dict[str | None, dict[str, Any]] = {}  # by name as written: not validated yet
        for snode in _list(w.get("tasks") or [], "'tasks'", wwhere):
            here = _where(source, snode)
            sub = _mapping(snode, "a task", here)
            _known(sub, MANAGER_TASK, "task", sub.get("name"), here)
            subtasks[_text(sub.get("name"), "a task's name", here)] = sub
        _names(w.get("vhosts"), "vhosts", wwhere)  # accepted as the manager documents it
        wf = Workflow(_text(w.get("name"), "a workflow's name", wwhere) or "", where=wwhere)
        for snode in steps:
            here = _where(source, snode)
            s = _mapping(snode, "a step", here)
            name = _text(s.get("name"), "a step's name", here)
            _known(s, MANAGER_STEP, "step", name, here)
            payload = s.get("payload")
            after = [d for d in _names(s.get("depends"), "depends", here) if d != MANAGER_START]
            used = _text(s.get("task"), f"step {name!r}: task", here)
            if used is not None and not after:
                # the manager's task over the job's own JSON: a first task outputs it
                after = [MANAGER_START]
                if not any(t.name == MANAGER_START for t in wf.tasks):
                    start = TaskDef(MANAGER_START, where=here, wait=WaitSpec(input=True))
                    wf.tasks.insert(0, start)
            step_type = s.get("queue") or name or ""
            spec = None
            if used is not None:
                spec, step_type, payload = _manager_map(
                    subtasks, used, name, after, payload, here, source
                )
            wf.tasks.append(TaskDef(name or "", payload, step_type, 0, after, 1, here, spec))
        out.append(wf)
    return out


def _manager_map(
    subtasks: dict[str | None, dict[str, Any]],
    used: str,
    name: str | None,
    after: list[str],
    payload: Any,
    here: str,
    source: str,
) -> tuple[MapSpec, str, Any]:
    """A steps-manager step with ``task:``: a map over the list under the task's
    ``itemListKey`` in its parent's output, each item running the task's steps (one step:
    the map's items run it; several: each item runs them as a small workflow, with their
    own ``depends:`` among them)."""
    found = subtasks.get(used)
    if found is None:
        raise DefinitionError(f"{here}: step {name!r} uses unknown task {used!r}")
    listed = _list(found.get("steps"), f"task {used!r}: 'steps'", here)
    key = _text(found.get("itemListKey"), f"task {used!r}: itemListKey", here)
    if not key:
        raise DefinitionError(f"{here}: task {used!r} needs an itemListKey to run over")
    if len(after) != 1:
        raise DefinitionError(
            f"{here}: step {name!r} runs task {used!r} once per item of its parent's "
            f"{key!r}: it must depend on exactly one step, not {len(after)}"
        )
    if not listed:
        raise DefinitionError(f"{here}: task {used!r} has no steps")
    if len(listed) > MAX_STEPS:
        raise DefinitionError(f"{here}: task {used!r} has {len(listed)} steps; at most {MAX_STEPS}")
    names: list[str] = []
    sub_steps: list[tuple[dict[str, Any], str, str]] = []
    for st in listed:
        where = _where(source, st) if getattr(st, "line", None) else here
        step = _mapping(st, "a step", where)
        step_name = _text(step.get("name"), f"task {used!r}: a step's name", where) or ""
        _known(step, MANAGER_STEP, "step", step_name, where)
        if step.get("task") is not None:
            raise DefinitionError(
                f"{where}: step {step_name!r} of task {used!r} runs task {step.get('task')!r}: "
                "a task inside a task's steps is not supported"
            )
        names.append(step_name)
        sub_steps.append((step, step_name, where))
    info = {"task": used, "itemListKey": key, "item": element_key(key), "steps": names}
    if payload is not None:
        info["payload"] = payload
    # the manager's gather: the step's output is one object, the items' values under the
    # element key listed under the itemListKey (what the steps after it read)
    spec = MapSpec(after[0], key, gather=key)
    if len(sub_steps) == 1:
        step, step_name, _ = sub_steps[0]
        return spec, step.get("queue") or step_name, info
    spec.steps = []
    for step, step_name, where in sub_steps:
        deps = [d for d in _names(step.get("depends"), "depends", where) if d != MANAGER_START]
        own = dict(info, depends=deps)  # its steps' own: the message a step gets
        if step.get("payload") is not None:
            own["payload"] = step["payload"]
        spec.steps.append(
            TaskDef(step_name, own, step.get("queue") or step_name, 0, deps, 1, where)
        )
    return spec, "", info


TASK_LIST_TASK = {"Name", "Type", "Payload", "Parents", "Children", "Workflow", "Priority"}


def _task_list_priority(value: Any) -> Any:
    """redis.workflow pops the lowest ``Priority`` first; redisflow runs the highest first:
    the sign flips, and any integer is accepted (clamped into redisflow's range, so order
    between priorities past +-999 is kept only up to the range's ends)."""
    if type(value) is not int:
        return value  # validation names what is wrong with it
    low, high = PRIORITY_RANGE
    return max(low, min(high, -value))


def _task_list(doc: Any, source: str, max_tasks: int) -> list[Workflow]:
    if isinstance(doc, dict):
        where = _where(source, doc)
        _known(doc, {"Name", "Tasks"}, "the workflow", _NO_KEY, where)
        name, tasks = doc.get("Name"), _list(doc.get("Tasks"), "'Tasks'", where, max_tasks)
    else:
        name, tasks, where = None, _list(doc, "the file", source, max_tasks), source
    nodes: list[tuple[dict[str, Any], str, str]] = []
    first: dict[str, str] = {}
    for node in tasks:
        here = _where(source, node)
        t = _mapping(node, "a task", here)
        me = _text(t.get("Name"), "a task's Name", here) or ""
        _known(t, TASK_LIST_TASK, "task", me, here)
        # Checked before the edges, which are looked up by name.
        if me in first:
            raise DefinitionError(
                f"{here}: duplicate task name {me!r} (first defined at {first[me]})"
            )
        first[me] = here
        nodes.append((t, me, here))
        name = name or t.get("Workflow")
    wf = Workflow(name or Path(source).stem, where=where)
    parents_of = {me: _names(t.get("Parents"), "Parents", h) for t, me, h in nodes}
    children_of = {me: _names(t.get("Children"), "Children", h) for t, me, h in nodes}
    for _, me, here in nodes:
        for child in children_of[me]:
            if child not in parents_of:
                raise DefinitionError(f"{here}: task {me!r} lists unknown child {child!r}")
            if me not in parents_of[child]:
                raise DefinitionError(
                    f"{here}: task {me!r} lists {child!r} as a child, "
                    f"but {child!r} does not list {me!r} among its Parents"
                )
    for t, me, here in nodes:
        for parent in parents_of[me]:
            if parent in children_of and me not in children_of[parent]:
                raise DefinitionError(
                    f"{here}: task {me!r} lists {parent!r} as a parent, "
                    f"but {parent!r} does not list {me!r} among its Children"
                )
        wf.task(
            me,
            t.get("Payload"),
            type=t.get("Type") or "",
            priority=_task_list_priority(t.get("Priority", 0)),
            after=parents_of[me],
            where=here,
        )
    return [wf]


def load_text(
    text: str, source: str = "<text>", max_tasks: int = DEFAULT_MAX_TASKS
) -> list[Workflow]:
    """Parse workflow definitions from YAML/JSON text (format detected from its shape).

    Raises :class:`DefinitionError` naming the file, line and what is wrong, in one line.
    A workflow of more than ``max_tasks`` tasks is refused before any task is built. The
    returned workflows are not yet validated as DAGs: :meth:`engine.Engine.push` does that.
    """
    source = one_line(source)
    try:
        return _load(_parse(text, source, max_tasks), source, max_tasks)
    except DefinitionError as e:
        message = str(e)
        if message.isprintable():
            raise
        raise DefinitionError(one_line(message)) from None


def _load(doc: Any, source: str, max_tasks: int) -> list[Workflow]:
    if doc is None:
        raise DefinitionError(f"{source}: the file is empty")
    if isinstance(doc, dict) and "workflows" in doc:
        return _manager_format(doc, source, max_tasks)
    if isinstance(doc, dict) and "tasks" in doc:
        return _native(doc, source, max_tasks)
    if isinstance(doc, dict) and "Tasks" in doc:
        return _task_list(doc, source, max_tasks)
    if isinstance(doc, list) and doc and isinstance(doc[0], dict) and "Name" in doc[0]:
        return _task_list(doc, source, max_tasks)
    raise DefinitionError(
        f"{_where(source, doc)}: not a workflow file: expected 'name' and 'tasks' (native), "
        "'workflows:' (steps/depends), or a list of tasks with Name/Parents/Children"
    )


def load_file(path: str | Path, max_tasks: int = DEFAULT_MAX_TASKS) -> list[Workflow]:
    """Read and parse a workflow file (see :func:`load_text`)."""
    return load_text(read_file(path), str(path), max_tasks)


def read_file(path: str | Path) -> str:
    """A workflow file's text (:class:`DefinitionError` naming it if it cannot be read)."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DefinitionError(f"{one_line(str(p))}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DefinitionError(one_line(f"{p}: cannot read: {e}")) from None
