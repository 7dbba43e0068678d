#!/usr/bin/env python3
"""Run the same W workflows of one shape through redisflow, RQ, Celery and Dramatiq.

Each system gets the same Redis (flushed in between), the same number of worker
processes, the same workflows and the same realistic work: every task has a payload of its
own (``demos.bench.task_payload``: a file name, a part number, a row count), and its body
is one Redis round trip (``SET key value GET``, :mod:`demos.work`) on the worker's own
connection, as real handlers do I/O:

* redisflow: ``redisflow-demo``'s own benchmark (:func:`demos.bench.run_bench`) with
  ``--distinct payloads --task-io`` (so each workflow is a definition of its own).
* RQ: one job per task, ``depends_on`` its parent jobs, ``SimpleWorker`` processes (no fork
  per job, RQ's fastest worker).
* Celery: a canvas per workflow, ``chain`` of signatures with a ``chord`` for each fan-out,
  worker processes (solo pool, or ``--celery-threads`` threads), Redis as broker
  and result backend (chords need one).
* Dramatiq: ``pipeline`` for runs of single tasks; a fan-out is a ``group`` started from
  inside the task before it, with a completion callback for the gather (Dramatiq has no
  declarative DAG); worker processes with ``--dramatiq-threads`` threads (8).

The peers have no counters of their own to read, so the last task of every workflow (its
sinks) also increments one Redis counter, which the script polls. Every system's clock
starts when its workers are up and the push begins, and stops when every workflow has
finished; pushing and running overlap. Memory is the peak of ``used_memory`` sampled
during the run, minus the baseline, per task.

Usage (installs: ``pip install -e '.[compare]'``)::

    python demos/compare.py --workflows 2000 --shape fan10 --workers 2
    python demos/compare.py --url redis://127.0.0.1:6379/0 --flush --systems rq,redisflow
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import redis

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
MODULE = Path(__file__).stem  # RQ refers to the job functions by this module's name

SYSTEMS = ("redisflow", "rq", "celery", "dramatiq")
SHAPES = ("diamond4", "chain9", "chain10", "fan10")
DONE_KEY = "cmp:done"
QUEUE = "cmp"

_sink_client: redis.Redis | None = None
_sink_url: str | None = None
_io: Any = None


# -- the shared task body ---------------------------------------------------------------


def body(payload: dict[str, Any]) -> None:
    """The task body every peer runs: one Redis round trip on the worker's own client."""
    global _io
    if _io is None:
        from demos.work import RoundTrip

        _io = RoundTrip(_sink_url or os.environ["CMP_URL"], f"cmp:io:{os.getpid()}")
    _io(f"{payload['file']}:{payload['part']}")


def _done() -> None:
    """Count one finished workflow sink (the peers have no counters to read)."""
    global _sink_client
    if _sink_client is None:
        _sink_client = redis.Redis.from_url(_sink_url or os.environ["CMP_URL"])
    _sink_client.incr(DONE_KEY)


def payloads_of(w: int, stages: list[int]) -> list[list[dict[str, Any]]]:
    """Workflow ``w``'s payloads, stage by stage (redisflow's task order)."""
    from demos.bench import task_payload

    out: list[list[dict[str, Any]]] = []
    k = 0
    for width in stages:
        out.append([task_payload(w, k + j) for j in range(width)])
        k += width
    return out


# -- shapes as stages -------------------------------------------------------------------


def stages_of(shape: str) -> list[int]:
    """The shape as layer widths: every task of a layer depends on every task of the last.

    Celery and Dramatiq express layered shapes only; this checks the shape is one.
    """
    from demos.shapes import SHAPES as BUILDERS

    wf = BUILDERS[shape]()
    layer: dict[str, int] = {}
    for t in wf.tasks:
        layer[t.name] = 1 + max((layer[p] for p in t.after), default=-1)
    widths: list[int] = []
    for t in wf.tasks:
        while len(widths) <= layer[t.name]:
            widths.append(0)
        widths[layer[t.name]] += 1
    by_layer: dict[int, set[str]] = {}
    for t in wf.tasks:
        by_layer.setdefault(layer[t.name], set()).add(t.name)
    for t in wf.tasks:
        k = layer[t.name]
        if k and set(t.after) != by_layer[k - 1]:
            raise SystemExit(f"shape {shape} is not layered; the peers cannot express it")
    return widths


