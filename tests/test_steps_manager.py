"""The steps manager as it behaves: the element key, the gather a ``task:`` step
outputs, the messages its workers get, and its own word-counts example run with its
workers' model, on a real Redis."""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import run_agent

from engine import Engine, Task, manager_handler, manager_message
from engine.spec.loader import load_file, load_text
from engine.spec.mapping import element_key, gather_of

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("key", "element"),
    [
        ("sections", "section"),
        ("categories", "categorie"),
        ("address", "addres"),
        ("subid_list", "subid_list"),
        ("k1", "k1"),
        ("s", "s"),
        ("ss", "s"),
    ],
)
def test_element_key_drops_one_trailing_s(key: str, element: str) -> None:
    assert element_key(key) == element
    wf = load_text(
        "workflows:\n  - name: w\n    steps:\n      - name: a\n"
        "      - name: b\n        task: t\n        depends: [a]\n"
        f"    tasks:\n      - name: t\n        itemListKey: {key}\n"
        "        steps: [{name: x}]\n",
        "w.yaml",
    )[0]
    assert wf.tasks[1].payload["item"] == element


def test_gather_of_follows_the_manager() -> None:
    outputs: list[Any] = [
        {"section": "a", "filename": "f1", "n": 1},
        None,
        [1, 2],
        {"n": 2, "section": "b", "extra": {}},
        {"sections": "ignored", "section": "c"},
        {"other": 3},
    ]
    assert gather_of(outputs, "sections") == {
        "sections": ["a", "b", "c"],
        "filename": "f1",
        "n": 1,
        "extra": {},
        "other": 3,
    }


def _seed(text: str, tmp_path: Path, name: str = "w.yaml") -> Any:
    path = tmp_path / name
    path.write_text(text)
    [wf] = load_file(path)
    return wf


def echo(task: Task) -> Any:
    """A worker that replies with the message it got (the manager's own tests' echo)."""
    return manager_message(task)


# The manager's parser test configuration (its pkg/config testdata), as written.
PARSER_CONFIG = """\
workflows:
  - name: example-1
    vhosts: [ /domain ]
    steps:
     - name: s1
       queue: qalias
       depends: [ __start__ ]
     - name: s2
       task: sub2
       depends: [ s1 ]
     - name: s3
       depends: [ s1 ]
     - name: s4
       depends: [s2, s3]
    tasks:
      - name: sub2
        itemListKey: subid_list
        steps:
         - name: s2s1
           depends: [ __start__ ]
"""


def test_the_step_after_a_task_gets_the_gathered_list(engine: Engine, tmp_path: Path) -> None:
    wid = engine.push(_seed(PARSER_CONFIG, tmp_path), input={"job": "j1"})
    seen: dict[str, Any] = {}

    def work(task: Task) -> Any:
        msg = manager_message(task)
        seen.setdefault(task.name, []).append(msg)
        if task.name == "s1":
            return {"subid_list": ["a", "b", "c"], "from": "s1"}
        if task.name == "s2":  # an item: its element under the key, less the list
            return {"subid_list": msg["subid_list"] + "-done", "from": "item"}
        return {"done": task.name}

    types = ["qalias", "s2s1", "s3", "s4"]
    run_agent(engine, dict.fromkeys(types, work))
    st = engine.status(wid)
    assert st.state == "succeeded", st
    assert seen["s1"] == [{"job": "j1"}]  # a first step gets the job's JSON
    assert sorted(m["subid_list"] for m in seen["s2"]) == ["a", "b", "c"]
    assert all(m["from"] == "s1" for m in seen["s2"])
    # s4 depends on [s2, s3]: the gather first, its keys winning
    assert seen["s4"] == [{"subid_list": ["a-done", "b-done", "c-done"], "from": "item",
                           "done": "s3"}]  # fmt: skip
    assert st.task("s2").output == {"subid_list": ["a-done", "b-done", "c-done"], "from": "item"}


# The manager's engine test with a task: step after another (its mpath testdata), with a
# first step giving the list (redisflow maps over a parent's output, not the job's JSON).
MPATH = """\
workflows:
  - name: example
    steps:
      - name: s0
      - name: s1
        task: task1
        depends: [s0]
      - name: s2
        task: task2
        depends: [s0]
      - name: s3
        task: task1
        depends: [s2]
    tasks:
      - name: task1
        itemListKey: k1
        steps:
          - name: s1
      - name: task2
        itemListKey: k1
        steps:
          - name: s1
"""


