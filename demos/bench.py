"""The load generator behind ``redisflow-demo``: push W workflows, run them with A agents.

The benchmark runs the code path users run: workflows are built with the public
:class:`~engine.spec.definition.Workflow` builder, stored with :meth:`Engine.push_many`, and run
by :class:`~engine.runtime.agent.Agent` loops in separate processes, so every Lua transition,
lease, counter and event happens as in production.

Phases:

* ``overlap`` (default): agents are released when the push starts, so pushing and running
  overlap; ``run_s`` then spans from the first push to the last finished workflow.
* ``split``: agents wait until every workflow is stored, so the memory of the pushed
  (not yet run) workflows can be measured alone; ``run_s`` starts after the push.

Memory: ``used_memory`` is sampled while the benchmark runs, and Redis's own
``used_memory_peak`` is used when it rose during the run (Redis cannot reset it).
``bytes_per_task`` is (peak - baseline) / tasks: the whole cost at the highest point,
finished workflows, indexes, queues and the event stream included.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing as mp
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import redis

from engine import Engine, Workflow
from engine.connect.urls import open_client, url_of
from engine.runtime.agent import ASYNC_CONCURRENCY, DEFAULT_CONCURRENCY
from engine.store.codec import encode_input
from engine.store.codec import parse_record as task_record
from engine.store.keys import ShardKeys
from engine.store.layout import is_cluster

from .latency import Stamp, handler_latency, sample_step, stamped
from .shapes import SHAPES, random_dag
from .work import bench_handler

SHAPE_NAMES = ("diamond4", "chain9", "chain10", "fan10", "random")
DISTINCT = ("", "input", "payloads")
PUSH_CHUNK = 1024  # workflows per push_many call
POLL_S = 0.02  # how often the monitor reads the counters
RATE_TICK_S = 0.02  # with a rate: a push every this often at most


@dataclass
class BenchConfig:
    """What to run."""

    url: str
    namespace: str = "rf"
    shape: str = "fan10"
    workflows: int = 1000
    agents: int = 2
    task_ms: float = 0.0
    fail_rate: float = 0.0
    concurrency: int | None = None  # None: the agent's default
    claim_batch: int | None = None
    phases: str = "overlap"  # overlap | split
    distinct: str = ""  # "": one shared definition, no input | input | payloads
    input_bytes: int = 0  # with distinct "input": each input about this long (0: ~105)
    task_io: bool = False  # each handler does one Redis round trip of its own
    async_handlers: bool = False  # handlers are ``async def``
    latency_sample: int = 2000
    handler_latency: bool = False  # handlers note their start and end (demos/latency.py)
    rate: float = 0.0  # workflows pushed per second (0: as fast as pushing goes)
    seed: int = 0
    max_payload: int = 1024 * 1024
    timeout_s: float = 3600.0
    wait_replicas: int = 0  # the agents WAIT for this many replicas after each write
    wait_timeout_ms: int = 1000


@dataclass
class BenchResult:
    """What ``--json`` prints (one line)."""

    shape: str
    workflows: int
    tasks: int
    agents: int
    push_s: float
    run_s: float
    total_s: float
    workflows_pushed_per_s: float
    tasks_per_s: float
    redis_peak_mb: float
    bytes_per_task: float
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    ok: bool
    phases: str = "overlap"
    task_ms: float = 0.0
    fail_rate: float = 0.0
    distinct: str = ""
    input_bytes: int = 0  # the first workflow's input JSON, in bytes (0: no input)
    task_io: bool = False
    async_handlers: bool = False
    concurrency: int = 1
    drain_s: float = 0.0
    agents_start_s: float = 0.0
    redis_baseline_mb: float = 0.0
    redis_pushed_mb: float | None = None
    bytes_per_task_pushed: float | None = None
    bytes_per_task_basis: str = "peak"
    latency_sampled_tasks: int = 0
    # with handler_latency (demos/latency.py): ready -> handler start, and the last
    # parent's handler end -> handler start, in ms
    dispatch_p50_ms: float | None = None
    dispatch_p99_ms: float | None = None
    step_p50_ms: float | None = None
    step_p99_ms: float | None = None
    handler_sampled_tasks: int = 0
    rate: float = 0.0
    succeeded: int = 0
    failed: int = 0
    skipped: int = 0
    upstream_failed: int = 0
    processed: int = 0
    rejected: int = 0
    redis_version: str = ""
    push_cpu_s: float = 0.0
    agents_cpu_s: float = 0.0
    redis_cpu_s: float | None = None
    # on a Redis Cluster: each master's share of the Redis CPU, in percent
    redis_cpu_split: dict[str, float] | None = None
    agent_us_per_task: float | None = None
    redis_us_per_task: float | None = None
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- workflows ----------------------------------------------------------------------------


def shape_factory(shape: str, seed: int = 0, distinct: str = "") -> Callable[[int], Workflow]:
    """A function giving the ``i``-th workflow of a shape.

    Random DAGs differ per ``i``; the other shapes are one definition pushed again and
    again, as a user pushes a workflow many times (validated and compiled once per call
    of :meth:`Engine.push_many`), unless ``distinct`` is ``"payloads"``: then every task
    of every workflow has a payload of its own, as redis.workflow's users write them, and each
    workflow is a definition of its own.
    """
    if shape not in SHAPE_NAMES:
        raise ValueError(f"unknown shape {shape!r}; choose from {', '.join(SHAPE_NAMES)}")
    if distinct not in DISTINCT:
        raise ValueError(f"unknown distinct {distinct!r}; choose from input, payloads")
    if shape == "random":
        return lambda i: random_dag(10, 0.3, seed=seed * 1_000_003 + i)
    if distinct == "payloads":

        def own(i: int) -> Workflow:
            wf = SHAPES[shape]()
            for k, t in enumerate(wf.tasks):
                t.payload = task_payload(i, k)
            return wf

        return own
    wf = SHAPES[shape]()
    return lambda i: wf


def workflow_input(i: int, size: int = 0) -> dict[str, Any]:
    """The ``i``-th workflow's input with ``--distinct``: about 105 bytes of JSON, or
    about ``size`` bytes when that is more (a ``note`` of words makes up the rest)."""
    given: dict[str, Any] = {
        "id": f"job-{i:08d}",
        "file": f"s3://uploads/2026/11/{i:08d}.csv",
        "owner": f"user{i % 997}",
        "rows": 1000 + i % 5000,
        "retry": i % 3 == 0,
    }
    room = size - len(json.dumps(given, separators=(",", ":"))) - len(',"note":""')
    if room > 0:
        words = (f"{w}{i % 10}" for w in itertools.cycle(_WORDS))
        note = ""
        while len(note) < room:
            note += next(words) + " "
        given["note"] = note[:room]
    return given


_WORDS = ("import", "orders", "from", "the", "nightly", "export", "and", "check", "totals")


def input_size(cfg: BenchConfig) -> int:
    """Bytes of the first workflow's input JSON as stored (0: no input)."""
    if cfg.distinct != "input":
        return 0
    return len(encode_input(workflow_input(0, cfg.input_bytes)).encode())