# -- RQ -----------------------------------------------------------------------------------


def rq_task(payload: dict[str, Any]) -> None:
    body(payload)


def rq_sink(payload: dict[str, Any]) -> None:
    body(payload)
    _done()


def rq_worker(url: str, ready: Any, threads: int) -> None:
    """One RQ worker process (SimpleWorker: jobs run in the worker, no fork per job)."""
    global _sink_url
    _sink_url = url
    from rq import Queue, SimpleWorker

    conn = redis.Redis.from_url(url)
    # RQ 3 concedes a dependent whose enqueue races with another worker to its next
    # maintenance pass (every 10 min by default): run maintenance every second, and
    # wake from an idle blocking pop every second, or such workflows stall.
    worker = SimpleWorker(
        [Queue(QUEUE, connection=conn)], connection=conn, maintenance_interval=1, worker_ttl=16
    )
    ready.put(os.getpid())
    worker.work(logging_level="WARNING")


def rq_push(url: str, stages: list[int], workflows: int, progress: Callable[[int], None]) -> None:
    from rq import Queue

    q = Queue(QUEUE, connection=redis.Redis.from_url(url))
    task, sink = f"{MODULE}.rq_task", f"{MODULE}.rq_sink"
    last = len(stages) - 1
    for w in range(workflows):
        prev: list[Any] = []
        for k, payloads in enumerate(payloads_of(w, stages)):
            fn = sink if k == last else task
            prev = [q.enqueue(fn, p, depends_on=prev or None) for p in payloads]
        if w % 100 == 99:
            progress(w + 1)


# -- Celery -------------------------------------------------------------------------------


def celery_app(url: str) -> Any:
    """The Celery app: Redis as broker and result backend, two tasks."""
    from celery import Celery

    app = Celery("cmp", broker=url, backend=url)
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        worker_prefetch_multiplier=32,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        broker_connection_retry_on_startup=True,
        task_default_queue=QUEUE,
    )
    app.task(name="cmp.task")(body)

    @app.task(name="cmp.sink")
    def sink(payload: dict[str, Any]) -> None:
        body(payload)
        _done()

    return app


def celery_worker(url: str, ready: Any, threads: int) -> None:
    """One Celery worker process: solo pool for one thread, else a thread pool."""
    global _sink_url
    _sink_url = url
    import warnings

    warnings.filterwarnings("ignore", message=".*superuser privileges.*")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the worker's banner and shutdown lines
    app = celery_app(url)
    ready.put(os.getpid())
    worker = app.Worker(
        pool="solo" if threads == 1 else "threads",
        concurrency=threads,
        loglevel="WARNING",
        quiet=True,
        without_heartbeat=True,
        without_mingle=True,
        without_gossip=True,
        queues=[QUEUE],
    )
    worker.start()


def celery_push(
    url: str, stages: list[int], workflows: int, progress: Callable[[int], None]
) -> None:
    from celery import chain, chord, group

    app = celery_app(url)
    last = len(stages) - 1

    def sig(k: int, payload: dict[str, Any], header: bool = False) -> Any:
        name = "cmp.sink" if k == last else "cmp.task"
        s = app.signature(name, args=(payload,), immutable=True)
        # Only a chord's header tasks need their results stored; the others skip the
        # result backend (and the pusher's subscription to it).
        return s if header else s.set(ignore_result=True)

    def canvas(k: int, payloads: list[list[dict[str, Any]]]) -> Any:
        """Stages k.. as one signature: chains of single tasks, chords for fan-outs."""
        parts: list[Any] = []
        while k <= last:
            if stages[k] == 1:
                parts.append(sig(k, payloads[k][0]))
                k += 1
                continue
            header = [sig(k, p, header=k < last) for p in payloads[k]]
            if k == last:
                parts.append(group(header))
            else:
                parts.append(chord(header, canvas(k + 1, payloads)))
            break
        return parts[0] if len(parts) == 1 else chain(*parts)

    for w in range(workflows):
        canvas(0, payloads_of(w, stages)).apply_async()
        if w % 100 == 99:
            progress(w + 1)


