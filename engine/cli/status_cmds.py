"""``redisflow status`` (one workflow and its tasks, or a page of a map's items) and
``redisflow list`` (workflows, page by page)."""

from __future__ import annotations

import argparse
import json
import time
from typing import TYPE_CHECKING, Any

from engine.core.model import TaskState, WorkflowState, WorkflowStatus
from engine.core.words import plural

from ..errors import DefinitionError, no_such_task
from . import log_cmds
from .common import (
    EXIT_OK,
    Parents,
    _ago_arg,
    ago,
    esc,
    name_arg,
    new_table,
    out,
    positive_int,
    print_json,
    span,
    styled,
    time_window,
    wide_table,
    workflow_id,
)

if TYPE_CHECKING:
    from ..client import Engine


def map_counts(items: dict[str, int]) -> str:
    """A map's items on one line: ``98,211 ✔ 12 ✖ 1,777 running/ready/waiting``."""
    active = items["running"] + items["ready"] + items["waiting"]
    parts = [f"{items['succeeded']:,} ✔", f"{items['failed']:,} ✖"]
    if active:
        parts.append(f"{active:,} running/ready/waiting")
    if items["cancelled"]:
        parts.append(f"{items['cancelled']:,} cancelled")
    total = items.get("total")
    parts.append("(expanding)" if total is None else f"of {total:,}")
    return " ".join(parts)


def _took(started: float | None, finished: float | None) -> str:
    if started is None or finished is None:
        return "-"
    return f"{finished - started:.3f}s"


def _detail(output: Any, error: str | None) -> str:
    """The output / error cell: the error's last line in red, or the output as JSON."""
    if error:
        return f"[red]{esc((error.strip().splitlines() or [''])[-1][:300])}[/]"
    shown = "" if output is None else json.dumps(output, separators=(",", ":"))
    return esc(shown[:300])


def _steps_line(steps: dict[str, TaskState] | None) -> str:
    """An item's steps and their states, for a map whose items run several steps."""
    if not steps:
        return ""
    return "\n[dim]steps[/] " + "  ".join(f"{esc(n)} {styled(s.value)}" for n, s in steps.items())


def cmd_items(engine: Engine, args: argparse.Namespace) -> int:
    """``status WID --task MAP``: a page of a map's items."""
    st = engine.status(args.wid)
    task = next((t for t in st.tasks if t.name == args.task), None)
    if task is None:
        raise no_such_task(args.wid, args.task, [t.name for t in st.tasks])
    if task.items is None:
        raise DefinitionError(f"task {args.task!r} of workflow {args.wid} is not a map")
    state = "failed" if args.failed else None
    offset = (args.page - 1) * args.limit
    rows = engine.items(args.wid, args.task, offset, args.limit, state)
    total = task.items["failed"] if args.failed else task.items.get("total")
    if total is None:  # still expanding: what is stored so far
        total = sum(n for k, n in task.items.items() if k != "total")
    if args.json:
        print_json(
            {
                "id": args.wid,
                "task": args.task,
                "page": args.page,
                "total": total,
                "counts": task.items,
                "items": [r.to_dict() for r in rows],
            }
        )
        return EXIT_OK
    out.print(f"[bold]{esc(task.name)}[/] of workflow {args.wid}  {map_counts(task.items)}")
    table = wide_table("item", "state", "attempts", "agent", "took", "element", "output / error")
    for r in rows:
        element = "" if r.element is None else json.dumps(r.element, separators=(",", ":"))
        table.add_row(
            str(r.index),
            styled(r.state.value),
            f"{r.attempts}" + (f" ({r.failures} failed)" if r.failures else ""),
            esc(r.agent) if r.agent else "-",
            _took(r.started_at, r.finished_at),
            esc(element[:60]) or "-",
            _detail(r.output, r.error) + _steps_line(r.steps),
        )
    out.print_table(table)
    pages = max(1, -(-total // args.limit))
    which = "failed items" if args.failed else "items"
    out.print(f"[dim]page {args.page} of {pages} ({total:,} {which})[/]")
    return EXIT_OK


def _unserved(engine: Engine, st: WorkflowStatus) -> dict[str, list[str]]:
    """Ready tasks of ``st`` no live agent serves, by type (agents read only when some
    task is ready)."""
    from engine.core.unserved import unserved

    if not any(t.state == TaskState.READY for t in st.tasks):
        return {}
    return unserved(st, engine.agents())


def cmd_status(engine: Engine, args: argparse.Namespace) -> int:
    from engine.spec.wait_tasks import wait_line

    if args.task is not None:
        return cmd_items(engine, args)
    if args.failed or args.page != 1:
        raise DefinitionError("--page and --failed page a map's items: give --task too")
    st = engine.status(args.wid)
    found = _unserved(engine, st)
    progress = {} if st.state.finished else log_cmds.running_progress(engine, st.id)
    if args.json:
        print_json(
            {**st.to_dict(), "unserved": found, **({"progress": progress} if progress else {})}
        )
        return EXIT_OK
    now = engine.server_time()
    upstream = f", {st.upstream_failed} upstream_failed" if st.upstream_failed else ""
    out.print(
        f"[bold]workflow {st.id}[/] {esc(st.name)}  {styled(st.state.value)}"
        + (f" ({esc(st.reason)})" if st.reason else "")
        + f"  {st.succeeded}/{st.total} succeeded, {st.failed} failed{upstream}, "
        f"{st.skipped} skipped  created {ago(st.created_at, now)}"
        + (f", finished {ago(st.finished_at, now)}" if st.finished_at else "")
    )
    out.print("  ".join(f"{k} {v}" for k, v in st.counts.items() if v))
    if st.parent is not None:
        pwid, pidx, _ = st.parent.rsplit(":", 2)
        out.print(f"child run of workflow {pwid} (its task #{pidx}), depth {st.depth}")
    if found:
        from engine.core.unserved import unserved_line

        out.print(f"[yellow]{esc(unserved_line(found))}[/]")
    if st.start_at is not None:
        left = st.start_at - time.time()
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(st.start_at))
        out.print(f"starts {when} (in {span(max(0.0, left))})")
    if st.deadline is not None and not st.state.finished:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(st.deadline))
        out.print(f"deadline {when} (in {span(max(0.0, st.deadline - time.time()))})")
    if st.failed:
        unhandled, handled = st.failures()
        if handled:
            out.print(f"failures handled by a failure branch: {esc(', '.join(handled))}")
        if unhandled and st.state.finished:
            out.print(f"failures that fail it: {esc(', '.join(unhandled))}")
    if st.input is not None:
        shown = json.dumps(st.input, separators=(",", ":"), ensure_ascii=False)
        out.print("input " + shown[:300].replace("[", r"\["))
    ruled = any(t.trigger != "all_success" for t in st.tasks)
    columns = ["task", "type", "state", "attempts", "agent", "took", "after", "output / error"]
    if ruled:
        columns.insert(6, "trigger")
    table = wide_table(*columns)
    for t in st.tasks:
        detail = _detail(t.output, t.error)
        if t.items is not None:  # a map: its items' counts, then its error (if any)
            detail = map_counts(t.items) + (f"  {detail}" if t.error else "")
        elif t.skip_reason and t.state == "skipped":  # its condition, or its handler
            detail = f"[dim]{esc(t.skip_reason[:300])}[/]"
        elif t.wait is not None and (line := wait_line(t.wait, t.signal, t.state, t.started_at)):
            if t.child and t.state in ("ready", "suspended"):
                line += f" (run {t.child})"
            detail = esc(line) if not t.error else f"{detail}  [dim]{esc(line)}[/]"
        elif t.state in ("waiting", "skipped", "upstream_failed") and t.parents:
            detail = f"[dim]{esc(st.why(t))}[/]"
        elif t.throttled_until is not None:
            when = time.strftime("%H:%M:%S", time.localtime(t.throttled_until))
            detail = f"[yellow]throttled, next at {when}{f'{t.throttled_until % 1:.3f}'[1:]}[/]"
        elif t.state == "running" and str(t.index) in progress:
            detail = esc(log_cmds.progress_text(progress[str(t.index)]))
        row = [
            esc(t.name),
            esc(t.type) or "-",
            styled(t.state.value),
            f"{t.attempts}" + (f" ({t.failures} failed)" if t.failures else ""),
            esc(t.agent) if t.agent else "-",
            _took(t.started_at, t.finished_at),
            esc(",".join(t.parents)) or "-",
            detail,
        ]
        if ruled:
            row.insert(6, esc(t.trigger))
        table.add_row(*row)
    out.print_table(table)
    return EXIT_OK


