"""``redisflow``: the operator CLI."""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from ..client import Engine
from ..errors import DefinitionError
from ..loader import load_file
from ..model import WorkflowState
from .common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    connect,
    connection_options,
    guarded,
    print_json,
)

if TYPE_CHECKING:
    from rich.console import OverflowMethod

STATE_STYLE = {
    "running": "cyan",
    "paused": "yellow",
    "succeeded": "green",
    "failed": "red",
    "cancelled": "magenta",
    "waiting": "dim",
    "ready": "blue",
    "skipped": "dim",
}


class Parser(argparse.ArgumentParser):
    """Reports a usage error as one line (bad input, exit code 2), not the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: {message} (see {self.prog} --help)\n")


class _LazyConsole:
    """rich's Console, imported on first use: commands that print JSON start faster."""

    _console: Any = None

    def print(self, *objects: Any) -> None:
        if self._console is None:
            from rich.console import Console

            _LazyConsole._console = Console(highlight=False)
        self._console.print(*objects)


out = _LazyConsole()


def _table(*columns: str, overflow: OverflowMethod = "ellipsis") -> Any:
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for col in columns:
        table.add_column(col, overflow=overflow)
    return table


def positive_int(text: str) -> int:
    """An integer of at least 1 (page numbers, page sizes, counts)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def positive_float(text: str) -> float:
    """A number of seconds above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
    return value


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``12h``, ``7d`` or ``2w`` in seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 90s, 15m, 12h, 7d)")
    scale = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)]
    return float(m.group(1)) * scale


def _ago(ts: float | None, now: float) -> str:
    if ts is None:
        return "-"
    s = max(0.0, now - ts)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s / size:.0f}{unit} ago"
    return f"{s:.0f}s ago"


def _type_label(task_type: str) -> str:
    return task_type or '""'


def _styled(state: str) -> str:
    return f"[{STATE_STYLE.get(state, '')}]{state}[/]"


# -- commands ---------------------------------------------------------------------------


