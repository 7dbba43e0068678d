"""A workflow's DAG as text for docs and chat: Mermaid or Graphviz DOT (``redisflow viz``).

Nodes carry their state's colour and glyph when there is a state (a stored workflow, or
a plan); edges into a task that exists for failures (``on_failure``, ``one_failed``,
``all_failed``) are drawn dashed and red, labelled ``on failure``; edges into a task
that runs whatever happened (``all_done``, ``finally``) dotted and grey, labelled
``done``; every other edge is a plain arrow.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from engine.core.appearance import LOOKS
from engine.core.rules import FINALLY, HANDLER_RULES

FORMATS = ("mermaid", "dot")
# fill, stroke (and text) per state, and its glyph: the states a graph colours
COLOURS = {s: look.graph for s, look in LOOKS.items() if look.graph is not None}
GLYPHS = {s: LOOKS[s].glyph for s in COLOURS}
FAILURE, DONE, PLAIN = "failure", "done", "plain"
EDGE_LABEL = {FAILURE: "on failure", DONE: "done"}


@dataclass
class Node:
    name: str
    rule: str
    state: str | None = None


def edge_kind(rule: str) -> str:
    """How an edge into a task with ``rule`` is drawn: failure branch, done, or plain."""
    if rule in HANDLER_RULES:
        return FAILURE
    if rule in ("all_done", FINALLY):
        return DONE
    return PLAIN


def _label(node: Node) -> str:
    glyph = GLYPHS.get(node.state or "", "")
    return f"{glyph} {node.name}" if glyph else node.name


def mermaid(title: str, nodes: Sequence[Node], parents: Sequence[Sequence[int]]) -> str:
    """A ``flowchart LR`` in Mermaid: ids ``t0``, ``t1``... and names as quoted labels."""
    lines = ["---", f"title: {json.dumps(title, ensure_ascii=False)}", "---", "flowchart LR"]
    for i, node in enumerate(nodes):
        text = _label(node).replace('"', "#quot;")
        shape = f'(["{text}"])' if node.rule == FINALLY else f'["{text}"]'
        lines.append(f"    t{i}{shape}")
    styles: list[str] = []
    link = 0
    for i, ups in enumerate(parents):
        kind = edge_kind(nodes[i].rule)
        for p in ups:
            if kind == PLAIN:
                lines.append(f"    t{p} --> t{i}")
            else:
                lines.append(f"    t{p} -. {EDGE_LABEL[kind]} .-> t{i}")
                colour = "#c62828" if kind == FAILURE else "#9e9e9e"
                styles.append(f"    linkStyle {link} stroke:{colour},color:{colour}")
            link += 1
    lines += styles
    used = sorted({n.state for n in nodes if n.state in COLOURS})
    for state in used:
        fill, stroke = COLOURS[state]
        lines.append(f"    classDef {state} fill:{fill},stroke:{stroke},color:{stroke}")
    for state in used:
        members = ",".join(f"t{i}" for i, n in enumerate(nodes) if n.state == state)
        lines.append(f"    class {members} {state}")
    return "\n".join(lines) + "\n"


def _dot_id(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def dot(title: str, nodes: Sequence[Node], parents: Sequence[Sequence[int]]) -> str:
    """A Graphviz ``digraph``, left to right."""
    lines = [
        f"digraph {_dot_id(title)} {{",
        "  rankdir=LR;",
        '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica"];',
        '  edge [fontname="Helvetica", fontsize=10];',
    ]
    for i, node in enumerate(nodes):
        attrs = [f"label={_dot_id(_label(node))}"]
        if node.state in COLOURS:
            fill, stroke = COLOURS[node.state]
            attrs += [f'fillcolor="{fill}"', f'color="{stroke}"', f'fontcolor="{stroke}"']
        if node.rule == FINALLY:
            attrs.append("peripheries=2")
        lines.append(f"  t{i} [{', '.join(attrs)}];")
    for i, ups in enumerate(parents):
        kind = edge_kind(nodes[i].rule)
        for p in ups:
            if kind == FAILURE:
                style = ' [style=dashed, color="#c62828", fontcolor="#c62828", label="on failure"]'
            elif kind == DONE:
                style = ' [style=dotted, color="#757575", fontcolor="#757575", label="done"]'
            else:
                style = ""
            lines.append(f"  t{p} -> t{i}{style};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(fmt: str, title: str, nodes: Sequence[Node], parents: Sequence[Sequence[int]]) -> str:
    """The graph in ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "dot":
        return dot(title, nodes, parents)
    return mermaid(title, nodes, parents)