def task_payload(i: int, k: int) -> dict[str, Any]:
    """Task ``k`` of workflow ``i``'s payload with ``--distinct payloads`` (~60 bytes)."""
    return {"file": f"s3://uploads/2026/11/{i:08d}.csv", "part": k, "rows": 1000 + i % 5000}


def iter_chunks(make: Callable[[int], Workflow], total: int, size: int) -> Iterator[list[Workflow]]:
    """The workflows ``0..total-1`` in lists of ``size``, built lazily."""
    for start in range(0, total, size):
        yield [make(i) for i in range(start, min(total, start + size))]


# -- agents -------------------------------------------------------------------------------


def agent_concurrency(cfg: BenchConfig) -> int:
    """How many tasks each agent runs at once (the agent's default when not given)."""
    if cfg.concurrency is not None:
        return cfg.concurrency
    return ASYNC_CONCURRENCY if cfg.async_handlers else DEFAULT_CONCURRENCY


def agent_process(
    cfg: BenchConfig,
    index: int,
    go: Any,
    stop: Any,
    report: Any,
) -> None:
    """Body of one agent process: register, wait for ``go``, run until ``stop``."""
    from engine import Agent

    engine = Engine.connect(
        cfg.url,
        namespace=cfg.namespace,
        max_payload=cfg.max_payload,
        wait_replicas=cfg.wait_replicas,
        wait_timeout_ms=cfg.wait_timeout_ms,
    )
    handler = bench_handler(
        task_ms=cfg.task_ms,
        fail_rate=cfg.fail_rate,
        seed=cfg.seed * 7919 + index,
        io=(cfg.url, f"{cfg.namespace}:io:{index}") if cfg.task_io else None,
        is_async=cfg.async_handlers,
    )
    stamps: list[Stamp] = []
    if cfg.handler_latency:
        step = sample_step(cfg.workflows, cfg.latency_sample)
        handler = stamped(cast(Callable[[Any], Any], handler), step, stamps, engine.keys.shards)
    agent = Agent(
        engine,
        agent_id=f"demo-{os.getpid()}-{index}",
        handlers={"": handler},
        concurrency=cfg.concurrency,
        batch=cfg.claim_batch,
    )
    report.put(("ready", index, 0, 0, 0.0))
    go.wait()
    cpu = time.process_time()

    def stopper() -> None:
        stop.wait()
        agent.stop()

    threading.Thread(target=stopper, daemon=True).start()
    try:
        agent.run()
    finally:
        cpu = time.process_time() - cpu
        report.put(("done", index, agent.processed, agent.rejected, cpu, stamps))
        engine.close()