def cmd_push(engine: Engine, args: argparse.Namespace) -> int:
    # compiled once, before connecting (see run)
    ids = engine.push_many(c for c in args.compiled for _ in range(args.copies))
    if args.json and not args.wait:
        print_json({"ids": ids})
    elif not args.json:
        for wid in ids:
            print(wid, flush=True)
    if not args.wait:
        return EXIT_OK
    if engine.embedded is not None:
        print(
            "redisflow: waiting on a private Redis that no agent can reach; give --url or "
            "REDISFLOW_URL to wait for agents (see: redisflow server)",
            file=sys.stderr,
        )
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    final: dict[str, str] = {}
    try:
        for wid in ids:  # --timeout bounds the whole wait, not each workflow's
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            final[wid] = engine.wait(wid, timeout=left).value
    except TimeoutError:
        late = [wid for wid in ids if wid not in final]
        print(
            f"redisflow: gave up after {args.timeout:g}s; still unfinished: {', '.join(late)}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if args.json:
        print_json({"ids": ids, "states": final})
    else:
        for wid, st in final.items():
            print(f"workflow {wid}: {st}", file=sys.stderr)
    return EXIT_OK if all(s == "succeeded" for s in final.values()) else EXIT_FAILED


def cmd_status(engine: Engine, args: argparse.Namespace) -> int:
    st = engine.status(args.wid)
    if args.json:
        print_json(st.to_dict())
        return EXIT_OK
    now = engine.server_time()
    out.print(
        f"[bold]workflow {st.id}[/] {st.name}  {_styled(st.state.value)}  "
        f"{st.succeeded}/{st.total} succeeded, {st.failed} failed, {st.skipped} skipped  "
        f"created {_ago(st.created_at, now)}"
        + (f", finished {_ago(st.finished_at, now)}" if st.finished_at else "")
    )
    out.print("  ".join(f"{k} {v}" for k, v in st.counts.items() if v))
    table = _table("task", "type", "state", "attempts", "agent", "took", "after", "output / error")
    for col in table.columns:
        col.no_wrap = True
    table.columns[-1].ratio = 1  # only the output column gives way on narrow terminals
    table.expand = True
    for t in st.tasks:
        if t.error:
            detail = f"[red]{t.error.strip().splitlines()[-1]}[/]"
        else:
            detail = "" if t.output is None else json.dumps(t.output, separators=(",", ":"))
            detail = detail.replace("[", r"\[")
        took = (
            f"{t.finished_at - t.started_at:.3f}s"
            if t.started_at is not None and t.finished_at is not None
            else "-"
        )
        table.add_row(
            t.name,
            t.type or "-",
            _styled(t.state.value),
            f"{t.attempts}" + (f" ({t.failures} failed)" if t.failures else ""),
            t.agent or "-",
            took,
            ",".join(t.parents) or "-",
            detail[:300],
        )
    out.print(table)
    return EXIT_OK


def cmd_list(engine: Engine, args: argparse.Namespace) -> int:
    offset = (args.page - 1) * args.limit
    rows = engine.list(args.state, args.name, offset=offset, limit=args.limit)
    total = engine.count(args.state, args.name)
    if args.json:
        print_json({"page": args.page, "total": total, "workflows": [r.to_dict() for r in rows]})
        return EXIT_OK
    now = engine.server_time()
    table = _table("id", "name", "state", "done", "failed", "created", "finished")
    for r in rows:
        table.add_row(
            r.id,
            r.name,
            _styled(r.state.value),
            f"{r.succeeded}/{r.total}",
            str(r.failed),
            _ago(r.created_at, now),
            _ago(r.finished_at, now),
        )
    out.print(table)
    pages = max(1, -(-total // args.limit))
    out.print(f"[dim]page {args.page} of {pages} ({total} workflows)[/]")
    return EXIT_OK


def cmd_agents(engine: Engine, args: argparse.Namespace) -> int:
    agents = engine.agents()
    if args.json:
        print_json([a.to_dict() for a in agents])
        return EXIT_OK
    table = _table("agent", "types", "state", "heartbeat", "running", "concurrency", "host/pid")
    for a in agents:
        style = {"online": "green", "stale": "yellow", "dead": "red"}.get(a.state.value, "dim")
        table.add_row(
            a.id,
            ",".join(_type_label(t) for t in a.types),
            f"[{style}]{a.state.value}[/]",
            "-" if a.heartbeat_age is None else f"{a.heartbeat_age:.1f}s ago",
            str(len(a.running)),
            str(a.concurrency),
            f"{a.host}/{a.pid}",
        )
    out.print(table)
    if agents:
        a = agents[0]
        out.print(
            f"[dim]online: heartbeat within {2 * a.heartbeat_s:.0f}s; stale: later but within "
            f"the {a.lease_s:.0f}s lease; dead: lease expired (tasks handed on)[/]"
        )
    return EXIT_OK


def cmd_stats(engine: Engine, args: argparse.Namespace) -> int:
    s = engine.stats()
    if args.json:
        print_json(s.to_dict())
        return EXIT_OK
    out.print("workflows  " + "  ".join(f"{_styled(k)} {v}" for k, v in s.workflows.items()))
    out.print("tasks      " + "  ".join(f"{_styled(k)} {v}" for k, v in s.tasks.items()))
    out.print(f"pushed     {s.workflows_pushed} workflows, {s.tasks_pushed} tasks")
    if s.queued:
        out.print("queued     " + "  ".join(f"{_type_label(t)} {n}" for t, n in s.queued.items()))
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
        print(f"{stamp} {e.kind:<20} {e.wid}{task} {extra}".rstrip())
    return EXIT_OK


def _control(name: str) -> Any:
    def run(engine: Engine, args: argparse.Namespace) -> int:
        method = getattr(engine, name)
        result = method(args.wid, args.task) if name == "retry" else method(args.wid)
        if args.json:
            print_json({"id": args.wid, "op": name, "count": result})
        else:
            print(f"workflow {args.wid}: {name} done" + (f" ({result} tasks)" if result else ""))
        return EXIT_OK

    return run


def cmd_cleanup(engine: Engine, args: argparse.Namespace) -> int:
    if args.finished:
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


def cmd_server(_: Engine | None, args: argparse.Namespace) -> int:
    from ..embedded import EmbeddedRedis

    server = EmbeddedRedis(port=args.port).start()
    print(f"export REDISFLOW_URL={server.url}", flush=True)
    print("redisflow: private Redis running; Ctrl+C stops it", file=sys.stderr, flush=True)
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    except KeyboardInterrupt:
        pass
    server.stop()
    return EXIT_OK


# -- parser -----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    conn = connection_options()
    js = argparse.ArgumentParser(add_help=False)
    js.add_argument("--json", action="store_true", help="machine-readable output")
    parser = Parser(
        prog="redisflow",
        description="Push, watch and steer redisflow workflows.",
        epilog="exit codes: 0 ok, 1 a waited-for workflow failed, 2 bad input, 3 Redis unreachable",
    )
    # Subcommand parsers are Parsers; their parents are plain ArgumentParsers.
    sub: argparse._SubParsersAction[argparse.ArgumentParser] = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=Parser
    )
    both = [conn, js]

    p = sub.add_parser("push", parents=both, help="push workflow files (YAML or JSON)")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument(
        "--copies",
        type=positive_int,
        default=1,
        metavar="N",
        help="push each workflow N times (they share one stored definition)",
    )
    p.add_argument(
        "--wait", action="store_true", help="wait until they finish; exit 1 if any failed"
    )
    p.add_argument(
        "--timeout", type=parse_duration, default=None, help="give up waiting after this"
    )
    p.set_defaults(run=cmd_push)

    p = sub.add_parser("status", parents=both, help="one workflow and its tasks")
    p.add_argument("wid")
    p.set_defaults(run=cmd_status)

    p = sub.add_parser("list", parents=both, help="workflows, newest first, page by page")
    p.add_argument("--state", choices=[s.value for s in WorkflowState])
    p.add_argument("--name")
    p.add_argument("--page", type=positive_int, default=1)
    p.add_argument("--limit", type=positive_int, default=50)
    p.set_defaults(run=cmd_list)

    sub.add_parser("agents", parents=both, help="agents and their liveness").set_defaults(
        run=cmd_agents
    )
    sub.add_parser("stats", parents=both, help="totals by state").set_defaults(run=cmd_stats)

    p = sub.add_parser("events", parents=both, help="recent lifecycle events")
    p.add_argument("--count", type=positive_int, default=50)
    p.set_defaults(run=cmd_events)

    for name, text in (
        ("pause", "hold a running workflow"),
        ("release", "resume a paused workflow"),
        ("cancel", "cancel a running or paused workflow"),
        ("retry", "run a failed workflow's failed tasks again"),
    ):
        p = sub.add_parser(name, parents=both, help=text)
        p.add_argument("wid")
        if name == "retry":
            p.add_argument("--task", action="append", help="retry only this failed task")
        p.set_defaults(run=_control(name))

    p = sub.add_parser("cleanup", parents=both, help="delete finished workflows")
    p.add_argument("wid", nargs="?")
    p.add_argument("--finished", action="store_true", help="every finished workflow")
    p.add_argument("--older-than", type=parse_duration, help="with --finished: e.g. 7d")
    p.set_defaults(run=cmd_cleanup)

    p = sub.add_parser("server", help="run a private redis-server and print its URL")
    p.add_argument("--port", type=int, default=None)
    p.set_defaults(run=cmd_server, no_engine=True)
    return parser


@guarded
def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "no_engine", False):
        return int(args.run(None, args))
    if args.command == "push":
        # Parse, validate and compile every file once, before connecting, so bad input
        # touches nothing.
        from ..store.codec import compile_workflow

        args.compiled = [
            compile_workflow(wf, args.max_payload) for path in args.files for wf in load_file(path)
        ]
    engine = connect(args)
    try:
        return int(args.run(engine, args))
    finally:
        engine.close()


def main() -> None:
    """Entry point of ``redisflow``."""
    try:
        code = run()
    except SystemExit as e:  # argparse: usage errors are bad input
        code = EXIT_BAD_INPUT if e.code not in (0, None) else 0
    sys.exit(code)
