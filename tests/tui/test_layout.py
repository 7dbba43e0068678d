"""The DAG layout: every edge drawn, none invented where the drawing is unambiguous."""

from __future__ import annotations

import random

import pytest
from dagtrace import chips, trace

from demos import shapes
from engine import TaskStatus, Workflow
from redisflow_tui.data.dag import (
    fingerprint,
    focus_graph,
    group_graph,
    level_rows,
    levels_of,
    task_graph,
)
from redisflow_tui.data.layout import LayoutCache, layout, to_text

# what the console shows and does with its keys: the same on a cluster, whose reads the
# engine's own tests check there
pytestmark = pytest.mark.same_on_cluster


def graph_of(wf: Workflow) -> tuple[list[str], list[tuple[int, int]]]:
    names = [t.name for t in wf.tasks]
    index = {n: i for i, n in enumerate(names)}
    return names, [(index[p], i) for i, t in enumerate(wf.tasks) for p in t.after]


def drawn(wf: Workflow) -> tuple[list[str], set[tuple[str, str]], set[tuple[str, str]]]:
    names, edges = graph_of(wf)
    lay = layout([len(n) + 4 for n in names], edges)
    lines = to_text(lay, lambda v: f"[o {names[v]}]")
    return lines, trace(lines), {(names[a], names[b]) for a, b in edges}


def tree() -> Workflow:
    wf = Workflow("tree")
    root = wf.task("root")
    for i in range(3):
        mid = wf.task(f"m{i}", after=[root])
        for j in range(2):
            wf.task(f"leaf{i}{j}", after=[mid])
    return wf


def skip_edges() -> Workflow:
    wf = Workflow("skips")
    a = wf.task("a")
    b = wf.task("b", after=[a])
    c = wf.task("c", after=[b])
    wf.task("d", after=[c, a])
    wf.task("e", after=[a])
    return wf


@pytest.mark.parametrize(
    "wf",
    [shapes.diamond4(), shapes.chain9(), shapes.fan10(), tree(), skip_edges()],
    ids=["diamond", "chain", "fan", "tree", "skip"],
)
def test_structured_shapes_are_drawn_exactly(wf: Workflow) -> None:
    lines, seen, want = drawn(wf)
    assert seen == want, "\n" + "\n".join(lines)


def test_diamond_picture() -> None:
    lines, _, _ = drawn(shapes.diamond4())
    assert lines == [
        "                             ╭─[o TestNode3]",
        "[o TestNode1]──[o TestNode2]─┤",
        "                             ╰─[o TestNode4]",
    ]


@pytest.mark.parametrize("seed", range(60))
def test_random_dags_draw_every_edge(seed: int) -> None:
    rng = random.Random(seed)
    wf = shapes.random_dag(rng.randint(2, 30), rng.choice((0.1, 0.25, 0.4)), seed=seed)
    lines, seen, want = drawn(wf)
    assert want <= seen, "\n" + "\n".join(lines)
    # every chip drawn once, none overlapping
    found = chips(lines)
    assert sorted(n for n, _ in found.values()) == sorted(t.name for t in wf.tasks)


def test_layout_cache_computes_once_per_definition() -> None:
    cache = LayoutCache(size=2)
    names, edges = graph_of(shapes.fan10())
    widths = [len(n) + 4 for n in names]
    first = cache.get("k", widths, edges)
    assert cache.get("k", widths, edges) is first and cache.misses == 1
    cache.get("k2", widths, edges)
    cache.get("k3", widths, edges)
    assert cache.peek("k") is None and cache.misses == 3


def statuses(wf: Workflow) -> list[TaskStatus]:
    children: dict[str, list[str]] = {t.name: [] for t in wf.tasks}
    for t in wf.tasks:
        for p in t.after:
            children[p].append(t.name)
    return [
        TaskStatus(i, t.name, t.type, "waiting", parents=list(t.after), children=children[t.name])
        for i, t in enumerate(wf.tasks)
    ]


def test_groups_collapse_numbered_siblings() -> None:
    tasks = statuses(shapes.fan(1000))
    level = levels_of(tasks)
    g = group_graph(tasks, level, fingerprint(tasks))
    assert g.labels == ["split", "part", "gather"]
    assert g.edges == [(0, 1), (1, 2)]
    looks = ["succeeded"] * 600 + ["failed"] * 2 + ["running"] * 400
    text, look = g.chip(1, looks)
    assert look == "failed" and text == "[✖ part ×1000  599/1000]"
    rows = level_rows(looks, level, [t.name for t in tasks])
    assert [r.total for r in rows] == [1, 1000, 1]
    assert rows[1].counts["running"] == 399 and rows[2].counts["running"] == 1


def test_focus_graph_is_the_neighbourhood() -> None:
    tasks = statuses(shapes.chain(50))
    g = focus_graph(tasks, 25, fingerprint(tasks))
    assert g.labels == ["step24", "step25", "step26", "step27", "step28"]
    assert len(g.edges) == 4
    assert task_graph(tasks, "k").node_of[49] == 49


def test_fingerprint_depends_on_shape_only() -> None:
    a = statuses(shapes.diamond4(name="one"))
    b = statuses(shapes.diamond4(name="two"))
    assert fingerprint(a) == fingerprint(b) != fingerprint(statuses(shapes.chain9()))