def cmd_list(engine: Engine, args: argparse.Namespace) -> int:
    offset = (args.page - 1) * args.limit
    now = engine.server_time()
    after, before = time_window(now, args)
    rows = engine.list(
        args.state,
        args.name,
        offset=offset,
        limit=args.limit,
        template=args.template,
        oldest_first=args.oldest,
        created_after=after,
        created_before=before,
    )
    total = engine.count(args.state, args.name, args.template, after, before)
    if args.json:
        print_json({"page": args.page, "total": total, "workflows": [r.to_dict() for r in rows]})
        return EXIT_OK
    table = new_table("id", "name", "state", "done", "failed", "created", "finished")
    for r in rows:
        table.add_row(
            r.id,
            esc(r.name),
            styled(r.state.value),
            f"{r.succeeded}/{r.total}",
            str(r.failed),
            ago(r.created_at, now),
            ago(r.finished_at, now),
        )
    out.print_table(table)
    pages = max(1, -(-total // args.limit))
    out.print(f"[dim]page {args.page} of {pages} ({plural(total, 'workflow')})[/]")
    return EXIT_OK


def register(sub: Any, parents: Parents) -> None:
    """``status`` and ``list``."""
    p = sub.add_parser("status", parents=parents, help="one workflow and its tasks")
    p.add_argument("wid", type=workflow_id, metavar="WID|key:KEY")
    p.add_argument("--task", type=name_arg, help="a map: page its items")
    p.add_argument("--page", type=positive_int, default=1, help="with --task: which page")
    p.add_argument("--limit", type=positive_int, default=50, help="with --task: items a page")
    p.add_argument("--failed", action="store_true", help="with --task: failed items only")
    p.set_defaults(run=cmd_status)

    p = sub.add_parser("list", parents=parents, help="workflows, newest first, page by page")
    p.add_argument("--state", choices=[s.value for s in WorkflowState])
    p.add_argument("--name", type=name_arg)
    p.add_argument("--template", type=name_arg, help="runs of this template only")
    p.add_argument("--oldest", action="store_true", help="oldest first")
    p.add_argument(
        "--since",
        type=_ago_arg,
        metavar="DURATION|TIME",
        help="created at most this long ago (2h) or at/after TIME (2026-12-01T06:00)",
    )
    p.add_argument(
        "--until",
        type=_ago_arg,
        metavar="DURATION|TIME",
        help="created more than this long ago (30m) or before TIME",
    )
    p.add_argument("--page", type=positive_int, default=1)
    p.add_argument("--limit", type=positive_int, default=50)
    p.set_defaults(run=cmd_list)
