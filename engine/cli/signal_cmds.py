"""``redisflow signal``: a signal to a workflow, ending the wait task waiting for it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .common import EXIT_OK, Parents, print_json, read_input, workflow_id

if TYPE_CHECKING:
    from ..client import Engine


def cmd_signal(engine: Engine, args: argparse.Namespace) -> int:
    payload = read_input(args.data, engine.max_payload, "--data", "payload")
    done = engine.signal(
        args.wid, args.name, payload,
        signal_id=args.id, reject=args.reject, comment=args.comment, by=args.by,
    )  # fmt: skip
    if args.json:
        print_json(done.to_dict())
    elif done.outcome == "delivered":
        how = "failed it (rejected)" if args.reject else "ended it"
        print(f"workflow {args.wid}: signal {args.name} reached task {done.task} and {how}")
    elif done.outcome == "kept":
        print(f"workflow {args.wid}: signal {args.name} kept for a wait not reached yet")
    else:
        first = done.outcome.split(":", 1)[1]
        print(f"workflow {args.wid}: signal id {args.id} was applied before ({first}): no change")
    return EXIT_OK


def register(sub: Any, parents: Parents) -> None:
    """``signal``."""
    p = sub.add_parser(
        "signal",
        parents=parents,
        help="send a signal to a workflow: ends the wait task waiting for it",
        description="Send signal NAME to a workflow. The first wait task waiting for it "
        "(wait: {signal: NAME}) ends, with --data as its output (--reject fails it "
        "instead). A signal sent before its wait task is reached is kept for it. The same "
        "--id twice is applied once.",
    )
    p.add_argument("wid", type=workflow_id, metavar="WID|key:KEY")
    p.add_argument("name", help="the signal's name (the wait's signal:)")
    p.add_argument("--data", metavar="JSON|@FILE", help="its payload: the wait task's output")
    p.add_argument("--id", metavar="ID", help="a signal id: sent again, it is applied once")
    p.add_argument("--reject", action="store_true", help="fail the wait task (a rejection)")
    p.add_argument("--comment", help="recorded with the signal (who, when, this)")
    p.add_argument("--by", help="who sends it (default: user@host)")
    p.set_defaults(run=cmd_signal, writes=True)