# -- measuring ----------------------------------------------------------------------------

COUNTER_FIELDS = (
    "t:pushed",
    "w:pushed",
    "t:succeeded",
    "t:failed",
    "t:skipped",
    "t:upstream_failed",
    "t:cancelled",
    "t:running",
    "t:ready",
    "t:waiting",
    "w:succeeded",
    "w:failed",
    "w:running",
)


def read_counters(r: redis.Redis, shards: list[ShardKeys]) -> dict[str, int]:
    """The stats counters summed over shards."""
    pipe = r.pipeline(transaction=False)
    for s in shards:
        pipe.hmget(s.stats, COUNTER_FIELDS)
    out = dict.fromkeys(COUNTER_FIELDS, 0)
    for row in pipe.execute():
        for name, value in zip(COUNTER_FIELDS, row, strict=True):
            out[name] += int(value or 0)
    return out


def used_memory(r: redis.Redis) -> tuple[int, int]:
    """``(used_memory, used_memory_peak)`` in bytes."""
    info = r.info("memory")
    return int(info["used_memory"]), int(info["used_memory_peak"])


def redis_cpu_seconds(r: redis.Redis) -> float | None:
    """CPU time (user + system) the Redis server has used, when it runs on this machine.

    CPU time, unlike elapsed time, barely moves when other processes compete for the
    cores, so it is the steadier measure of what each task costs Redis.
    """
    if is_cluster(r):
        by = redis_cpu_by_master(r)
        return None if by is None else sum(by.values())
    kw = r.connection_pool.connection_kwargs
    if kw.get("host") not in ("127.0.0.1", "localhost", "::1"):
        return None
    try:
        pid = int(r.info("server")["process_id"])
        proc = Path(f"/proc/{pid}")
        if not (proc / "comm").read_text().startswith("redis"):
            return None
        fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime
        return ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, KeyError, redis.RedisError):
        return None


def redis_cpu_by_master(r: redis.Redis) -> dict[str, float] | None:
    """:func:`redis_cpu_seconds` of each master (``host:port``; ``""`` for a single Redis)."""
    if not is_cluster(r):
        cpu = redis_cpu_seconds(r)
        return None if cpu is None else {"": cpu}
    out: dict[str, float] = {}
    for node in cast(Any, r).get_primaries():
        cpu = redis_cpu_seconds(node.redis_connection)
        if cpu is None:
            return None
        out[node.name] = cpu
    return out


