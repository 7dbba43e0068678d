"""``redisflow logs WID`` (what tasks' handlers wrote, ``--follow`` live) and
``redisflow stats --by type|template`` (run-time history)."""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import TYPE_CHECKING, Any

from .common import (
    EXIT_OK,
    Parents,
    esc,
    name_arg,
    new_table,
    out,
    positive_int,
    print_json,
    workflow_id,
)

if TYPE_CHECKING:
    from engine.runtime.tasklogs import LogLine

    from ..client import Engine


def _line(x: LogLine, many_tasks: bool) -> str:
    stamp = time.strftime("%H:%M:%S", time.localtime(x.ts)) + f".{int(x.ts * 1000) % 1000:03d}"
    who = f"{x.task}#{x.attempt}" if x.key.count(".") == 0 else f"{x.task}[{x.key}]#{x.attempt}"
    err = " !" if x.source == "stderr" else ""
    return f"{stamp} {who}{err} {x.text}" if many_tasks else f"{stamp} #{x.attempt}{err} {x.text}"


def cmd_logs(engine: Engine, args: argparse.Namespace) -> int:
    from engine.runtime.tasklogs import follow_logs, read_logs

    many = args.task is None
    if args.follow:
        for x in follow_logs(engine, args.wid, args.task):
            if args.json:
                print_json(x.to_dict())
            else:
                print(_line(x, many))
            sys.stdout.flush()
        return EXIT_OK
    lines, cursor = read_logs(engine, args.wid, args.task, limit=args.limit)
    if args.json:
        print_json({"lines": [x.to_dict() for x in lines], "cursor": cursor})
        return EXIT_OK
    for x in lines:
        print(_line(x, many))
    return EXIT_OK


def progress_text(p: dict[str, Any]) -> str:
    """``40% rows 4,000/10,000``: a task's progress as ``status`` shows it."""
    f = p.get("fraction")
    pct = f"{f * 100:.0f}%" if isinstance(f, int | float) else "?"
    return f"{pct} {p.get('message') or ''}".strip()


def running_progress(engine: Engine, wid: str) -> dict[str, dict[str, Any]]:
    """The progress of workflow ``wid``'s tasks (empty when none said any)."""
    from engine.runtime.tasklogs import read_progress

    return read_progress(engine, wid)


def _secs(v: float | None) -> str:
    if v is None:
        return "-"
    if math.isinf(v):
        return ">1h"
    return f"{v * 1000:.0f}ms" if v < 1 else f"{v:g}s"


def cmd_history(engine: Engine, args: argparse.Namespace) -> int:
    from engine.runtime.rollups import history, sparkline

    h = history(engine, args.by)
    if args.json:
        print_json(
            {
                "by": args.by,
                "hour": [s.to_dict() for s in h["hour"].values()],
                "day": [{**s.to_dict(), "hourly": s.hourly} for s in h["day"].values()],
            }
        )
        return EXIT_OK
    table = new_table(args.by, "hour ok", "hour failed", "p50", "p90", "p99", "day ok",
                      "day failed", "day p50", "day p99", "last 24h")  # fmt: skip
    for name in sorted(h["day"]):
        d = h["day"][name]
        hr = h["hour"].get(name)
        table.add_row(
            esc(name) or "-",
            f"{hr.succeeded:,}" if hr else "0",
            f"{hr.failed:,}" if hr else "0",
            _secs(hr.quantile(0.5) if hr else None),
            _secs(hr.quantile(0.9) if hr else None),
            _secs(hr.quantile(0.99) if hr else None),
            f"{d.succeeded:,}",
            f"{d.failed:,}",
            _secs(d.quantile(0.5)),
            _secs(d.quantile(0.99)),
            sparkline(d.hourly),
        )
    out.print_table(table)
    if not h["day"]:
        out.print(f"[dim]no {args.by} has run times in the last day[/]")
    return EXIT_OK


def register(sub: Any, parents: Parents) -> None:
    """Add ``logs`` to the ``redisflow`` parser."""
    p = sub.add_parser(
        "logs",
        parents=parents,
        help="what a workflow's tasks wrote (logging, print, --exec stderr)",
        description="Print the lines a workflow's task handlers wrote, per attempt: Python "
        "logging records, print and stdout/stderr, an --exec command's stderr. --follow "
        "prints new lines as they come until the workflow has finished.",
    )
    p.add_argument("wid", type=workflow_id, metavar="WID|key:KEY")
    p.add_argument("--task", type=name_arg, help="one task's lines (a map: its items' too)")
    p.add_argument("--follow", "-f", action="store_true", help="print new lines as they come")
    p.add_argument("--limit", type=positive_int, default=1000, help="at most this many flushes")
    p.set_defaults(run=cmd_logs)