def test_a_task_step_maps_over_the_gather_of_another(engine: Engine, tmp_path: Path) -> None:
    wid = engine.push(_seed(MPATH, tmp_path))
    items: list[Any] = []

    def work(task: Task) -> Any:
        if task.name == "s0":
            return {"k1": [1, 2]}
        if task.name == "s3":
            items.append(task.item)
        return echo(task)

    run_agent(engine, {"s0": work, "s1": work})
    st = engine.status(wid)
    assert st.state == "succeeded", st
    assert st.task("s2").output == {"k1": [1, 2]}
    assert sorted(items) == [1, 2]
    assert st.task("s3").output == {"k1": [1, 2]}


def test_the_gather_keeps_values_as_written(engine: Engine, tmp_path: Path) -> None:
    """The gather (in Lua) against its Python reference, on outputs that a naive scanner
    gets wrong: quotes and brackets in strings, escapes, big and exact numbers, empty
    lists and objects, outputs that are not objects, a key the first item wins."""
    outputs: list[Any] = [
        {"item": 'a "quoted" } ] [ {', "x": {"deep": [[], {}, [1, {"y": "\\"}]]}},
        {"item": 12345678901234567890, "x": "later", "f": 0.1, "e": []},
        None,
        "just text",
        [{"item": 1}],
        {"z": "é \u2028 \\u", "item": {}},
        {},
        {"item": -1.5e-7, "n": None, "t": True},
    ]
    wf = _seed(
        "workflows:\n  - name: w\n    steps:\n      - name: split\n"
        "      - name: each\n        task: t\n        depends: [split]\n"
        "      - name: after\n        depends: [each]\n"
        "    tasks:\n      - name: t\n        itemListKey: items\n        steps: [{name: x}]\n",
        tmp_path,
    )
    wid = engine.push(wf)
    got: list[Any] = []

    def work(task: Task) -> Any:
        if task.name == "split":
            return {"items": list(range(len(outputs))), "keep": "me"}
        if task.name == "each":
            return outputs[task.item]
        got.append(manager_message(task))
        return None

    run_agent(engine, {"split": work, "x": work, "after": work})
    st = engine.status(wid)
    assert st.state == "succeeded", st
    want = gather_of(outputs, "items")
    assert st.task("each").output == want
    assert got == [want]
    assert list(st.task("each").output["items"]) == want["items"]


def test_several_last_steps_of_an_item_merge(engine: Engine, tmp_path: Path) -> None:
    wf = _seed(
        "workflows:\n  - name: w\n    steps:\n      - name: split\n"
        "      - name: each\n        task: t\n        depends: [split]\n"
        "    tasks:\n      - name: t\n        itemListKey: parts\n        steps:\n"
        "          - name: a\n          - name: b\n            depends: [a]\n"
        "          - name: c\n            depends: [a]\n",
        tmp_path,
    )
    wid = engine.push(wf)
    seen: dict[str, list[Any]] = {}

    def work(task: Task) -> Any:
        msg = manager_message(task)
        seen.setdefault(task.name, []).append(msg)
        if task.name == "split":
            return {"parts": ["p", "q"], "book": "b.txt"}
        if task.name == "a":
            return {"word": msg["part"] + "!", "book": msg["book"]}
        if task.name == "b":
            return {"part": msg["word"], "by": "b"}
        return {"by": "c", "seen": msg}

    run_agent(engine, dict.fromkeys(["split", "a", "b", "c"], work))
    st = engine.status(wid)
    assert st.state == "succeeded", st
    # a first step gets the parent's output less the list, and its element
    assert sorted(m["part"] for m in seen["a"]) == ["p", "q"]
    assert all("parts" not in m and m["book"] == "b.txt" for m in seen["a"])
    # a later step gets its parents' outputs within the item only
    assert sorted(m["word"] for m in seen["c"]) == ["p!", "q!"]
    out = st.task("each").output
    assert out["parts"] == ["p!", "q!"] and out["by"] == "b"


