"""Workflow definitions: the builder, validation and the compact form (no Redis)."""

from __future__ import annotations

import pytest

from engine import DefinitionError, Workflow
from engine.spec.definition import validate
from engine.store.codec import compile_workflow


def chain(*names: str) -> Workflow:
    wf = Workflow("chain")
    prev = None
    for n in names:
        prev = wf.task(n, after=[prev] if prev else [])
    return wf


def test_builder_accepts_tasks_or_names_as_parents() -> None:
    wf = Workflow("w")
    a = wf.task("a", payload={"x": 1})
    wf.task("b", after=[a, "a"][:1])
    wf.task("c", after=["a", "b"], type="io", priority=5, max_attempts=3)
    assert [t.after for t in wf.tasks] == [[], ["a"], ["a", "b"]]
    assert len(wf) == 3
    assert validate(wf) == ['{"x":1}', "", ""]


def test_cycle_is_named() -> None:
    wf = Workflow("loop")
    wf.task("a", after=["c"])
    wf.task("b", after=["a"])
    wf.task("c", after=["b"])
    wf.task("free")
    with pytest.raises(DefinitionError, match="cycle") as e:
        validate(wf)
    msg = str(e.value)
    path = msg.split("cycle: ")[1].split(" -> ")
    assert path[0] == path[-1]
    assert set(path) == {"a", "b", "c"}
    assert "free" not in msg


def test_self_dependency() -> None:
    wf = Workflow("w")
    wf.task("a", after=["a"])
    with pytest.raises(DefinitionError, match="'a' depends on itself"):
        validate(wf)


def test_unknown_parent_is_named() -> None:
    wf = Workflow("w")
    wf.task("a")
    wf.task("b", after=["a", "ghost"], where="f.yaml:7")
    with pytest.raises(DefinitionError, match=r"^f.yaml:7: task 'b' depends on unknown task 'gh"):
        validate(wf)


def test_duplicate_names_point_at_both_places() -> None:
    wf = Workflow("w")
    wf.task("a", where="f.yaml:3")
    wf.task("a", where="f.yaml:9")
    with pytest.raises(DefinitionError) as e:
        validate(wf)
    assert str(e.value) == "f.yaml:9: duplicate task name 'a' (first defined at f.yaml:3)"


def test_parent_listed_twice() -> None:
    wf = Workflow("w")
    wf.task("a")
    wf.task("b", after=["a", "a"])
    with pytest.raises(DefinitionError, match="lists a parent twice"):
        validate(wf)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda wf: None, "has no tasks"),
        (lambda wf: wf.task(""), "has no name"),
        (lambda wf: wf.task(7), "task name must be a string, not 7"),  # type: ignore[arg-type]
        (lambda wf: wf.task("a", type=3), "type must be a string"),  # type: ignore[arg-type]
        (lambda wf: wf.task("a", priority=1000), "outside -999..999"),
        (lambda wf: wf.task("a", priority="hi"), "priority must be an integer"),  # type: ignore[arg-type]
        (lambda wf: wf.task("a", priority=True), "priority must be an integer"),
        (lambda wf: wf.task("a", max_attempts=0), "at least 1"),
        (lambda wf: wf.task("a", payload={1, 2}), "not JSON-serialisable"),
    ],
)
def test_bad_fields(build, message: str) -> None:
    wf = Workflow("w")
    build(wf)
    with pytest.raises(DefinitionError, match=message):
        validate(wf)


def test_workflow_needs_a_name_and_a_sane_backoff() -> None:
    wf = Workflow("  ")
    wf.task("a")
    with pytest.raises(DefinitionError, match="no name"):
        validate(wf)
    wf = Workflow("w", retry_backoff=-1)
    wf.task("a")
    with pytest.raises(DefinitionError, match="retry_backoff"):
        validate(wf)
    for bad in (float("inf"), float("nan")):
        wf = Workflow("w", retry_backoff=bad)
        wf.task("a")
        with pytest.raises(DefinitionError, match="retry_backoff must be a number"):
            validate(wf)
    wf = Workflow("w", retry_backoff_max="1h")  # type: ignore[arg-type]
    wf.task("a")
    with pytest.raises(DefinitionError, match="retry_backoff_max must be a number"):
        validate(wf)


def test_payload_limit_counts_encoded_bytes() -> None:
    wf = Workflow("w")
    wf.task("a", payload="é" * 10)  # 20 bytes of UTF-8, 22 with the quotes
    validate(wf, max_payload=22)
    with pytest.raises(DefinitionError, match="payload is 22 bytes, over the 21-byte limit"):
        validate(wf, max_payload=21)


def test_compiled_layout() -> None:
    wf = Workflow("w", retry_backoff=0.25)
    a = wf.task("a", payload="x", type="io", priority=3)
    wf.task("b", after=[a], max_attempts=2)
    c = compile_workflow(wf)
    d = c.definition
    assert c.name == "w" and d[0] == c.digest
    assert d[1:6] == [2, 1, 0, "io", 3]  # two tasks, one root: index 0, type io, priority 3
    assert d[6:9] == [2, "io", ""]  # two types
    nstatic = d[9]
    static = dict(zip(d[10 : 10 + 2 * nstatic : 2], d[11 : 11 + 2 * nstatic : 2], strict=True))
    rest = d[10 + 2 * nstatic :]
    payloads = dict(zip(rest[1 : 1 + 2 * rest[0] : 2], rest[2 : 2 + 2 * rest[0] : 2], strict=True))
    rest = rest[1 + 2 * rest[0] :]
    assert rest[0] * 2 == len(rest) - 1
    init = dict(zip(rest[1::2], rest[2::2], strict=True))
    assert static["bk"] == 250
    assert static["0N"] == "a" and static["0T"] == "io" and "0P" not in static
    assert payloads == {"0P": '"x"'}  # apart: runs that differ in payloads alone share one
    assert c.payload_sig == '"x"'
    assert static["0C"] == "1" and static["1U"] == "0" and static["1M"] == 2
    assert "1T" not in static and "1R" not in static  # defaults are not stored
    assert static["1V"] == '["a"]'  # the parents' names, as the agent hands them over
    assert init == {"0": "Q|0|0|||"}  # a waiting task has no record yet; Q: ready


def test_digest_depends_on_tasks_not_on_the_workflow_name() -> None:
    def build(name: str, payload: str) -> Workflow:
        wf = Workflow(name)
        wf.task("a", payload=payload)
        wf.task("b", after=["a"])
        return wf

    assert compile_workflow(build("x", "p")).digest == compile_workflow(build("y", "p")).digest
    # payloads are the run's: which tasks have one is the definition's
    p, q = compile_workflow(build("x", "p")), compile_workflow(build("x", "q"))
    assert p.digest == q.digest and p.payload_sig != q.payload_sig
    none = Workflow("x")
    none.task("a")
    none.task("b", after=["a"])
    assert compile_workflow(none).digest != p.digest
    # length-prefixed: moving a character between two values changes the digest
    one, two = Workflow("w"), Workflow("w")
    one.task("ab", type="c")
    two.task("a", type="bc")
    assert compile_workflow(one).digest != compile_workflow(two).digest


def test_long_chain_and_wide_fan_validate() -> None:
    validate(chain(*[f"t{i}" for i in range(2000)]))
    wf = Workflow("fan")
    root = wf.task("root")
    for i in range(500):
        wf.task(f"leaf{i}", after=[root])
    assert len(validate(wf)) == 501
