"""``redisflow expire``: a workflow's own retention."""

from __future__ import annotations

import argparse
import math
import time
from typing import TYPE_CHECKING, Any

from engine.core import timing
from engine.spec.limits import MAX_TTL

from ..errors import DefinitionError
from .common import EXIT_OK, Parents, print_json, quoted, span, workflow_id

if TYPE_CHECKING:
    from ..client import Engine


def _retention(text: str) -> float | None:
    """``expire``'s retention: a duration, or ``never`` (None)."""
    if text == "never":
        return None
    try:
        seconds = timing.parse_duration(text)
    except timing.TooLong:
        seconds = math.inf
    except DefinitionError:
        raise argparse.ArgumentTypeError(
            f"not a duration or 'never': {quoted(text)} (e.g. 12h, 7d, 2w, never)"
        ) from None
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"a retention must be above 0, not {quoted(text)}")
    if seconds > MAX_TTL:
        raise argparse.ArgumentTypeError(
            f"{quoted(text)} is too long: a retention is at most {MAX_TTL / 86400:.0f}d (or never)"
        )
    return seconds


def cmd_expire(engine: Engine, args: argparse.Namespace) -> int:
    due = engine.expire(args.wid, args.ttl)
    if args.json:
        print_json({"id": args.wid, "ttl": args.ttl, "expires_at": due})
    elif args.ttl is None:
        print(f"workflow {args.wid}: kept until cleaned up by hand")
    elif due is None:
        print(f"workflow {args.wid}: kept {span(args.ttl)} once it ends")
    else:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(due))
        print(f"workflow {args.wid}: kept until {when} ({span(args.ttl)})")
    return EXIT_OK


def register(sub: Any, parents: Parents) -> None:
    """``expire``."""
    p = sub.add_parser(
        "expire",
        parents=parents,
        help="change how long a workflow is kept once finished (7d), or never clean it (never)",
        description="Set a workflow's own retention. A finished workflow is kept that long "
        "from now; one not finished yet keeps it for when it ends. 'never' keeps it until "
        "it is cleaned up by hand (the deployment's retention steps over it).",
    )
    p.add_argument("wid", type=workflow_id, metavar="WID|key:KEY")
    p.add_argument("ttl", type=_retention, metavar="DURATION|never")
    p.set_defaults(run=cmd_expire)
