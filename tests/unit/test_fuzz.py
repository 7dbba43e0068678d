"""Fuzzing the workflow file readers: whatever the input, it loads into workflows that
validate, or it is refused with a DefinitionError of one printable line, quickly.

Documents are drawn in the three formats (native, redis.workflow's task list, the steps
manager's) with fields of
every type, hostile values among them (lone surrogates, control characters, integers past
Python's conversion limit, deep nesting), and written as JSON, as YAML flow text and as
YAML block text; random text and bytes cover the rest.
"""

from __future__ import annotations

import json
import time
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import DefinitionError, load_text
from engine.store.codec import compile_workflow

FUZZ = settings(
    max_examples=120,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class Raw:
    """Text written into the document as is (a number too long to convert, deep nesting)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Raw({self.text[:20]!r}...)"


HOSTILE_TEXT = st.sampled_from(
    ["", " ", "\ud800", "a\udfffb", "\x00", "a\nb", "\u2028", "\x7f", "[/]", "{x}", "*", "é"]
)
NAMES = st.one_of(st.text(max_size=8), HOSTILE_TEXT, st.sampled_from(["a", "b", "c", "d"]))
RAW = st.sampled_from(
    [
        Raw("9" * 5000),
        Raw("-" + "1" * 4400),
        Raw("[" * 3000 + "]" * 3000),
        Raw("[" * 120 + "]" * 120),
        Raw("1e999"),
        Raw("NaN"),
        Raw('{"k": 1, "k": 2}'),
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    NAMES,
    RAW,
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)
PARENTS = st.one_of(NAMES, st.lists(NAMES, max_size=3), VALUES)


def field(key: str, value: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """``{key: value}`` or nothing."""
    return st.one_of(st.just({}), value.map(lambda v: {key: v}))


def record(*fields: tuple[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """A mapping holding some of ``fields``, and sometimes an unknown one."""
    parts = [field(k, v) for k, v in fields] + [field("colour", VALUES)]
    return st.tuples(*parts).map(lambda ds: {k: v for d in ds for k, v in d.items()})


NATIVE_TASK = record(
    ("name", st.one_of(NAMES, VALUES)),
    ("type", st.one_of(NAMES, VALUES)),
    ("payload", VALUES),
    ("priority", st.one_of(st.integers(-1200, 1200), VALUES)),
    ("after", PARENTS),
    ("max_attempts", st.one_of(st.integers(-2, 5), VALUES)),
)
NATIVE = record(
    ("name", st.one_of(NAMES, VALUES)),
    ("tasks", st.one_of(st.lists(st.one_of(NATIVE_TASK, VALUES), max_size=6), VALUES)),
    ("retry_backoff", VALUES),
).map(lambda d: {"tasks": [], **d})
TASK_LIST_TASK = record(
    ("Name", st.one_of(NAMES, VALUES)),
    ("Type", st.one_of(NAMES, VALUES)),
    ("Payload", VALUES),
    ("Parents", PARENTS),
    ("Children", PARENTS),
    ("Priority", VALUES),
)
TASK_LIST = st.one_of(
    st.lists(TASK_LIST_TASK, min_size=1, max_size=6).map(
        lambda ts: [{"Name": "a", **ts[0]}, *ts[1:]]
    ),
    record(("Name", st.one_of(NAMES, VALUES)), ("Tasks", st.lists(TASK_LIST_TASK, max_size=6))),
)
STEP = record(
    ("name", st.one_of(NAMES, VALUES)),
    ("depends", PARENTS),
    ("task", st.one_of(NAMES, VALUES)),
    ("queue", st.one_of(NAMES, VALUES)),
    ("payload", VALUES),
)
SUBTASK = record(
    ("name", st.one_of(NAMES, VALUES)),
    ("itemListKey", VALUES),
    ("steps", st.one_of(st.lists(st.one_of(STEP, VALUES), max_size=3), VALUES)),
)
STEPS_DOC = st.lists(
    record(
        ("name", st.one_of(NAMES, VALUES)),
        ("steps", st.one_of(st.lists(st.one_of(STEP, NAMES), max_size=5), VALUES)),
        ("tasks", st.one_of(st.lists(SUBTASK, max_size=2), VALUES)),
    ),
    max_size=3,
).map(lambda ws: {"workflows": ws})
DOCUMENTS = st.one_of(NATIVE, TASK_LIST, STEPS_DOC, VALUES)


def to_json(value: Any) -> str:
    """JSON text, with :class:`Raw` pieces written as they are."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, list):
        return "[" + ", ".join(to_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {to_json(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def has_raw(value: Any) -> bool:
    if isinstance(value, Raw):
        return True
    if isinstance(value, list):
        return any(has_raw(v) for v in value)
    if isinstance(value, dict):
        return any(has_raw(v) for v in value.values())
    return False


def check(text: str, source: str) -> None:
    """Loads and validates, or is refused in one line; within a couple of seconds."""
    start = time.perf_counter()
    try:
        for wf in load_text(text, source):
            compile_workflow(wf)
    except DefinitionError as e:
        message = str(e)
        assert message and message.isprintable(), repr(message)
        assert message.startswith(source), message
    assert time.perf_counter() - start < 2, f"{time.perf_counter() - start:.1f}s"


@FUZZ
@given(DOCUMENTS)
def test_documents_as_json(doc: Any) -> None:
    check(to_json(doc), "f.json")


@FUZZ
@given(DOCUMENTS)
def test_documents_as_yaml_flow(doc: Any) -> None:
    # JSON text is (nearly) YAML: the same documents, through the YAML reader.
    check(to_json(doc), "f.yaml")


@FUZZ
@given(DOCUMENTS.filter(lambda d: not has_raw(d)))
def test_documents_as_yaml_blocks(doc: Any) -> None:
    check(yaml.safe_dump(doc, allow_unicode=False, sort_keys=False), "f.yaml")


@FUZZ
@given(st.text(max_size=200), st.sampled_from(["f.json", "f.yaml"]))
def test_random_text(text: str, source: str) -> None:
    check(text, source)


@FUZZ
@given(
    st.lists(
        st.sampled_from(
            [
                "name: w\n",
                "tasks:\n",
                "  - name: a\n",
                "    after: [a]\n",
                "- Name: x\n",
                "workflows:\n",
                "  steps:\n",
                "&a ",
                "*a ",
                "<<: ",
                "{",
                "}",
                "[",
                "]",
                ", ",
                '"\\ud800"',
                "\x00",
                "\t",
                ": ",
                "- ",
                "!!str ",
                "? ",
                "---\n",
                '"',
                "'",
            ]
        ),
        max_size=30,
    ).map("".join),
    st.sampled_from(["f.json", "f.yaml"]),
)
def test_random_fragments(text: str, source: str) -> None:
    check(text, source)


@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes(data: bytes) -> None:
    text = data.decode("utf-8", "surrogateescape")
    check(text, "f.yaml")
    check(text, "f.json")
