"""A deployment that moves at once: agents and a stream of demo workflows.

``redisflow-tui --demo`` starts, next to the console, a few agent processes and one
process pushing workflows of several shapes. Tasks sleep a little so a graph visibly
fills in; some fail and succeed on a retry, a few fail for good (retrying such a
workflow from the console makes them pass: the attempt number keeps counting); once
in a while a big fan-out of 300 tasks shows the grouped view. One agent dies now and
then and comes back under the same id, so the Agents screen shows stale and dead.

Each piece also runs on its own::

    REDISFLOW_URL=redis://... python -m demos.console_demo push --rate 2 --task-ms 100:700
    REDISFLOW_URL=redis://... python -m demos.console_demo agent --id agent-a --type io
"""

from __future__ import annotations

import argparse
import ctypes
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis

from engine import Agent, Engine, Task, Workflow
from engine.connect.urls import open_client
from engine.schedules.scheduler import SchedulerThread

from . import shapes

TYPES = ("", "io", "cpu")
AGENTS = (
    ("agent-a", ("", "io"), 6),
    ("agent-b", ("", "cpu"), 6),
    ("agent-c", ("io", "cpu"), 4),
)
TASK_MS = (100, 700)  # how long a demo task sleeps, at least and at most
FLAKY = "agent-c"  # dies now and then, and comes back under the same id


def demo_handler(task: Task) -> Any:
    """Sleep ``ms``, fail while ``attempt <= fail``, else return a small output."""
    payload = task.payload if isinstance(task.payload, dict) else {}
    ms = float(payload.get("ms", 0))
    if ms:
        time.sleep(ms / 1000.0)
    if task.attempt <= int(payload.get("fail", 0)):
        raise ConnectionResetError(
            f"upstream {payload.get('upstream', 'api')} reset the connection "
            f"(attempt {task.attempt})"
        )
    return {"rows": random.randint(10, 5000), "attempt": task.attempt, "ms": round(ms)}


def ml_pipeline(rng: random.Random) -> Workflow:
    """A training pipeline: load, clean in parallel, features, models, evaluate, publish."""
    wf = Workflow("ml-train")
    load = wf.task("load-data")
    clean = [wf.task(f"clean-{s}", after=[load]) for s in ("events", "users")]
    features = wf.task("features", after=clean)
    models = rng.sample(["xgboost", "lightgbm", "mlp", "linear"], k=rng.randint(2, 4))
    trained = [wf.task(f"train-{m}", after=[features]) for m in models]
    evaluate = wf.task("evaluate", after=trained)
    report = wf.task("drift-report", after=[features])
    wf.task("publish", after=[evaluate, report])
    return wf


def demo_workflow(rng: random.Random, seq: int, task_ms: tuple[int, int] = TASK_MS) -> Workflow:
    """One demo workflow of a random shape, with task types, timings and failures."""
    roll = rng.random()
    big = seq % 40 == 7  # a wide fan-out of short tasks: the grouped view
    if big:
        wf = shapes.fan(300, name="shard-scan")
    elif roll < 0.25:
        wf = shapes.diamond4(name="etl-diamond")
    elif roll < 0.45:
        wf = shapes.chain(9, name="nightly-etl")
    elif roll < 0.7:
        wf = shapes.fan(8, name="fanout-report")
    elif roll < 0.9:
        wf = ml_pipeline(rng)
    else:
        size, seed = rng.randint(5, 8), rng.randint(0, 10**6)
        wf = shapes.random_dag(size, 0.3, seed=seed, name="adhoc")
    doomed = rng.random() < 0.12  # this one fails for good (until retried)
    victim = rng.randrange(len(wf.tasks)) if doomed else -1
    for i, t in enumerate(wf.tasks):
        t.type = rng.choice(TYPES)
        t.max_attempts = 3
        fail = 0
        if i == victim:
            fail = 3
        elif rng.random() < 0.06:
            fail = rng.choice((1, 2))
        t.payload = {
            "ms": rng.randint(*task_ms) // (5 if big else 1),
            "fail": fail,
            "upstream": rng.choice(("s3", "postgres", "billing-api", "geo-service")),
        }
    wf.retry_backoff = 0.5
    return wf


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def connect(url: str, namespace: str = "rf") -> Engine:
    """An engine on ``url`` (no embedded fallback: the demo always has a server)."""
    client = open_client(url, decode_responses=True)  # timeouts: engine.connect.urls
    return Engine(client, namespace=namespace)


REPORT = Path(__file__).with_name("report.yaml")


def put_demo_schedules(engine: Engine) -> None:
    """The demo's schedules: the nightly report template every 20 s (one at a time, the
    next tick skipped while one runs), and a cron one every minute. The agents with a
    scheduler fire them."""
    from engine.schedules import parse_schedule

    engine.put_template(REPORT.read_text(encoding="utf-8"), name="nightly-report")
    for spec in (
        {"name": "report-every-20s", "every": "20s", "input": {"region": "eu"}},
        {"name": "report-each-minute", "cron": "* * * * *", "timezone": "Europe/Paris",
         "overlap": "allow_all", "jitter": "5s"},
    ):  # fmt: skip
        engine.put_schedule(parse_schedule({"template": "nightly-report", **spec}))


def run_pusher(url: str, rate: float, namespace: str, task_ms: tuple[int, int], limit: int) -> None:
    """Push demo workflows at ``rate`` per second until killed (or ``limit`` pushed)."""
    engine = connect(url, namespace)
    try:
        put_demo_schedules(engine)
    except redis.RedisError:
        pass  # the workflows go on without them
    rng = random.Random(42)
    seq = 0
    period = 1.0 / rate
    next_at = time.monotonic()
    while limit <= 0 or seq < limit:
        batch: list[Workflow] = []
        now = time.monotonic()
        while next_at <= now and len(batch) < 256:
            batch.append(demo_workflow(rng, seq, task_ms))
            seq += 1
            next_at += period
        if batch:
            try:
                engine.push_many(batch)
            except redis.RedisError:
                time.sleep(1.0)
                next_at = time.monotonic()
        time.sleep(max(0.0, min(next_at - time.monotonic(), 0.5)))


