"""What the DAG view draws: a workflow's tasks, or groups of them, with their states.

Three views of one workflow, all drawn with :mod:`redisflow_tui.data.layout`:

- ``tasks``: one chip per task (the default up to :data:`FULL_LIMIT` tasks);
- ``groups``: tasks of one level whose names differ only by a trailing number (``part1``
  ... ``part1000``) collapse into one chip ``[▶ part ×1000 585/1000]``;
- ``focus``: the tasks within two steps of the selected one.

A map (a task run once per element of a parent's output) is one chip with its items'
live counts, ``[▶ count 22/25 ✖3]``, in every view.

A per-level summary (:func:`level_rows`) serves any size. Graph shapes are keyed by a
fingerprint of the definition, so a layout is computed once per definition, however
many workflows share it and however often their states change.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import networkx as nx

from engine import HANDLER_RULES, TASK_LOOKS, WORKFLOW_STATES, TaskState, TaskStatus, glyphs

FULL_LIMIT = 250  # tasks drawn one by one up to this size
GROUP_LIMIT = 250  # groups drawn as a graph up to this many
FOCUS_RADIUS = 2
FOCUS_LIMIT = 120
NAME_WIDTH = 22
MAP_ROOM = 16  # cells a map's chip keeps for its items' counts: " 98k/100k ✖1.8k"

# how a chip shows a state (a task's look or a workflow's state); the glyphs all exist in
# common terminal fonts
GLYPH = glyphs((*TASK_LOOKS, *WORKFLOW_STATES))
# which state a group (or an edge to several tasks) shows: the first present wins
PRECEDENCE = (
    "failed",
    "running",
    "suspended",
    "retrying",
    "ready",
    "waiting",
    "upstream_failed",
    "cancelled",
    "skipped",
    "succeeded",
)
STEM = re.compile(r"^(.*?)[-_.:#]?\d+$")


def task_look(task: TaskStatus) -> str:
    """The state a task's chip shows: its state, or ``retrying`` if it is backing off."""
    if task.state == TaskState.READY and task.failures > 0:
        return "retrying"
    return str(task.state)


def compact(n: int) -> str:
    """``n`` in at most four cells: 999, 9.9k, 98k, 1.2M."""
    if n < 1000:
        return str(n)
    if n < 10_000:
        return f"{n / 1000:.1f}k"
    if n < 1_000_000:
        return f"{n // 1000}k"
    return f"{n / 1_000_000:.1f}M"


def map_text(task: TaskStatus) -> str:
    """A map's items on its chip: succeeded of all (``?`` until expanded), then failed."""
    items = task.items or {}
    total = items.get("total")
    text = f"{compact(items.get('succeeded', 0))}/{'?' if total is None else compact(total)}"
    if items.get("failed"):
        text += f" ✖{compact(items['failed'])}"
    return text


def combined(looks: Sequence[str]) -> str:
    """The one state that stands for several (see :data:`PRECEDENCE`)."""
    present = set(looks)
    for state in PRECEDENCE:
        if state in present:
            return state
    return "waiting"


def shorten(name: str, width: int = NAME_WIDTH) -> str:
    """``name`` cut to ``width`` cells with an ellipsis."""
    return name if len(name) <= width else name[: width - 1] + "…"


def fingerprint(tasks: Sequence[TaskStatus]) -> str:
    """A digest of a definition's shape: task names and parents, in index order."""
    h = hashlib.blake2b(digest_size=12)
    for t in tasks:
        h.update(t.name.encode())
        h.update(b"\x00")
        h.update(",".join(t.parents).encode())
        h.update(b"\x01")
        if t.items is not None:  # a map's chip is wider
            h.update(b"\x02")
    return h.hexdigest()


@dataclass
class DagGraph:
    """Nodes (each one task or a group of tasks) and edges, ready to lay out.

    Attributes:
        key: identifies the shape, for the layout cache.
        mode: ``tasks``, ``groups`` or ``focus``.
        labels: per node, the name on its chip.
        members: per node, the task indexes it stands for.
        edges: ``(from node, to node)``.
        node_of: per task index, the node showing it (tasks outside a focus are absent).
        maps: the task indexes that are maps (their chips show their items' counts).
        branches: the nodes that are failure branches (rules one_failed, all_failed:
            ``on_failure``); the edges into them are drawn dashed.
    """

    key: tuple[str, ...]
    mode: str
    labels: list[str]
    members: list[list[int]]
    edges: list[tuple[int, int]]
    node_of: dict[int, int] = field(default_factory=dict)
    maps: frozenset[int] = frozenset()
    branches: frozenset[int] = frozenset()

    def into_branch(self, ref: int | tuple[int, ...]) -> bool:
        """Whether an edge drawing coloured by ``ref`` leads only into failure branches."""
        if isinstance(ref, int):
            return ref in self.branches
        return bool(ref) and all(r in self.branches for r in ref)

    def widths(self) -> list[int]:
        """Chip widths: ``[`` glyph space label ``]``, groups and maps with room for counts."""
        out = []
        for label, members in zip(self.labels, self.members, strict=True):
            w = len(label) + 4
            if len(members) > 1:
                digits = len(str(len(members)))
                w += 2 + digits + 1 + 2 * digits + 1  # " ×N d/N"
            elif members[0] in self.maps:
                w += MAP_ROOM
            out.append(w)
        return out

    def chip(
        self, node: int, looks: Sequence[str], counts: Mapping[int, str] | None = None
    ) -> tuple[str, str]:
        """``(text, look)`` of a node's chip given every task's look (and each map's
        items' ``counts``, as :func:`map_text` gives them)."""
        members = self.members[node]
        label = self.labels[node]
        if len(members) == 1:
            look = looks[members[0]]
            if members[0] in self.maps:
                shown = (counts or {}).get(members[0], "")[: MAP_ROOM - 1]
                return f"[{GLYPH.get(look, '?')} {label} {shown:>{MAP_ROOM - 1}}]", look
            return f"[{GLYPH.get(look, '?')} {label}]", look
        states = [looks[i] for i in members]
        look = combined(states)
        n = len(members)
        done = sum(1 for s in states if s == "succeeded")
        digits = len(str(n))
        return f"[{GLYPH.get(look, '?')} {label} ×{n} {done:>{digits}}/{n}]", look


