"""``redisflow-demo``: the load generator and benchmark.

Pushes W workflows of a shape, runs them with A agent processes (no-op handlers, or
``--task-ms`` of simulated work), shows progress, then a summary; ``--json`` prints one
line instead. Without ``--url`` it runs on a private Redis started for the command.

What users run, rather than one definition pushed again and again with no-op tasks:
``--distinct`` gives every workflow an input of its own (``--distinct payloads``: every
task a payload of its own, so every workflow is a definition of its own), ``--task-io``
makes each task one Redis round trip on the handler's own connection, and ``--async``
makes the handlers ``async def``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from engine.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    connect,
    connection_options,
    fail,
    guarded,
    print_json,
)
from engine.store.layout import resolve as resolve_layout

from .bench import SHAPE_NAMES, BenchConfig, BenchResult, run_bench


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="redisflow-demo",
        parents=[connection_options()],
        description="Push W workflows of a shape and run them with A agent processes; "
        "print a summary (or one JSON line).",
    )
    p.add_argument("--workflows", "-w", type=int, default=1000, metavar="W")
    p.add_argument(
        "--shape",
        choices=(*SHAPE_NAMES, "map", "waits"),
        default="fan10",
        help="map: one workflow, split -> --items items (a map) -> gather; waits: W runs "
        "gated by a signal another process sends, each calling 4 child runs",
    )
    p.add_argument("--items", type=int, default=100_000, help="items of --shape map")
    p.add_argument("--window", type=int, default=1000, help="items in flight, --shape map")
    p.add_argument("--agents", "-a", type=int, default=2, metavar="A", help="agent processes")
    p.add_argument(
        "--task-ms", type=float, default=0.0, help="simulated work per task (default: none)"
    )
    p.add_argument(
        "--fail-rate",
        type=float,
        default=0.0,
        help="probability that a task's handler fails (default: 0)",
    )
    p.add_argument(
        "--distinct",
        nargs="?",
        const="input",
        choices=("input", "payloads"),
        default="",
        help="input (or the flag alone): every workflow gets an input of its own (~100 "
        "bytes, pushed with push_many(..., inputs=)); payloads: every task of every "
        "workflow gets a payload of its own, so each workflow is a definition of its own "
        "(default: one shared definition, no input)",
    )
    p.add_argument(
        "--input-bytes",
        type=int,
        default=0,
        metavar="N",
        help="with --distinct input: each input about N bytes of JSON (default: ~105)",
    )
    p.add_argument(
        "--element-bytes",
        type=int,
        default=0,
        metavar="N",
        help="--shape map: each element about N bytes of JSON (default: a number)",
    )
    p.add_argument(
        "--task-io",
        action="store_true",
        help="each handler does one Redis round trip (SET key value GET) on a connection "
        "of its own to the same Redis, as real handlers do I/O",
    )
    p.add_argument(
        "--async",
        dest="async_handlers",
        action="store_true",
        help="handlers are async def, run on each agent's event loop",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="tasks each agent runs at once (default: the agent's: 1, or 32 with --async)",
    )
    p.add_argument("--claim-batch", type=int, default=None, help="tasks one claim takes at most")
    p.add_argument(
        "--phases",
        choices=("overlap", "split"),
        default="overlap",
        help="overlap: agents run while the push streams in (default); split: push "
        "everything first, measure its memory, then run",
    )
    p.add_argument(
        "--latency-sample",
        type=int,
        default=2000,
        metavar="N",
        help="workflows read back for the latencies (default: 2000)",
    )
    p.add_argument(
        "--handler-latency",
        action="store_true",
        help="handlers note when they start and end, in the sampled workflows: dispatch "
        "latency (ready -> handler start) and step latency (a parent's end -> its child's "
        "handler start); costs the agents a check per task",
    )
    p.add_argument(
        "--rate",
        type=float,
        default=0.0,
        metavar="W",
        help="push W workflows a second, spread evenly (default: as fast as it goes): "
        "a few a second is an idle deployment",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of random shapes and failures")
    p.add_argument(
        "--flush",
        action="store_true",
        help="empty the Redis database first (never done with --url unless given)",
    )
    p.add_argument("--timeout", type=float, default=3600.0, help="give up after this many s")
    p.add_argument("--json", action="store_true", help="print one JSON line")
    return p


class _Bars:
    """Two rich progress bars, push and run, on stderr."""

    def __init__(self, cfg: BenchConfig, enabled: bool) -> None:
        self.progress = Progress(
            TextColumn("[bold]{task.description:<5}"),
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            disable=not enabled,
            refresh_per_second=8,
        )
        self.ids = {
            "push": self.progress.add_task("push", total=cfg.workflows),
            "run": self.progress.add_task("run", total=None),
        }

    def __call__(self, phase: str, done: int, total: int) -> None:
        self.progress.update(self.ids[phase], completed=done, total=total)

    def __enter__(self) -> _Bars:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


def summary_table(res: BenchResult) -> Table:
    """The human summary of one run."""
    t = Table(title=f"redisflow-demo: {res.workflows} x {res.shape}", show_header=False)
    t.add_column("what", style="bold")
    t.add_column("value", justify="right")

    def row(name: str, value: Any) -> None:
        t.add_row(name, "-" if value is None else str(value))

    row("workflows / tasks", f"{res.workflows:,} / {res.tasks:,}")
    row("agents (processes)", res.agents)
    row("phases", res.phases)
    work = "no-op" if not res.task_ms else f"{res.task_ms:g} ms sleep"
    if res.task_io:
        work += " + one Redis round trip"
    kind = "async" if res.async_handlers else "sync"
    row("task body", f"{work} ({kind}, concurrency {res.concurrency})")
    distinct = res.distinct or "no (one shared definition, no input)"
    if res.input_bytes:
        distinct += f" ({res.input_bytes} bytes)"
    row("distinct", distinct)
    row("push", f"{res.push_s:.2f} s  ({res.workflows_pushed_per_s:,.0f} workflows/s)")
    since = "from the first push" if res.phases == "overlap" else "after the push"
    row(f"run ({since})", f"{res.run_s:.2f} s  ({res.tasks_per_s:,.0f} tasks/s)")
    row("total", f"{res.total_s:.2f} s")
    row("Redis peak", f"{res.redis_peak_mb:.1f} MB  (baseline {res.redis_baseline_mb:.1f} MB)")
    row("bytes per task (at peak)", f"{res.bytes_per_task:.0f}")
    if res.bytes_per_task_pushed is not None:
        row("bytes per task (pushed, not run)", f"{res.bytes_per_task_pushed:.0f}")
    if res.redis_us_per_task is not None:
        row("Redis CPU per task", f"{res.redis_us_per_task:.1f} us")
    if res.redis_cpu_split:
        row("Redis CPU by master", "  ".join(f"{v:.0f}%" for v in res.redis_cpu_split.values()))
    row("agents' CPU per task", f"{res.agent_us_per_task:.1f} us")
    row("ready-to-claim p50 / p99", f"{res.latency_p50_ms} / {res.latency_p99_ms} ms")
    if res.handler_sampled_tasks:
        row("dispatch p50 / p99", f"{res.dispatch_p50_ms} / {res.dispatch_p99_ms} ms")
        row("step p50 / p99", f"{res.step_p50_ms} / {res.step_p99_ms} ms")
    row(
        "succeeded / failed / upstream_failed / skipped",
        f"{res.succeeded} / {res.failed} / {res.upstream_failed} / {res.skipped}",
    )
    row("ok", "[green]yes[/]" if res.ok else "[red]NO[/]")
    return t


@guarded
def run(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, run the benchmark, print the outcome; returns the exit code."""
    args = build_parser().parse_args(argv)
    bad_concurrency = args.concurrency is not None and args.concurrency < 1
    if args.workflows < 1 or args.agents < 1 or bad_concurrency:
        return fail("--workflows, --agents and --concurrency must be at least 1", EXIT_BAD_INPUT)
    if not 0.0 <= args.fail_rate <= 1.0:
        return fail("--fail-rate must be between 0 and 1", EXIT_BAD_INPUT)
    if args.rate < 0:
        return fail("--rate must be 0 or more", EXIT_BAD_INPUT)
    if args.handler_latency and args.async_handlers:
        return fail("--handler-latency notes plain handlers only, not --async", EXIT_BAD_INPUT)
    engine = connect(args)
    try:
        if args.flush:
            engine.redis.flushdb()
            resolve_layout(engine.redis, args.namespace, args.shards)  # stored again
        elif engine.embedded is None and engine.redis.exists(*_shard_stats(engine)):
            return fail(
                f"namespace {args.namespace!r} at {engine.url} already holds data: the demo's "
                "agents would run its tasks; use another --namespace, or --flush to empty "
                "the database first",
                EXIT_BAD_INPUT,
            )
        if args.shape == "map":
            return _run_map(engine, args)
        if args.shape == "waits":
            return _run_waits(engine, args)
        cfg = BenchConfig(
            url=engine.url,
            namespace=args.namespace,
            shape=args.shape,
            workflows=args.workflows,
            agents=args.agents,
            task_ms=args.task_ms,
            fail_rate=args.fail_rate,
            concurrency=args.concurrency,
            distinct=args.distinct,
            input_bytes=args.input_bytes,
            task_io=args.task_io,
            async_handlers=args.async_handlers,
            claim_batch=args.claim_batch,
            phases=args.phases,
            latency_sample=args.latency_sample,
            handler_latency=args.handler_latency,
            rate=args.rate,
            seed=args.seed,
            max_payload=args.max_payload,
            timeout_s=args.timeout,
            wait_replicas=args.wait_replicas,
            wait_timeout_ms=args.wait_timeout,
        )
        show = sys.stderr.isatty()
        with _Bars(cfg, enabled=show) as bars:
            res = run_bench(cfg, engine, progress=bars)
    finally:
        engine.close()
    if args.json:
        print_json(res.to_dict())
    else:
        Console().print(summary_table(res))
        for problem in res.problems:
            print(f"redisflow-demo: check failed: {problem}", file=sys.stderr)
    return EXIT_OK if res.ok else EXIT_FAILED


