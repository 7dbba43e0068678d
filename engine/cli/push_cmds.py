"""``redisflow push``: workflow files checked and compiled before connecting, then
pushed (``--copies``, ``--key``, ``--at``/``--in``) and, with ``--wait``, waited for."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from engine.spec.limits import DEFAULT_MAX_TASKS

from ..errors import DefinitionError, PartialWriteError
from .common import (
    Parents,
    add_wait_options,
    max_tasks,
    parse_duration,
    parse_time,
    positive_int,
    pushed_part,
    read_input,
    report_pushed,
)

if TYPE_CHECKING:
    from ..client import Engine


def prepare(args: argparse.Namespace) -> None:
    """Parse, validate and compile every file once, before connecting, so bad input
    touches nothing."""
    from engine.spec.loader import load_file

    from ..store.codec import compile_workflow

    args.workflows = [wf for path in args.files for wf in load_file(path, args.max_tasks)]
    args.compiled = [
        compile_workflow(wf, args.max_payload, args.max_tasks) for wf in args.workflows
    ]
    args.input = read_input(args.input, args.max_payload)


def cmd_push(engine: Engine, args: argparse.Namespace) -> int:
    # compiled once, before connecting (see prepare)
    from engine.spec.rate_limits import task_types

    from ..store.codec import compile_workflow

    workflows = args.workflows
    if limits := engine.store.rate_limits.of_types(t for wf in workflows for t in task_types(wf)):
        # the deployment's rate limits by type (engine.put_rate_limit) apply too
        args.compiled = [
            compile_workflow(wf, args.max_payload, args.max_tasks, type_limits=limits)
            for wf in workflows
        ]
    runs = [c for c in args.compiled for _ in range(args.copies)]
    if args.key is not None:
        if len(runs) != 1:
            raise DefinitionError(
                f"--key names one run: push one workflow without --copies, not {len(runs)}"
            )
        ids = [
            engine.push(
                runs[0], args.input, key=args.key, start_in=args.start_in, start_at=args.start_at
            )
        ]
    else:
        try:
            ids = engine.push_many(
                runs,
                None if args.input is None else [args.input] * len(runs),
                start_in=args.start_in,
                start_at=args.start_at,
            )
        except PartialWriteError as e:
            return pushed_part(e, args)
    return report_pushed(engine, ids, args)


def register(sub: Any, parents: Parents) -> None:
    """``push``."""
    p = sub.add_parser("push", parents=parents, help="push workflow files (YAML or JSON)")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument(
        "--copies",
        type=positive_int,
        default=1,
        metavar="N",
        help="push each workflow N times (they share one stored definition)",
    )
    p.add_argument(
        "--input",
        metavar="JSON|@FILE",
        help="the run's input, any JSON value (or @file.json): every task sees it as task.input",
    )
    later = p.add_mutually_exclusive_group()
    later.add_argument(
        "--at",
        dest="start_at",
        type=parse_time,
        metavar="TIME",
        help="start at TIME (2026-12-01T06:00[+01:00], or 06:00: the next one); scheduled "
        "till then, cancellable, `release` starts it at once",
    )
    later.add_argument(
        "--in",
        dest="start_in",
        type=parse_duration,
        metavar="DURATION",
        help="start this long from now (10m, 1h30m, 2d)",
    )
    p.add_argument(
        "--key",
        metavar="KEY",
        help="idempotency key: while a workflow pushed with KEY exists, pushing again "
        "prints its id and pushes nothing",
    )
    add_wait_options(p)
    p.add_argument(
        "--max-tasks",
        type=max_tasks,
        default=DEFAULT_MAX_TASKS,
        metavar="N",
        help=f"refuse a workflow of more than N tasks (default and most: {DEFAULT_MAX_TASKS:,})",
    )
    p.set_defaults(run=cmd_push, writes=True, prepare=prepare)
