"""``redisflow agents``: agents and their liveness; ``agents drain AGENT``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..errors import DefinitionError
from .common import EXIT_OK, STATE_STYLE, Parents, esc, new_table, out, print_json, span, type_label

if TYPE_CHECKING:
    from ..client import Engine


def cmd_agents(engine: Engine, args: argparse.Namespace) -> int:
    from engine.runtime import agent_ops

    if args.action == "drain":
        if not args.agent:
            raise DefinitionError("agents drain needs the agent's id (redisflow agents lists them)")
        engine.drain_agent(args.agent)
        if args.json:
            print_json({"agent": args.agent, "draining": True})
        else:
            print(f"agent {args.agent}: asked to drain (at its next heartbeat it stops claiming, "
                  "finishes what it runs and exits)")  # fmt: skip
        return EXIT_OK
    every = engine.agents()
    agents = every if args.all else agent_ops.current_agents(every)
    if args.json:
        print_json([a.to_dict() for a in agents])
        return EXIT_OK
    table = new_table("agent", "types", "state", "heartbeat", "running", "concurrency", "host/pid")
    for a in agents:
        style = STATE_STYLE.get(a.state.value, "dim")
        table.add_row(
            esc(a.id),
            ",".join(type_label(t) for t in a.types),
            f"[{style}]{a.state.value}[/]",
            "-" if a.heartbeat_age is None else f"{a.heartbeat_age:.1f}s ago",
            str(len(a.running)),
            str(a.concurrency),
            esc(f"{a.host}/{a.pid}"),
        )
    out.print_table(table)
    if agents:
        a = agents[0]
        out.print(
            f"[dim]online: heartbeat within {2 * a.heartbeat_s:.0f}s; stale: later but within "
            f"the {a.lease_s:.0f}s lease; dead: lease expired (tasks handed on)[/]"
        )
    earlier = agent_ops.earlier_release(agents)
    if earlier:
        out.print(
            f"[yellow]{len(earlier)} of these agents {'is' if len(earlier) == 1 else 'are'} "
            "of an earlier redisflow release "
            f"({esc(', '.join(a.id for a in earlier))}): agents of this release wait for them "
            "to stop before they start[/]"
        )
    if len(every) > len(agents):
        out.print(
            f"[dim]{len(every) - len(agents)} agents stopped or dead over "
            f"{span(agent_ops.GONE_AFTER_S)} ago are hidden (--all shows them; Redis "
            "forgets them a day after)[/]"
        )
    return EXIT_OK


def register(sub: Any, parents: Parents) -> None:
    """``agents``."""
    p = sub.add_parser(
        "agents",
        parents=parents,
        help="agents and their liveness; agents drain AGENT: ask one to finish and stop",
    )
    p.add_argument("action", nargs="?", choices=["drain"], help="drain: ask AGENT to drain")
    p.add_argument("agent", nargs="?", metavar="AGENT")
    p.add_argument("--all", action="store_true", help="agents gone a while too")
    p.set_defaults(run=cmd_agents)