# -- Dramatiq -----------------------------------------------------------------------------

_dq: dict[str, Any] = {}


def dramatiq_setup(url: str) -> Any:
    """The broker (Redis, with group callbacks) and the one actor; once per process."""
    if _dq:
        return _dq["actor"]
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker
    from dramatiq.middleware import GroupCallbacks
    from dramatiq.rate_limits.backends import RedisBackend

    broker = RedisBroker(url=url)
    broker.add_middleware(GroupCallbacks(RedisBackend(url=url)))
    dramatiq.set_broker(broker)

    @dramatiq.actor(queue_name=QUEUE, max_retries=0, broker=broker)
    def dq_task(payload: dict[str, Any], cont: list[Any] | None = None, sink: bool = False) -> None:
        body(payload)
        if sink:
            _done()
        if cont:
            dq_start(*cont)

    _dq["actor"] = dq_task
    _dq["broker"] = broker
    return dq_task


def dq_start(stages: list[int], payloads: list[list[dict[str, Any]]]) -> None:
    """Start stages (with their payloads): a pipeline for leading single tasks, the last
    of which starts the fan-out that follows; a fan-out is a group whose callback runs
    the next stage."""
    from dramatiq import group, pipeline

    actor = _dq["actor"]
    singles = 0
    while singles < len(stages) and stages[singles] == 1:
        singles += 1
    rest = stages[singles:]
    cont = [rest, payloads[singles:]] if rest else None
    if singles:
        msgs = [
            actor.message_with_options(args=(payloads[k][0],), pipe_ignore=True)
            for k in range(singles - 1)
        ]
        last = (payloads[singles - 1][0], cont, not rest)
        if not msgs:
            actor.send_with_options(args=last)
        else:
            msgs.append(actor.message_with_options(args=last, pipe_ignore=True))
            pipeline(msgs).run()
        return
    after = stages[1:]
    g = group([actor.message(p, None, not after) for p in payloads[0]])
    if after:
        if after[0] != 1:
            raise SystemExit("two fan-outs in a row need a barrier task in Dramatiq")
        then = [after[1:], payloads[2:]] if after[1:] else None
        g.add_completion_callback(actor.message(payloads[1][0], then, len(after) == 1))
    g.run()


def dramatiq_worker(url: str, ready: Any, threads: int) -> None:
    """One Dramatiq worker process with ``threads`` worker threads."""
    global _sink_url
    _sink_url = url
    import signal

    import dramatiq

    dramatiq_setup(url)
    # An idle consumer backs off up to worker_timeout (1 s by default); 100 ms keeps it
    # close behind the fan-outs.
    worker = dramatiq.Worker(_dq["broker"], worker_threads=threads, worker_timeout=100)
    worker.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    ready.put(os.getpid())
    stop.wait()
    worker.stop()


def dramatiq_push(
    url: str, stages: list[int], workflows: int, progress: Callable[[int], None]
) -> None:
    dramatiq_setup(url)
    for w in range(workflows):
        dq_start(stages, payloads_of(w, stages))
        if w % 100 == 99:
            progress(w + 1)


PEERS: dict[str, tuple[Callable[..., None], Callable[..., None]]] = {
    "rq": (rq_worker, rq_push),
    "celery": (celery_worker, celery_push),
    "dramatiq": (dramatiq_worker, dramatiq_push),
}


# -- running one system -------------------------------------------------------------------


@dataclass
class Row:
    """One system's figures."""

    system: str
    workflows: int
    tasks: int
    workers: int
    push_s: float
    total_s: float
    workflows_pushed_per_s: float
    tasks_per_s: float
    redis_peak_mb: float
    bytes_per_task: float
    finished: bool
    note: str = ""


def _memory(r: redis.Redis) -> int:
    return int(r.info("memory")["used_memory"])


