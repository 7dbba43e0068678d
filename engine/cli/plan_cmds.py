"""``redisflow plan`` (what would run if some tasks failed) and ``redisflow viz``
(a DAG as Mermaid or DOT), both before anything runs or of a stored workflow."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.core.rules import OUTCOMES, Plan, PlannedTask
from engine.ops import viz
from engine.spec.limits import DEFAULT_MAX_PAYLOAD, DEFAULT_MAX_TASKS

from ..errors import DefinitionError
from .common import (
    EXIT_OK,
    KEY_PREFIX,
    Parents,
    connect,
    esc,
    max_tasks,
    new_table,
    out,
    print_json,
    quoted,
    read_input,
    resolve_key,
    styled,
    workflow_id,
)

if TYPE_CHECKING:
    from ..client import Engine


def parse_assume(values: Sequence[str] | None) -> dict[str, str]:
    """``--assume extract=failed,load=succeeded`` (repeatable) as ``{task: outcome}``."""
    out: dict[str, str] = {}
    for value in values or ():
        for item in value.split(","):
            name, eq, outcome = item.strip().rpartition("=")
            if not eq or not name:
                raise DefinitionError(
                    f"--assume {quoted(item)}: give TASK=OUTCOME (outcome: {', '.join(OUTCOMES)})"
                )
            out[name.strip()] = outcome.strip()
    return out


def parse_outputs(values: Sequence[str] | None) -> dict[str, Any]:
    """``--output check='{"status":"ok"}'`` (repeatable) as ``{task: output}``: the
    outputs ``redisflow plan`` decides conditions (``when``) with."""
    out: dict[str, Any] = {}
    for value in values or ():
        name, eq, text = value.partition("=")
        if not eq or not name.strip():
            raise DefinitionError(f"--output {quoted(value)}: give TASK=JSON")
        try:
            out[name.strip()] = json.loads(text)
        except ValueError as e:
            raise DefinitionError(f"--output {quoted(value)}: not JSON ({e})") from None
    return out


def _plans(args: argparse.Namespace) -> list[Plan]:
    """A plan of every workflow in ``args.file``, each with the assumptions naming its
    tasks; an assumption that names no task of any of them is bad input."""
    from engine.spec.conditions import NOT_GIVEN
    from engine.spec.definition import plan as plan_workflow
    from engine.spec.loader import load_file

    workflows = load_file(args.file, args.max_tasks)
    assume = parse_assume(args.assume)
    known = {t.name for wf in workflows for t in wf.tasks}
    for name in assume:
        if name not in known:
            raise DefinitionError(f"--assume: {args.file} has no task {name!r}")
    outputs = parse_outputs(args.output)
    for name in outputs:
        if name not in known:
            raise DefinitionError(f"--output: {args.file} has no task {name!r}")
    given = NOT_GIVEN if args.input is None else read_input(args.input, DEFAULT_MAX_PAYLOAD)
    plans = []
    for wf in workflows:
        own = {t.name for t in wf.tasks}
        plans.append(
            plan_workflow(
                wf,
                {n: o for n, o in assume.items() if n in own},
                {n: o for n, o in outputs.items() if n in own},
                given,
            )
        )
    return plans


def _planned(t: PlannedTask) -> str:
    if not t.runs:
        return styled(t.state)
    how = " (assumed)" if t.assumed else ""
    return f"runs → {styled(t.state)}{how}"


def cmd_plan(_: Engine | None, args: argparse.Namespace) -> int:
    """``redisflow plan FILE --assume T=failed``: what would run, before anything runs."""
    plans = _plans(args)
    if args.json:
        print_json([p.to_dict() for p in plans] if len(plans) > 1 else plans[0].to_dict())
        return EXIT_OK
    for p in plans:
        table = new_table("task", "trigger", "after", "plan", "why", overflow="fold")
        for col in table.columns[:-1]:
            col.no_wrap = True
        for t in p.tasks:
            table.add_row(
                esc(t.name),
                esc(t.rule),
                esc(",".join(t.parents)) or "-",
                _planned(t),
                f"[dim]{esc(t.why)}[/]",
            )
        out.print(f"[bold]plan of {esc(p.workflow)}[/]")
        out.print_table(table)
        line = f"workflow {esc(p.workflow)}: {styled(p.state)}"
        handled = [
            t.name
            for t in p.tasks
            if t.state == "failed" and t.rule != "finally" and t.name not in p.unhandled
        ]
        if p.unhandled:
            line += f" (failures that fail it: {esc(', '.join(p.unhandled))})"
        elif handled:
            line += f" (failures handled by a failure branch: {esc(', '.join(handled))})"
        out.print(line)
        if p.ignored:
            out.print(f"[dim]not run, so not assumed: {esc(', '.join(p.ignored))}[/]")
    for note in _join_traps(args):
        out.print(f"[yellow]note: {esc(note)}[/]")
    return EXIT_OK


def _join_traps(args: argparse.Namespace) -> list[str]:
    """Joins after a conditional branch that keep all_success (see engine.spec.conditions)."""
    from engine.spec.conditions import join_traps
    from engine.spec.definition import resolve, validate
    from engine.spec.loader import load_file

    notes = []
    for wf in load_file(args.file, args.max_tasks):
        if any(t.when is not None for t in wf.tasks):
            validate(wf)  # adds the edges `before` stands for
            parents, rules = resolve(wf)
            notes += join_traps(wf.tasks, parents, rules)
    return notes


def _viz_graph(
    args: argparse.Namespace,
) -> tuple[str, list[viz.Node], list[list[int]]]:
    """The graph ``redisflow viz`` draws: a file's workflow (coloured by a plan when
    given --assume) or a stored workflow with its tasks' states."""
    from engine.spec.definition import plan as plan_workflow
    from engine.spec.definition import resolve, validate
    from engine.spec.loader import load_file

    target = args.target
    if not Path(target).exists() and (
        target.isascii() and target.isdigit() or target.startswith(KEY_PREFIX)
    ):
        engine = connect(args)
        try:
            st = engine.status(resolve_key(engine, workflow_id(target)))
        finally:
            engine.close()
        index = {t.name: t.index for t in st.tasks}
        nodes = [viz.Node(t.name, t.trigger, t.state.value) for t in st.tasks]
        return f"{st.name} #{st.id}", nodes, [[index[p] for p in t.parents] for t in st.tasks]
    workflows = load_file(target, args.max_tasks)
    if len(workflows) > 1 and args.workflow is None:
        names = ", ".join(wf.name for wf in workflows)
        raise DefinitionError(
            f"{target} holds {len(workflows)} workflows ({names}): give --workflow"
        )
    chosen = [wf for wf in workflows if args.workflow in (None, wf.name)]
    if not chosen:
        raise DefinitionError(f"{target} has no workflow named {args.workflow!r}")
    wf = chosen[0]
    validate(wf, args.max_payload, args.max_tasks)
    parents, rules = resolve(wf)
    index = {t.name: i for i, t in enumerate(wf.tasks)}
    states: list[str | None] = [None] * len(wf.tasks)
    if args.assume is not None:
        planned = plan_workflow(wf, parse_assume(args.assume))
        states = [t.state for t in planned.tasks]
    nodes = [viz.Node(t.name, r, s) for t, r, s in zip(wf.tasks, rules, states, strict=True)]
    return wf.name, nodes, [[index[p] for p in ps] for ps in parents]


