"""The waits benchmark: approval gates signalled by another process, and parents that call
a child run per item.

``redisflow-demo --shape waits -w W`` pushes W runs of ``gated``: ``prepare`` -> ``approve``
(a wait for signal ``approve``) -> four ``run: child`` tasks, each a child run of a
two-task template, -> ``done``. Agent processes run the handlers (their wait keepers start
and report the child runs) while a separate process sends one signal per run as soon as
its gate is reached (by the run's idempotency key, as an outside system would). Figures:
signals applied per second (from the first signal to the last, in the sender), child runs
per second (from the first signal to the last parent's end), the whole run's time, Redis
CPU per run, and that every run succeeded with its children's results.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from engine import Agent, Engine, Task, Workflow

from .bench import redis_cpu_seconds

CHILD = "name: child\ntasks:\n  - name: fetch\n  - name: score\n    after: [fetch]\n"
CHILDREN = 4


@dataclass
class WaitsResult:
    """What one run measured."""

    workflows: int
    agents: int
    children: int
    signals_per_s: float
    child_runs_per_s: float
    total_s: float
    redis_us_per_run: float | None
    succeeded: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def gated() -> Workflow:
    """prepare -> approve (signal) -> 4 child runs -> done."""
    wf = Workflow("gated")
    prep = wf.task("prepare")
    gate = wf.task("approve", after=[prep], wait={"signal": "approve", "timeout": "1h"})
    kids = [
        wf.task(f"child{k}", after=[gate], run={"template": "child", "input": {"k": k}})
        for k in range(CHILDREN)
    ]
    wf.task("done", after=kids)
    return wf


def handler(task: Task) -> Any:
    if task.name == "score":
        return {"k": (task.input or {}).get("k"), "score": 1}
    if task.name == "done":
        return sum(out["score"] for out in task.parents.values())
    return None


def _agent(url: str, namespace: str, index: int, stop: Any) -> None:
    engine = Engine.connect(url, namespace=namespace)
    agent = Agent(engine, f"waits-bench-{index}", {"": handler}, maintain_s=0.5)
    threading.Thread(target=lambda: (stop.wait(), agent.stop()), daemon=True).start()
    try:
        agent.run()
    finally:
        engine.close()


def _signaller(url: str, namespace: str, n: int, out: Any) -> None:
    """Signal each run by its key once its gate is reached (kept if earlier: never lost)."""
    engine = Engine.connect(url, namespace=namespace)
    try:
        began = time.monotonic()
        for k in range(n):
            engine.signal(None, "approve", {"ok": True}, key=f"order-{k}", signal_id=f"ok-{k}")
        out.put((began, time.monotonic()))
    finally:
        engine.close()


def run_waits_bench(engine: Engine, workflows: int, agents: int = 2, url: str = "") -> WaitsResult:
    """Push ``workflows`` gated runs and run them with ``agents`` processes and a signaller."""
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    url = url or engine.url
    ns = engine.keys.namespace
    engine.put_template(CHILD)
    procs = [ctx.Process(target=_agent, args=(url, ns, i, stop)) for i in range(agents)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + 60
    while sum(a.state == "online" for a in engine.agents()) < agents:
        if time.monotonic() > deadline:
            raise RuntimeError("the benchmark's agents did not start within 60 s")
        time.sleep(0.05)
    cpu_before = redis_cpu_seconds(engine.redis)
    began = time.monotonic()
    wf = engine.compile(gated())
    from engine.spec.flow import RunRequest

    ids = [
        p.id for p in engine.push_runs([RunRequest(wf, key=f"order-{k}") for k in range(workflows)])
    ]
    times = ctx.Queue()
    sender = ctx.Process(target=_signaller, args=(url, ns, workflows, times))
    sender.start()
    sent_from, sent_to = times.get(timeout=3600)
    sender.join(30)
    for wid in ids:  # in push order: most end in that order
        while not engine.state(wid).finished:
            time.sleep(0.05)
    ended = time.monotonic()
    cpu_after = redis_cpu_seconds(engine.redis)
    stop.set()
    for p in procs:
        p.join(30)
    succeeded = sum(engine.status(w).task("done").output == CHILDREN for w in ids[:200])
    succeeded += sum(engine.state(w) == "succeeded" for w in ids[200:])
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return WaitsResult(
        workflows=workflows,
        agents=agents,
        children=CHILDREN,
        signals_per_s=round(workflows / max(sent_to - sent_from, 1e-9), 1),
        child_runs_per_s=round(workflows * CHILDREN / max(ended - sent_from, 1e-9), 1),
        total_s=round(ended - began, 2),
        redis_us_per_run=None if cpu is None else round(cpu * 1e6 / max(workflows, 1), 1),
        succeeded=succeeded,
    )


__all__ = ["WaitsResult", "gated", "handler", "run_waits_bench"]
