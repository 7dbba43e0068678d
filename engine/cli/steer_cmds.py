"""``redisflow pause|release|cancel|retry``: one workflow, or many (see
:mod:`engine.cli.bulk_cmds`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from engine.core.words import plural

from .bulk_cmds import add_filter_options, run_bulk, wants_bulk
from .common import EXIT_OK, Parents, name_arg, print_json, resolve_key, workflow_id

if TYPE_CHECKING:
    from ..client import Engine


def _control(name: str) -> Any:
    def run(engine: Engine, args: argparse.Namespace) -> int:
        if wants_bulk(args) or not args.ids:
            return run_bulk(engine, args, name)
        args.wid = resolve_key(engine, args.ids[0])
        method = getattr(engine, name)
        result = method(args.wid, args.task) if name == "retry" else method(args.wid)
        if args.json:
            print_json({"id": args.wid, "op": name, "count": result})
        else:
            tasks = f" ({plural(result, 'task')})" if result else ""
            print(f"workflow {args.wid}: {name} done{tasks}")
        return EXIT_OK

    return run


def register(sub: Any, parents: Parents) -> None:
    """``pause``, ``release``, ``cancel`` and ``retry``."""
    for name, text in (
        ("pause", "hold a running workflow"),
        ("release", "resume a paused workflow"),
        ("cancel", "cancel a running or paused workflow"),
        ("retry", "run a failed workflow's failed tasks again"),
    ):
        p = sub.add_parser(name, parents=parents, help=text)
        p.add_argument(
            "ids", nargs="*", type=workflow_id, metavar="WID|key:KEY", help="one or several"
        )
        add_filter_options(p)
        if name == "retry":
            p.add_argument(
                "--task", action="append", type=name_arg, help="retry only this failed task"
            )
        p.set_defaults(run=_control(name))