def _push_process(system: str, url: str, stages: list[int], workflows: int, out: Any) -> None:
    """Push in a process of its own, as a client application would; report the time."""
    t = time.monotonic()
    PEERS[system][1](url, stages, workflows, lambda n: None)
    out.put(time.monotonic() - t)
    out.close()
    out.join_thread()
    # Celery's pending chord results unsubscribe in __del__ during interpreter teardown
    # and fail noisily there; nothing is left to clean up, so leave at once.
    os._exit(0)


def run_peer(
    system: str, url: str, stages: list[int], workflows: int, workers: int, args: Any
) -> Row:
    """Push and run ``workflows`` on one peer; wait until every sink has run."""
    worker_fn, push_fn = PEERS[system]
    r = redis.Redis.from_url(url)
    ctx = mp.get_context("spawn")
    ready: Any = ctx.Queue()
    threads = {"rq": 1, "celery": args.celery_threads, "dramatiq": args.dramatiq_threads}[system]
    procs = [
        ctx.Process(target=worker_fn, args=(url, ready, threads), daemon=True)
        for _ in range(workers)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=120)
    time.sleep(0.5)  # let the workers reach their blocking pop
    tasks = sum(stages) * workflows
    target = stages[-1] * workflows
    baseline = _memory(r)
    peak = baseline
    out: Any = ctx.Queue()
    pusher = ctx.Process(target=_push_process, args=(system, url, stages, workflows, out))
    t0 = time.monotonic()
    pusher.start()
    push_time: list[float] = []
    finished = False
    last_mem = 0.0
    shown = -1
    while time.monotonic() - t0 < args.timeout:
        done = int(r.get(DONE_KEY) or 0)
        now = time.monotonic()
        if now - last_mem > 0.1:
            peak = max(peak, _memory(r))
            last_mem = now
        if not push_time:
            try:
                push_time.append(out.get_nowait())
            except queue.Empty:
                pass
        if not args.json and int(now - t0) != shown:
            shown = int(now - t0)
            print(
                f"  {system}: {done // stages[-1]:,}/{workflows:,} workflows"
                f"{' (pushing)' if not push_time else ''}   ",
                file=sys.stderr,
                end="\r",
            )
        if done >= target and push_time:
            finished = True
            break
        time.sleep(0.02)
    total = time.monotonic() - t0
    peak = max(peak, _memory(r))
    pusher.join(timeout=30)
    if pusher.is_alive():
        pusher.kill()
        pusher.join()
    for p in procs:
        p.terminate()
    for p in procs:
        p.join(timeout=10)
        if p.is_alive():
            p.kill()
            p.join()
    push_s = push_time[0] if push_time else total
    if not args.json:
        print(" " * 70, file=sys.stderr, end="\r")
    return Row(
        system=system,
        workflows=workflows,
        tasks=tasks,
        workers=workers,
        push_s=round(push_s, 3),
        total_s=round(total, 3),
        workflows_pushed_per_s=round(workflows / push_s, 1),
        tasks_per_s=round(tasks / total, 1),
        redis_peak_mb=round(peak / 1e6, 2),
        bytes_per_task=round((peak - baseline) / tasks, 1),
        finished=finished,
        note={
            "rq": "depends_on, SimpleWorker, 1 s maintenance",
            "celery": f"chain + chord, {threads} thread(s)",
            "dramatiq": f"pipeline + group in task, {threads} thread(s)",
        }[system],
    )


def run_redisflow(url: str, shape: str, workflows: int, workers: int, args: Any) -> Row:
    """redisflow-demo's benchmark, in the same overlap mode."""
    from demos.bench import BenchConfig, run_bench
    from engine import Engine

    engine = Engine.connect(url)
    try:
        cfg = BenchConfig(
            url=url,
            shape=shape,
            workflows=workflows,
            agents=workers,
            distinct="payloads",
            task_io=True,
            concurrency=args.redisflow_concurrency,
            async_handlers=args.redisflow_async,
        )
        res = run_bench(cfg, engine)
    finally:
        engine.close()
    return Row(
        system="redisflow",
        workflows=workflows,
        tasks=res.tasks,
        workers=workers,
        push_s=res.push_s,
        total_s=res.total_s,
        workflows_pushed_per_s=res.workflows_pushed_per_s,
        tasks_per_s=round(res.tasks / res.total_s, 1),
        redis_peak_mb=res.redis_peak_mb,
        bytes_per_task=res.bytes_per_task,
        finished=res.ok,
        note=f"Lua transitions, agents ({'async' if res.async_handlers else 'sync'} "
        f"handlers, concurrency {res.concurrency})",
    )