def _gutenberg_text(path: Path) -> Path:
    """demos/book.txt (passages of three novels) laid out as a Project Gutenberg text: a
    ``Title:`` line, chapters opening at ``CHAPTER <numeral>.`` lines."""
    text = (ROOT / "demos" / "book.txt").read_text(encoding="utf-8")
    title, _, body = text.partition("\n")
    body = re.sub(r"^(CHAPTER [IVX]+\.) (.*)$", r"\1\n\2", body, flags=re.MULTILINE)
    path.write_text(f"Title: {title}\nRelease date: none\n\n{body}", encoding="utf-8")
    return path


def test_the_managers_word_counts_example(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The manager's examples/word-counts config (demos/steps-book-word-counts.yaml) and
    workers in its model (demos/steps_workers.py), on a real text: the counts equal a
    direct count of the chapters' words."""
    from demos import steps_workers as workers

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the workers write
    book = _gutenberg_text(tmp_path / "book.txt")
    wid = engine.push(
        load_file(ROOT / "demos" / "steps-book-word-counts.yaml")[0],
        input={"filename": str(book)},
    )
    types = ["book-split", "segment-word-counts", "sum-splits", "store-title"]
    run_agent(engine, dict.fromkeys(types, workers.handler))
    st = engine.status(wid)
    assert st.state == "succeeded", st
    lines = book.read_text(encoding="utf-8").split("\n")
    first = next(n for n, line in enumerate(lines) if line.startswith("CHAPTER "))
    direct = Counter(w for line in lines[first:] for w in line.split())
    tsv = Path(st.task("sum-splits").output["sum_splits"])
    counted = {w: int(n) for w, n in (row.split("\t") for row in tsv.read_text().splitlines())}
    assert counted == direct and sum(direct.values()) > 400
    gathered = st.task("section-counts").output
    assert list(gathered) == ["sections"]  # the items answer with their pickle's path only
    assert len(gathered["sections"]) == 3  # three chapters, one pickle each
    assert all(Path(p).parent == tmp_path for p in gathered["sections"])
    assert st.task("store-title").output == {
        "filename": str(book),
        "title": "A Book of Beginnings",
    }


def test_steps_handler_names_jobs_as_the_manager() -> None:
    calls: list[tuple[str, Any]] = []
    handler = manager_handler(lambda cid, msg: calls.append((cid, msg)) or {"ok": 1})
    task = Task("7", 1, "section-counts", "segment-word-counts",
                {"itemListKey": "sections", "item": "section",
                 "steps": ["segment-word-counts"]}, 1, {"book-split": {"f": "x"}},
                item={"start": 0}, item_index=4)  # fmt: skip
    assert handler(task) == {"ok": 1}
    assert calls == [("7.4:segment-word-counts", {"f": "x", "section": {"start": 0}})]


def test_the_earlier_names_still_work() -> None:
    import engine

    assert engine.seed002_handler is manager_handler
    assert engine.seed002_message is manager_message


# The manager's engine test data as written (pkg/engine/testdata/mpath.yaml): s1 and s2 run
# their task over the job's own k1; s3 over s2's gather.
MPATH_AS_WRITTEN = """\
workflows:
  - name: example
    steps:
      - name: s1
        task: task1
      - name: s2
        task: task2
      - name: s3
        task: task1
        depends: [s2]
    tasks:
      - name: task1
        itemListKey: k1
        steps:
          - name: s1
      - name: task2
        itemListKey: k1
        steps:
          - name: s1
"""


def test_a_task_step_without_depends_maps_over_the_jobs_json(
    engine: Engine, tmp_path: Path
) -> None:
    """The manager's TestSubtaskStateMachine: a job {"k1": [1, 2]}, an echo worker; every
    item of s1, s2 and s3 runs once (6 messages), and the job ends."""
    wf = _seed(MPATH_AS_WRITTEN, tmp_path)
    assert wf.tasks[0].name == "__start__"  # the job's own JSON, as a first task's output
    wid = engine.push(wf, input={"k1": [1, 2]})
    seen: list[Any] = []

    def work(task: Task) -> Any:
        seen.append((task.name, task.item))
        return echo(task)

    run_agent(engine, {"s1": work})
    st = engine.status(wid)
    assert st.state == "succeeded", st
    assert st.task("__start__").output == {"k1": [1, 2]}
    assert sorted(seen) == [("s1", 1), ("s1", 2), ("s2", 1), ("s2", 2), ("s3", 1), ("s3", 2)]
    assert st.task("s3").output == {"k1": [1, 2]}