def cmd_viz(_: Engine | None, args: argparse.Namespace) -> int:
    """``redisflow viz FILE|WID --format mermaid|dot``."""
    title, nodes, parents = _viz_graph(args)
    sys.stdout.write(viz.render(args.format, title, nodes, parents))
    return EXIT_OK


def register(sub: Any, parents: Parents) -> None:
    """``plan`` and ``viz``."""
    p = sub.add_parser(
        "plan",
        parents=[parents.js],
        help="what would run if some tasks failed: before anything runs",
        description="Print, for a workflow file, which tasks would run, be skipped or "
        "upstream_failed, and the workflow's result, if the tasks named in --assume ended "
        "so and every other task that runs succeeded. Nothing is pushed.",
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument(
        "--assume",
        action="append",
        metavar="TASK=OUTCOME,...",
        help=f"how tasks end: {', '.join(OUTCOMES)} (repeatable; default: succeeded)",
    )
    p.add_argument(
        "--output",
        action="append",
        metavar="TASK=JSON",
        help="a task's assumed output, for the conditions (when:) that read it (repeatable)",
    )
    p.add_argument(
        "--input",
        metavar="JSON|@FILE",
        help="the run's assumed input, for the conditions (when:) that read it",
    )
    p.add_argument("--max-tasks", type=max_tasks, default=DEFAULT_MAX_TASKS, metavar="N")
    p.set_defaults(run=cmd_plan, no_engine=True)

    p = sub.add_parser(
        "viz",
        parents=parents,
        help="a workflow's DAG as Mermaid or Graphviz DOT",
        description="Print the DAG of a workflow file, or of a stored workflow (WID) with "
        "its tasks' states as colours. Failure branches are dashed red, tasks that run "
        "whatever happened dotted grey.",
    )
    p.add_argument("target", metavar="FILE|WID")
    p.add_argument("--format", choices=viz.FORMATS, default="mermaid")
    p.add_argument("--workflow", metavar="NAME", help="which workflow of a file of several")
    p.add_argument(
        "--assume",
        action="append",
        metavar="TASK=OUTCOME,...",
        help="a file: colour it by the plan for these outcomes (see plan)",
    )
    p.add_argument("--max-tasks", type=max_tasks, default=DEFAULT_MAX_TASKS, metavar="N")
    p.set_defaults(run=cmd_viz, no_engine=True)
