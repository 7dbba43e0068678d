"""``redisflow rate-limit put|list|delete``: the deployment's rate limits by task type
(:mod:`engine.spec.rate_limits`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .common import EXIT_OK, Parents, esc, new_table, out, print_json

if TYPE_CHECKING:
    from ..client import Engine


def cmd_rate_limit_put(engine: Engine, args: argparse.Namespace) -> int:
    r = engine.put_rate_limit(
        args.type, key=args.key, limit=args.limit, per=args.per, burst=args.burst
    )
    if args.json:
        print_json({"type": args.type, **r.as_dict()})
    else:
        print(
            f"rate limit of type {args.type or '(default)'}: {r.limit} per {r.per} per "
            f"{r.key}, burst {r.burst} (runs pushed from now on)"
        )
    return EXIT_OK


def cmd_rate_limit_list(engine: Engine, args: argparse.Namespace) -> int:
    limits = engine.rate_limits()
    if args.json:
        print_json({"rate_limits": {t: r.as_dict() for t, r in limits.items()}})
        return EXIT_OK
    table = new_table("type", "key", "limit", "per", "burst")
    for typ, r in limits.items():
        table.add_row(esc(typ) or "-", esc(r.key), str(r.limit), r.per, str(r.burst))
    out.print_table(table)
    out.print(f"[dim]{len(limits)} rate limits[/]")
    return EXIT_OK


def cmd_rate_limit_delete(engine: Engine, args: argparse.Namespace) -> int:
    engine.delete_rate_limit(args.type)
    if args.json:
        print_json({"deleted": args.type})
    else:
        print(f"rate limit of type {args.type or '(default)'}: deleted (runs pushed keep theirs)")
    return EXIT_OK


def _int(text: str) -> int:
    """A whole number as typed; the range is checked with the rest (one clear line)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def register(sub: Any, parents: Parents) -> None:
    """Add ``rate-limit`` to the ``redisflow`` parser."""
    p = sub.add_parser("rate-limit", help="the deployment's rate limits by task type")
    rs = p.add_subparsers(dest="rate_limit_command", required=True, metavar="ACTION")
    q = rs.add_parser(
        "put",
        parents=parents,
        help="limit how fast tasks of a type start, per key (runs pushed from now on)",
    )
    q.add_argument("type", metavar="TYPE", help='the task type ("" for the default type)')
    q.add_argument(
        "--key",
        required=True,
        help="input.<field>, payload.<field> (dotted) or a constant: one bucket per value",
    )
    q.add_argument("--limit", type=_int, required=True, help="starts per period, per key")
    q.add_argument("--per", default="1s", help="the period: 1s, 1m, 1h... (default: 1s)")
    q.add_argument("--burst", type=_int, default=1, help="starts at once after a quiet spell")
    q.set_defaults(run=cmd_rate_limit_put, writes=True)
    q = rs.add_parser("list", parents=parents, help="the rate limits by task type")
    q.set_defaults(run=cmd_rate_limit_list)
    q = rs.add_parser("delete", parents=parents, help="remove a type's rate limit")
    q.add_argument("type", metavar="TYPE")
    q.set_defaults(run=cmd_rate_limit_delete, writes=True)