def run_agent(
    url: str,
    agent_id: str,
    types: Sequence[str],
    concurrency: int,
    namespace: str,
    die_after: float,
    scheduler: bool = False,
) -> None:
    """Run one demo agent; with ``die_after`` it vanishes abruptly after that long; with
    ``scheduler`` it fires the schedules' ticks too."""
    engine = connect(url, namespace)
    agent = Agent(
        engine,
        agent_id,
        {t: demo_handler for t in types},
        concurrency=concurrency,
        lease_s=15.0,
        side=[SchedulerThread(engine, agent_id)] if scheduler else (),
    )
    if die_after > 0:
        threading.Timer(die_after, lambda: os._exit(1)).start()
    agent.run()


class Demo:
    """The demo's processes, started and stopped with the console.

    Args:
        url: the Redis to use.
        rate: workflows pushed per second.
        task_ms: how long tasks sleep, at least and at most (``(0, 0)``: a load generator
            rather than a show).
        flaky: one agent dies now and then and comes back.
    """

    def __init__(
        self,
        url: str,
        *,
        rate: float = 1.0,
        namespace: str = "rf",
        task_ms: tuple[int, int] = TASK_MS,
        flaky: bool = True,
        agents: Sequence[tuple[str, Sequence[str], int]] = AGENTS,
    ) -> None:
        self.url = url
        self.rate = rate
        self.namespace = namespace
        self.task_ms = task_ms
        self.flaky = flaky
        self.agents = agents
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._stop = threading.Event()
        self._supervisor: threading.Thread | None = None

    def _spawn(self, name: str, args: list[str]) -> None:
        cmd = [sys.executable, "-m", "demos.console_demo", *args]
        cmd += ["--namespace", self.namespace]
        # the URL (credentials and all) by environment: a command line shows in ps
        self.processes[name] = subprocess.Popen(
            cmd,
            env={**os.environ, "REDISFLOW_URL": self.url},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )

    def _spawn_agent(self, agent_id: str, types: Sequence[str], concurrency: int) -> None:
        args = ["agent", "--id", agent_id, "--concurrency", str(concurrency)]
        for t in types:
            args += ["--type", t]
        if self.flaky and agent_id == FLAKY:
            args += ["--die-after", str(random.uniform(40, 70))]
        else:
            args.append("--scheduler")  # two schedulers: each tick still runs once
        self._spawn(agent_id, args)

    def start(self) -> Demo:
        """Start the agents, the pusher, and the supervisor that revives the flaky agent."""
        for agent_id, types, concurrency in self.agents:
            self._spawn_agent(agent_id, types, concurrency)
        push = ["push", "--rate", str(self.rate)]
        push += ["--task-ms", f"{self.task_ms[0]}:{self.task_ms[1]}"]
        self._spawn("pusher", push)
        self._supervisor = threading.Thread(target=self._supervise, daemon=True)
        self._supervisor.start()
        return self

    def _supervise(self) -> None:
        while not self._stop.wait(1.0):
            for agent_id, types, concurrency in self.agents:
                proc = self.processes.get(agent_id)
                if proc is not None and proc.poll() is not None:
                    # gone: come back after the lease expired, so it is seen dead first
                    self.processes.pop(agent_id)
                    threading.Timer(25.0, self._revive, args=(agent_id, types, concurrency)).start()

    def _revive(self, agent_id: str, types: Sequence[str], concurrency: int) -> None:
        if not self._stop.is_set():
            self._spawn_agent(agent_id, types, concurrency)

    def stop(self) -> None:
        """Stop every demo process (agents get two seconds to finish their tasks)."""
        self._stop.set()
        procs = list(self.processes.values())
        for p in procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 2  # then killed: their tasks are handed on
        for p in procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.processes.clear()


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m demos.console_demo push|agent ...``."""
    p = argparse.ArgumentParser(prog="python -m demos.console_demo")
    sub = p.add_subparsers(dest="cmd", required=True)
    push = sub.add_parser("push", help="push demo workflows")
    push.add_argument("--rate", type=float, default=1.0, help="workflows per second")
    push.add_argument("--task-ms", default="100:700", help="task sleep, MIN:MAX milliseconds")
    push.add_argument("--limit", type=int, default=0, help="stop after this many")
    agent = sub.add_parser("agent", help="run a demo agent")
    agent.add_argument("--id", required=True)
    agent.add_argument("--type", action="append", dest="types")
    agent.add_argument("--concurrency", type=int, default=4)
    agent.add_argument("--die-after", type=float, default=0.0)
    agent.add_argument("--scheduler", action="store_true", help="fire schedules' ticks too")
    for sp in (push, agent):
        sp.add_argument("--url", default=os.environ.get("REDISFLOW_URL"), required=False)
        sp.add_argument("--namespace", default="rf")
    args = p.parse_args(argv)
    if not args.url:
        p.error("--url or REDISFLOW_URL is required")
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        if args.cmd == "push":
            low, _, high = args.task_ms.partition(":")
            task_ms = (int(low), int(high or low))
            run_pusher(args.url, args.rate, args.namespace, task_ms, args.limit)
        else:
            run_agent(
                args.url,
                args.id,
                args.types or [""],
                args.concurrency,
                args.namespace,
                args.die_after,
                args.scheduler,
            )
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