def _run_map(engine: Any, args: argparse.Namespace) -> int:
    from engine.connect.urls import url_of

    from .map_bench import run_map_bench

    res = run_map_bench(
        engine,
        args.items,
        args.window,
        args.agents,
        url=url_of(engine.redis),
        element_bytes=args.element_bytes,
    )
    ok = res.state == "succeeded" and res.max_ready <= args.window
    if args.json:
        print_json(res.to_dict())
    else:
        table = Table(title=f"map: 1 workflow, {res.items:,} items, window {res.window:,}")
        table.add_column("figure")
        table.add_column("value", justify="right")
        for name, value in res.to_dict().items():
            table.add_row(name, f"{value:,}" if isinstance(value, int | float) else str(value))
        Console().print(table)
    return EXIT_OK if ok else EXIT_FAILED


def _run_waits(engine: Any, args: argparse.Namespace) -> int:
    from engine.connect.urls import url_of

    from .waits_bench import run_waits_bench

    res = run_waits_bench(engine, args.workflows, args.agents, url=url_of(engine.redis))
    if args.json:
        print_json(res.to_dict())
    else:
        table = Table(title=f"waits: {res.workflows:,} gated runs, {res.children} children each")
        table.add_column("figure")
        table.add_column("value", justify="right")
        for name, value in res.to_dict().items():
            table.add_row(name, f"{value:,}" if isinstance(value, int | float) else str(value))
        Console().print(table)
    return EXIT_OK if res.succeeded == res.workflows else EXIT_FAILED


def _shard_stats(engine: Any) -> list[str]:
    return [s.stats for s in engine.keys.all_shards()]


def main() -> None:
    """Console-script entry point."""
    sys.exit(run())


if __name__ == "__main__":
    main()