def print_table(rows: list[Row], shape: str) -> None:
    """The side-by-side table, with redisflow's speed-up over each peer."""
    from rich.console import Console
    from rich.table import Table

    ref = next((r for r in rows if r.system == "redisflow"), None)
    first = rows[0]
    t = Table(
        title=f"{first.workflows:,} x {shape} ({first.tasks:,} tasks), "
        f"{first.workers} worker processes, one Redis"
    )
    for col in ("system", "push wf/s", "total s", "tasks/s", "vs redisflow", "peak MB", "B/task"):
        t.add_column(col, justify="left" if col == "system" else "right")
    for r in rows:
        ratio = "-"
        if ref is not None and r.system != "redisflow" and r.tasks_per_s > 0:
            ratio = f"{ref.tasks_per_s / r.tasks_per_s:.1f}x slower"
        t.add_row(
            r.system + ("" if r.finished else " (unfinished)"),
            f"{r.workflows_pushed_per_s:,.0f}",
            f"{r.total_s:.2f}",
            f"{r.tasks_per_s:,.0f}",
            ratio,
            f"{r.redis_peak_mb:.1f}",
            f"{r.bytes_per_task:,.0f}",
        )
    console = Console(width=max(100, Console().width))
    console.print(t)
    for r in rows:
        console.print(f"  {r.system}: {r.note}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workflows", "-w", type=int, default=2000)
    p.add_argument("--shape", choices=SHAPES, default="fan10")
    p.add_argument("--workers", type=int, default=2, help="worker processes per system")
    p.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated")
    p.add_argument(
        "--celery-threads",
        type=int,
        default=1,
        help="threads per Celery worker process (default 1: the solo pool, its fastest here)",
    )
    p.add_argument(
        "--dramatiq-threads",
        type=int,
        default=8,
        help="threads per Dramatiq worker process (default 8, Dramatiq's own and its fastest)",
    )
    p.add_argument(
        "--redisflow-concurrency",
        type=int,
        default=None,
        help="tasks each redisflow agent runs at once (default: the agent's)",
    )
    p.add_argument(
        "--redisflow-async", action="store_true", help="redisflow's handlers are async def"
    )
    p.add_argument("--url", default=None, help="Redis URL (default: a private redis-server)")
    p.add_argument("--flush", action="store_true", help="allow flushing the --url database")
    p.add_argument("--timeout", type=float, default=900.0, help="per system, in seconds")
    p.add_argument("--json", action="store_true", help="print one JSON line per system")
    args = p.parse_args(argv)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        p.error(f"unknown systems: {', '.join(sorted(unknown))}")
    if args.url and not args.flush:
        p.error("every system runs on a flushed database: give --flush with --url")
    stages = stages_of(args.shape)

    from engine import EmbeddedRedis

    server = None
    url = args.url
    if url is None:
        server = EmbeddedRedis().start()
        url = server.url
    os.environ["CMP_URL"] = url
    rows: list[Row] = []
    try:
        r = redis.Redis.from_url(url)
        for system in systems:
            r.flushdb()
            if not args.json:
                print(f"running {system} ...", file=sys.stderr)
            if system == "redisflow":
                row = run_redisflow(url, args.shape, args.workflows, args.workers, args)
            else:
                row = run_peer(system, url, stages, args.workflows, args.workers, args)
            rows.append(row)
            if args.json:
                print(json.dumps(asdict(row), separators=(",", ":")), flush=True)
        r.flushdb()
    finally:
        if server is not None:
            server.stop()
    if not args.json:
        print_table(rows, args.shape)
    return 0 if all(r.finished for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