def levels_of(tasks: Sequence[TaskStatus]) -> list[int]:
    """Each task's level: one more than its deepest parent's."""
    index = {t.name: t.index for t in tasks}
    g = nx.DiGraph()
    g.add_nodes_from(range(len(tasks)))
    g.add_edges_from((index[p], t.index) for t in tasks for p in t.parents if p in index)
    level = [0] * len(tasks)
    for depth, generation in enumerate(nx.topological_generations(g)):
        for v in generation:
            level[v] = depth
    return level


def maps_of(tasks: Sequence[TaskStatus]) -> frozenset[int]:
    """The indexes of the tasks that are maps."""
    return frozenset(t.index for t in tasks if t.items is not None)


def is_branch(task: TaskStatus) -> bool:
    """Whether a task is a failure branch: it runs when a parent failed."""
    return task.trigger in HANDLER_RULES


def task_graph(tasks: Sequence[TaskStatus], key: str) -> DagGraph:
    """One node per task."""
    index = {t.name: t.index for t in tasks}
    edges = [(index[p], t.index) for t in tasks for p in t.parents if p in index]
    return DagGraph(
        key=(key, "tasks"),
        mode="tasks",
        labels=[shorten(t.name) for t in tasks],
        members=[[t.index] for t in tasks],
        edges=edges,
        node_of={t.index: t.index for t in tasks},
        maps=maps_of(tasks),
        branches=frozenset(t.index for t in tasks if is_branch(t)),
    )


def group_graph(tasks: Sequence[TaskStatus], level: Sequence[int], key: str) -> DagGraph:
    """Tasks of one level whose names share a stem collapsed into one node."""
    groups: dict[tuple[int, str], int] = {}
    labels: list[str] = []
    members: list[list[int]] = []
    node_of: dict[int, int] = {}
    for t in tasks:
        m = STEM.match(t.name)
        stem = m.group(1) if m and m.group(1) else t.name
        gk = (level[t.index], stem)
        node = groups.get(gk)
        if node is None:
            node = groups[gk] = len(labels)
            labels.append(shorten(stem))
            members.append([])
        members[node].append(t.index)
        node_of[t.index] = node
    for node in groups.values():
        if len(members[node]) == 1:
            labels[node] = shorten(tasks[members[node][0]].name)
    index = {t.name: t.index for t in tasks}
    edges = sorted(
        {
            (node_of[index[p]], node_of[t.index])
            for t in tasks
            for p in t.parents
            if p in index and node_of[index[p]] != node_of[t.index]
        }
    )
    branches = frozenset(
        node for node, ms in enumerate(members) if all(is_branch(tasks[i]) for i in ms)
    )
    return DagGraph(
        (key, "groups"), "groups", labels, members, edges, node_of, maps_of(tasks), branches
    )


def focus_graph(tasks: Sequence[TaskStatus], center: int, key: str) -> DagGraph:
    """The tasks within :data:`FOCUS_RADIUS` steps of ``center`` (at most FOCUS_LIMIT)."""
    index = {t.name: t.index for t in tasks}
    near = {center}
    frontier = [center]
    for _ in range(FOCUS_RADIUS):
        nxt = []
        for i in frontier:
            t = tasks[i]
            for name in (*t.parents, *t.children):
                j = index.get(name)
                if j is not None and j not in near and len(near) < FOCUS_LIMIT:
                    near.add(j)
                    nxt.append(j)
        frontier = nxt
    chosen = sorted(near)
    local = {i: k for k, i in enumerate(chosen)}
    edges = [
        (local[index[p]], local[i])
        for i in chosen
        for p in tasks[i].parents
        if p in index and index[p] in local
    ]
    return DagGraph(
        key=(key, "focus", str(center)),
        mode="focus",
        labels=[shorten(tasks[i].name) for i in chosen],
        members=[[i] for i in chosen],
        edges=edges,
        node_of=local,
        maps=maps_of(tasks),
        branches=frozenset(local[i] for i in chosen if is_branch(tasks[i])),
    )


def best_mode(tasks: Sequence[TaskStatus], groups: int) -> str:
    """The view a workflow opens in: every task if small, groups, else levels."""
    if len(tasks) <= FULL_LIMIT:
        return "tasks"
    if groups <= GROUP_LIMIT:
        return "groups"
    return "levels"


@dataclass
class LevelRow:
    """One level of a workflow: how many of its tasks are in each state."""

    level: int
    total: int
    counts: Counter[str]
    names: list[str]

    @property
    def done(self) -> int:
        return self.counts.get("succeeded", 0)

    @property
    def look(self) -> str:
        return combined(list(self.counts))


def level_rows(looks: Sequence[str], level: Sequence[int], names: Sequence[str]) -> list[LevelRow]:
    """Per level, counts of tasks by look and a few of their names."""
    rows: dict[int, LevelRow] = {}
    for i, lv in enumerate(level):
        row = rows.get(lv)
        if row is None:
            row = rows[lv] = LevelRow(lv, 0, Counter(), [])
        row.total += 1
        row.counts[looks[i]] += 1
        if len(row.names) < 4:
            row.names.append(names[i])
    return [rows[k] for k in sorted(rows)]