def percentile(values: list[float], p: float) -> float | None:
    """The ``p``-th percentile (nearest rank) of ``values``, or None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(round(p / 100.0 * len(ordered) + 0.5)) - 1))
    return ordered[rank]


class Monitor(threading.Thread):
    """Polls counters and memory until told to stop; tracks the memory peak."""

    def __init__(self, r: redis.Redis, shards: list[ShardKeys]) -> None:
        super().__init__(name="rf-bench-monitor", daemon=True)
        self.r = r
        self.shards = shards
        self.counters = read_counters(r, shards)
        self.peak = 0
        self.halt = threading.Event()
        self.changed = threading.Event()

    def sample_memory(self) -> int:
        used, _ = used_memory(self.r)
        self.peak = max(self.peak, used)
        return used

    def run(self) -> None:
        last_mem = 0.0
        while not self.halt.wait(POLL_S):
            try:
                self.counters = read_counters(self.r, self.shards)
                self.changed.set()
                now = time.monotonic()
                if now - last_mem >= 0.1:
                    self.sample_memory()
                    last_mem = now
            except redis.RedisError:
                continue


def delta(now: dict[str, int], base: dict[str, int]) -> dict[str, int]:
    return {k: now[k] - base.get(k, 0) for k in now}


def recount(engine: Engine, wids: list[str]) -> dict[str, Any]:
    """Read every pushed workflow back: states of workflows and tasks, attempts run."""
    r = engine.redis
    wstates: dict[str, int] = {}
    tstates: dict[str, int] = {}
    attempts = 0
    tasks = 0
    step = 2000
    sizes: dict[str, int] = {}
    for start in range(0, len(wids), step):
        chunk = wids[start : start + step]
        pipe = r.pipeline(transaction=False)
        for wid in chunk:
            pipe.hget(engine.keys.shard_of(wid).workflow(wid), "n")
        ns = pipe.execute()
        pipe = r.pipeline(transaction=False)
        for wid, n in zip(chunk, ns, strict=True):
            count = int(n or 0)
            sizes[wid] = count
            fields = ["st"] + [str(i) for i in range(count)]  # each task's record
            pipe.hmget(engine.keys.shard_of(wid).workflow(wid), fields)
        for wid, row in zip(chunk, pipe.execute(), strict=True):
            count = sizes[wid]
            st = row[0] or "missing"
            wstates[st] = wstates.get(st, 0) + 1
            tasks += count
            for rec in row[1:]:
                state, tried = task_record(rec)[:2]
                tstates[state] = tstates.get(state, 0) + 1
                attempts += int(tried or 0)
    return {"workflows": wstates, "tasks": tstates, "attempts": attempts, "total_tasks": tasks}


def sample_latency(engine: Engine, wids: list[str], sample: int) -> list[float]:
    """Ready-to-start delays in ms, from ``engine.status`` of evenly spaced workflows."""
    if not wids or sample <= 0:
        return []
    step = max(1, len(wids) // sample)
    out: list[float] = []
    for wid in wids[::step][:sample]:
        for t in engine.status(wid).tasks:
            if t.ready_at is not None and t.started_at is not None:
                out.append((t.started_at - t.ready_at) * 1000.0)
    return out


# -- the run ------------------------------------------------------------------------------

ProgressFn = Callable[[str, int, int], None]


def _noop_progress(phase: str, done: int, total: int) -> None:
    return None


def run_bench(
    cfg: BenchConfig,
    engine: Engine,
    progress: ProgressFn = _noop_progress,
) -> BenchResult:
    """Run one benchmark on ``engine`` (already connected and, if wanted, flushed)."""
    # Agents connect as this engine does: its full URL, credentials and TLS files included
    # (engine.url is the printable form, without them).
    url = url_of(engine.redis)
    agent_cfg = replace(cfg, url=url)
    r = open_client(url, decode_responses=True)
    shards = engine.keys.all_shards()
    make = shape_factory(cfg.shape, cfg.seed, cfg.distinct)
    tasks_total = (
        sum(len(make(i)) for i in range(cfg.workflows))
        if cfg.shape == "random"
        else (len(make(0)) * cfg.workflows)
    )

    ctx = mp.get_context("spawn")
    go, stop = ctx.Event(), ctx.Event()
    report: Any = ctx.Queue()
    t_spawn = time.monotonic()
    procs = [
        ctx.Process(target=agent_process, args=(agent_cfg, i, go, stop, report), daemon=True)
        for i in range(cfg.agents)
    ]
    for p in procs:
        p.start()
    processed = rejected = 0
    done_agents = 0
    agents_cpu = 0.0
    stamps: list[Stamp] = []
    try:
        ready = 0
        while ready < cfg.agents:
            kind, *_ = report.get(timeout=60)
            ready += kind == "ready"
        agents_start_s = time.monotonic() - t_spawn

        base_counters = read_counters(r, shards)
        baseline, peak_before = used_memory(r)
        redis_cpu_before = redis_cpu_by_master(r)
        monitor = Monitor(r, shards)
        monitor.peak = baseline
        monitor.start()

        wids: list[str] = []
        push_cpu = time.thread_time()
        t0 = time.monotonic()
        if cfg.phases == "overlap":
            go.set()
        run_start = t0
        chunk_size = PUSH_CHUNK if cfg.rate <= 0 else max(1, int(cfg.rate * RATE_TICK_S))
        for chunk in iter_chunks(make, cfg.workflows, chunk_size):
            if cfg.rate > 0:  # this chunk's turn: as many as the rate allows by now
                time.sleep(max(0.0, t0 + len(wids) / cfg.rate - time.monotonic()))
            inputs = None
            if cfg.distinct == "input":
                at = len(wids)
                inputs = [workflow_input(at + k, cfg.input_bytes) for k in range(len(chunk))]
            wids.extend(engine.push_many(chunk, inputs=inputs))
            progress("push", len(wids), cfg.workflows)
            if cfg.phases == "overlap":
                _report_run(monitor, base_counters, tasks_total, progress)
        t_push = time.monotonic()
        push_cpu = time.thread_time() - push_cpu
        pushed_mem: int | None = None
        if cfg.phases == "split":
            pushed_mem = monitor.sample_memory()
            run_start = time.monotonic()
            go.set()

        deadline = t0 + cfg.timeout_s
        while True:
            d = delta(monitor.counters, base_counters)
            _report_run(monitor, base_counters, tasks_total, progress)
            if d["w:succeeded"] + d["w:failed"] >= cfg.workflows:
                break
            if time.monotonic() > deadline:
                break
            if not any(p.is_alive() for p in procs):
                break
            monitor.changed.wait(0.5)
            monitor.changed.clear()
        t_end = time.monotonic()
        monitor.halt.set()
        monitor.join()
        final = delta(read_counters(r, shards), base_counters)
        progress("run", _finished_tasks(final), tasks_total)
        redis_cpu_after = redis_cpu_by_master(r)
        used_end, peak_end = used_memory(r)
        peak = max(monitor.peak, used_end)
        if peak_end > peak_before:
            peak = max(peak, peak_end)
    finally:
        stop.set()
        go.set()
        deadline_join = time.monotonic() + 30
        while done_agents < len(procs) and time.monotonic() < deadline_join:
            try:
                kind, _, n_ok, n_rej, cpu_s, *more = report.get(timeout=1)
            except queue.Empty:
                if not any(p.is_alive() for p in procs):
                    break
                continue
            if kind == "done":
                done_agents += 1
                processed += n_ok
                rejected += n_rej
                agents_cpu += cpu_s
                stamps += more[0] if more else []
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
    redis_cpu = split = None
    if redis_cpu_before is not None and redis_cpu_after is not None:
        used = {n: redis_cpu_after[n] - redis_cpu_before.get(n, 0.0) for n in redis_cpu_after}
        redis_cpu = sum(used.values())
        if is_cluster(r):
            split = {n: round(100 * v / max(redis_cpu, 1e-9), 1) for n, v in sorted(used.items())}

    counted = recount(engine, wids)
    lat = sample_latency(engine, wids, cfg.latency_sample)
    dispatch, steps = handler_latency(engine, stamps)
    problems = _check(cfg, tasks_total, wids, final, counted, processed, rejected, done_agents)
    push_s = t_push - t0
    run_s = t_end - run_start
    total_s = t_end - t0
    info = r.info("server")
    r.close()
    return BenchResult(
        shape=cfg.shape,
        workflows=cfg.workflows,
        tasks=tasks_total,
        agents=cfg.agents,
        push_s=round(push_s, 3),
        run_s=round(run_s, 3),
        total_s=round(total_s, 3),
        workflows_pushed_per_s=round(cfg.workflows / push_s, 1) if push_s > 0 else 0.0,
        tasks_per_s=round(tasks_total / run_s, 1) if run_s > 0 else 0.0,
        redis_peak_mb=round(peak / 1e6, 2),
        bytes_per_task=round((peak - baseline) / max(1, tasks_total), 1),
        latency_p50_ms=_round(percentile(lat, 50)),
        latency_p99_ms=_round(percentile(lat, 99)),
        ok=not problems,
        phases=cfg.phases,
        task_ms=cfg.task_ms,
        fail_rate=cfg.fail_rate,
        distinct=cfg.distinct,
        input_bytes=input_size(cfg),
        task_io=cfg.task_io,
        async_handlers=cfg.async_handlers,
        concurrency=agent_concurrency(cfg),
        drain_s=round(t_end - t_push, 3),
        agents_start_s=round(agents_start_s, 3),
        redis_baseline_mb=round(baseline / 1e6, 2),
        redis_pushed_mb=None if pushed_mem is None else round(pushed_mem / 1e6, 2),
        bytes_per_task_pushed=(
            None if pushed_mem is None else round((pushed_mem - baseline) / max(1, tasks_total), 1)
        ),
        latency_sampled_tasks=len(lat),
        dispatch_p50_ms=_round(percentile(dispatch, 50)),
        dispatch_p99_ms=_round(percentile(dispatch, 99)),
        step_p50_ms=_round(percentile(steps, 50)),
        step_p99_ms=_round(percentile(steps, 99)),
        handler_sampled_tasks=len(stamps),
        rate=cfg.rate,
        succeeded=counted["tasks"].get("succeeded", 0),
        failed=counted["tasks"].get("failed", 0),
        skipped=counted["tasks"].get("skipped", 0),
        upstream_failed=counted["tasks"].get("upstream_failed", 0),
        processed=processed,
        rejected=rejected,
        redis_version=str(info.get("redis_version", "")),
        push_cpu_s=round(push_cpu, 3),
        agents_cpu_s=round(agents_cpu, 3),
        redis_cpu_s=None if redis_cpu is None else round(redis_cpu, 3),
        redis_cpu_split=split,
        agent_us_per_task=round(agents_cpu / max(1, tasks_total) * 1e6, 1),
        redis_us_per_task=(
            None if redis_cpu is None else round(redis_cpu / max(1, tasks_total) * 1e6, 1)
        ),
        problems=problems,
    )


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 2)


def _finished_tasks(d: dict[str, int]) -> int:
    return (
        d["t:succeeded"]
        + d["t:failed"]
        + d["t:skipped"]
        + d["t:upstream_failed"]
        + d["t:cancelled"]
    )


def _report_run(monitor: Monitor, base: dict[str, int], total: int, progress: ProgressFn) -> None:
    progress("run", _finished_tasks(delta(monitor.counters, base)), total)


def _check(
    cfg: BenchConfig,
    tasks_total: int,
    wids: list[str],
    d: dict[str, int],
    counted: dict[str, Any],
    processed: int,
    rejected: int,
    done_agents: int,
) -> list[str]:
    """Every way the run could be wrong, as messages (empty when all is well)."""
    problems: list[str] = []

    def expect(what: str, got: Any, want: Any) -> None:
        if got != want:
            problems.append(f"{what}: {got} != {want}")

    expect("workflows pushed", len(wids), cfg.workflows)
    expect("tasks read back", counted["total_tasks"], tasks_total)
    expect("counter w:pushed", d["w:pushed"], cfg.workflows)
    expect("counter t:pushed", d["t:pushed"], tasks_total)
    ws, ts = counted["workflows"], counted["tasks"]
    for state in ("running", "ready", "waiting"):
        expect(f"counter t:{state}", d[f"t:{state}"], 0)
        expect(f"tasks {state}", ts.get(state, 0), 0)
    expect("counter w:running", d["w:running"], 0)
    for state in ("succeeded", "failed", "skipped", "upstream_failed"):
        expect(f"counter t:{state} vs recount", d[f"t:{state}"], ts.get(state, 0))
    for state in ("succeeded", "failed"):
        expect(f"counter w:{state} vs recount", d[f"w:{state}"], ws.get(state, 0))
    finished = ws.get("succeeded", 0) + ws.get("failed", 0)
    expect("workflows finished", finished, cfg.workflows)
    ran = ts.get("succeeded", 0) + ts.get("failed", 0)
    expect("attempts recorded vs tasks run", counted["attempts"], ran)
    expect("agents reported", done_agents, cfg.agents)
    expect("outcomes recorded by agents", processed, ran)
    expect("outcomes rejected", rejected, 0)
    if cfg.fail_rate == 0:
        expect("tasks succeeded", ts.get("succeeded", 0), tasks_total)
        expect("workflows succeeded", ws.get("succeeded", 0), cfg.workflows)
    return problems
