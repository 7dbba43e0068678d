"""Steering many workflows in one command: ``redisflow cancel ID1 ID2 ...`` and
``redisflow retry --template T --state failed --since 1h`` (:mod:`engine.ops.bulk`).

Ids named one by one are acted on as given. A filter is resolved to ids first; on a
terminal the command then asks, saying how many, and without a terminal it needs
``--yes``. The answer names every workflow acted on and every one refused, with why.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from engine.core.model import WorkflowState
from engine.ops import bulk

from ..errors import DefinitionError
from .common import (
    EXIT_FAILED,
    EXIT_OK,
    KEY_PREFIX,
    _ago_arg,
    name_arg,
    print_json,
    time_window,
    whole_in,
)

if TYPE_CHECKING:
    from ..client import Engine

DONE = {
    "retry": ("retried", "tasks reset"),
    "cancel": ("cancelled", "tasks cancelled"),
    "pause": ("paused", "ready tasks held"),
    "release": ("released", "tasks back in the queues"),
    "cleanup": ("cleaned up", ""),
}


def add_filter_options(p: argparse.ArgumentParser) -> None:
    """The options that pick workflows by filter, as ``redisflow list`` takes them."""
    g = p.add_argument_group("many at once (the filters of redisflow list)")
    g.add_argument("--state", choices=[s.value for s in WorkflowState])
    g.add_argument("--name", type=name_arg)
    g.add_argument("--template", type=name_arg, help="runs of this template")
    g.add_argument("--since", type=_ago_arg, metavar="WHEN", help="created since, e.g. 1h")
    g.add_argument("--until", type=_ago_arg, metavar="WHEN", help="created before, e.g. 30m")
    g.add_argument(
        "--max",
        type=whole_in(1, bulk.MAX_SELECTED, "a count of workflows"),
        default=bulk.MAX_SELECTED,
        metavar="N",
        help=f"act on at most the newest N matches (1 to {bulk.MAX_SELECTED:,})",
    )
    g.add_argument(
        "--yes",
        action="store_true",
        help="with a filter (or cleanup --finished): do not ask; on a terminal it asks "
        "first, saying how many (a no does nothing, exit 1); with a filter and no "
        "terminal, --yes is required",
    )


def has_filter(args: argparse.Namespace) -> bool:
    """Whether a filter option was given."""
    return any(getattr(args, k, None) is not None for k in _FILTERS)


_FILTERS = ("state", "name", "template", "since", "until")


def wants_bulk(args: argparse.Namespace) -> bool:
    """Several ids or a filter: the bulk path (one id alone keeps the one-workflow
    answer)."""
    return len(args.ids) > 1 or has_filter(args)


def _filter(engine: Engine, args: argparse.Namespace) -> bulk.Filter:
    after, before = time_window(engine.server_time(), args)
    return bulk.Filter(args.state, args.name, args.template, after, before)


def _described(args: argparse.Namespace) -> str:
    parts = [f"{k} {getattr(args, k)}" for k in ("template", "name", "state") if getattr(args, k)]
    if args.since is not None:
        parts.append(f"created since {args.since.text}")
    if args.until is not None:
        parts.append(f"created before {args.until.text}")
    return ", ".join(parts)


def _confirm(action: str, chosen: bulk.Selection, args: argparse.Namespace) -> bool:
    """On a terminal, ask before acting, saying how many; without one, --yes or refuse."""
    n = len(chosen.ids)
    what = f"{n:,} workflows" if not chosen.more else f"the newest {n:,} of {chosen.matched:,}"
    question = f"{action} {what} ({_described(args)})?"
    if args.yes:
        return True
    if not sys.stdin.isatty():
        raise DefinitionError(
            f"{action}: {n:,} workflows match ({_described(args)}); stdin is not a terminal, "
            "so confirm with --yes"
        )
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def run_bulk(engine: Engine, args: argparse.Namespace, action: str) -> int:
    """The bulk path of a steering command (see the module doc)."""
    if args.ids and has_filter(args):
        raise DefinitionError(f"{action}: give workflow ids or a filter, not both")
    if not args.ids and not has_filter(args):
        raise DefinitionError(
            f"{action} needs workflow ids or a filter (--state, --name, --template, "
            "--since, --until)"
        )
    flt: bulk.Filter | None = None
    if args.ids:
        ids = [
            engine.id_for_key(w[len(KEY_PREFIX) :]) if w.startswith(KEY_PREFIX) else w
            for w in args.ids
        ]
        chosen = bulk.Selection(list(dict.fromkeys(ids)), len(set(ids)))
    else:
        flt = _filter(engine, args)
        chosen = bulk.select(engine, flt, args.max)
        if not chosen.ids:
            bulk.check_known(engine, flt)  # a template or name nothing has: exit 2
            return _answer(bulk.Report(action), chosen, flt, args)
        if not _confirm(action, chosen, args):
            print(f"nothing done: {action} not confirmed", file=sys.stderr)
            return EXIT_FAILED
    report = bulk.apply(engine, action, chosen.ids, getattr(args, "task", None))
    return _answer(report, chosen, flt, args)


def _answer(
    report: bulk.Report,
    chosen: bulk.Selection,
    flt: bulk.Filter | None,
    args: argparse.Namespace,
) -> int:
    code = EXIT_FAILED if report.refused else EXIT_OK
    if args.json:
        body = report.to_dict()
        body.update(matched=chosen.matched, selected=len(chosen.ids))
        if flt is not None:
            body["filter"] = {
                k: v
                for k, v in flt.to_dict().items()
                if k not in ("created_after", "created_before")
            }
            for k in ("since", "until"):
                if getattr(args, k) is not None:
                    body["filter"][k] = getattr(args, k).text
        print_json(body)
        return code
    done, unit = DONE[report.action]
    for wid, n in report.acted.items():
        print(f"workflow {wid}: {done}" + (f" ({n} {unit})" if n and unit else ""))
    for why in report.refused.values():
        print(f"refused: {why}", file=sys.stderr)
    if not chosen.ids:
        print(f"no workflow matches: nothing to {report.action}")
        return code
    print(
        f"{report.action}: {len(report.acted)} acted on, {len(report.refused)} refused "
        f"(of {len(chosen.ids)} selected)"
    )
    if chosen.more:
        print(
            f"{chosen.more:,} more match beyond --max {len(chosen.ids):,}: run it again",
            file=sys.stderr,
        )
    return code
