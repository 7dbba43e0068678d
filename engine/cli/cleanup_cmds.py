"""``redisflow cleanup``: delete finished workflows, one, many or all."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ..errors import DefinitionError
from .bulk_cmds import add_filter_options, has_filter, run_bulk, wants_bulk
from .common import (
    EXIT_FAILED,
    EXIT_OK,
    Parents,
    age,
    print_json,
    resolve_key,
    span,
    workflow_id,
)

if TYPE_CHECKING:
    from ..client import Engine


def confirm_cleanup(engine: Engine, args: argparse.Namespace) -> bool:
    """Ask on the terminal before ``cleanup --finished`` deletes, saying how many."""
    n = engine.count_finished(args.older_than or 0.0)
    if n == 0:
        return True  # nothing to delete: nothing to ask
    when = f" that finished more than {span(args.older_than)} ago" if args.older_than else ""
    sys.stderr.write(f"delete {n:,} finished workflows{when}? [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def cmd_cleanup(engine: Engine, args: argparse.Namespace) -> int:
    if args.finished and (args.ids or has_filter(args)):
        raise DefinitionError("cleanup --finished takes no workflow ids and no filter")
    if not args.finished and wants_bulk(args):
        return run_bulk(engine, args, "cleanup")
    args.wid = resolve_key(engine, args.ids[0]) if args.ids else None
    if args.finished:
        if not args.yes and sys.stdin.isatty() and not confirm_cleanup(engine, args):
            print("nothing deleted", file=sys.stderr)
            return EXIT_FAILED
        n = engine.cleanup_finished(args.older_than or 0.0)
        if args.json:
            print_json({"cleaned": n})
        else:
            print(f"cleaned up {n} finished workflows")
        return EXIT_OK
    if args.wid is None:
        raise DefinitionError("cleanup needs a workflow id or --finished")
    engine.cleanup(args.wid)
    if args.json:
        print_json({"cleaned": 1, "id": args.wid})
    else:
        print(f"workflow {args.wid}: cleaned up")
    return EXIT_OK


def register(sub: Any, parents: Parents) -> None:
    """``cleanup``."""
    p = sub.add_parser("cleanup", parents=parents, help="delete finished workflows")
    p.add_argument("ids", nargs="*", type=workflow_id, metavar="WID|key:KEY", help="one or several")
    p.add_argument("--finished", action="store_true", help="every finished workflow")
    p.add_argument("--older-than", type=age, help="with --finished: e.g. 7d")
    add_filter_options(p)
    p.set_defaults(run=cmd_cleanup)
