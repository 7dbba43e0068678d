"""``redisflow stats`` (totals by state, or run-time history) and ``redisflow events``."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from engine.core.text_safety import visible
from engine.core.words import plural

from . import log_cmds
from .common import EXIT_OK, Parents, out, positive_int, print_json, styled, type_label

if TYPE_CHECKING:
    from ..client import Engine


def cmd_stats(engine: Engine, args: argparse.Namespace) -> int:
    if args.by:
        return log_cmds.cmd_history(engine, args)
    s = engine.stats()
    if args.json:
        print_json(s.to_dict())
        return EXIT_OK
    out.print("workflows  " + "  ".join(f"{styled(k)} {v}" for k, v in s.workflows.items()))
    out.print("tasks      " + "  ".join(f"{styled(k)} {v}" for k, v in s.tasks.items()))
    out.print(
        f"pushed     {plural(s.workflows_pushed, 'workflow')}, {plural(s.tasks_pushed, 'task')}"
    )
    if s.queued:
        out.print("queued     " + "  ".join(f"{type_label(t)} {n}" for t, n in s.queued.items()))
    backlog = plural(s.retention_backlog, "finished workflow")
    out.print(f"retention  {backlog} past it, not removed yet")
    return EXIT_OK


def cmd_events(engine: Engine, args: argparse.Namespace) -> int:
    events = engine.events(args.count)
    if args.json:
        print_json([e.to_dict() for e in events])
        return EXIT_OK
    for e in reversed(events):
        stamp = time.strftime("%H:%M:%S", time.localtime(e.ts))
        task = "" if e.task is None else f" task {e.task_name or e.task}"
        extra = " ".join(f"{k}={v}" for k, v in e.data.items())
        # one line per event: a field's line breaks are shown, not obeyed
        print(visible(f"{stamp} {e.kind:<20} {e.wid}{task} {extra}".rstrip()))
    return EXIT_OK


def register(sub: Any, parents: Parents) -> None:
    """``stats`` and ``events``."""
    p = sub.add_parser("stats", parents=parents, help="totals by state; --by: run-time history")
    p.add_argument("--by", choices=["type", "template"], help="runs and run times, last hour/day")
    p.set_defaults(run=cmd_stats)

    p = sub.add_parser("events", parents=parents, help="recent lifecycle events")
    p.add_argument("--count", type=positive_int, default=50)
    p.set_defaults(run=cmd_events)
