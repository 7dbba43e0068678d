"""The fan-out benchmark: one workflow, ``split`` -> N items (a map) -> ``gather``.

``redisflow-demo --shape map --items N`` runs it: agent processes run no-op items while
this process samples Redis's memory and the ready queue's depth, so the figures show
what a big map costs: time end to end, Redis bytes per item at the peak, and that the
ready queue never holds more than the map's window.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from engine import Agent, Engine, Task, Workflow

from .bench import redis_cpu_seconds


@dataclass
class MapResult:
    """What one run measured."""

    items: int
    window: int
    agents: int
    element_bytes: int
    total_s: float
    items_per_s: float
    redis_baseline_mb: float
    redis_peak_mb: float
    bytes_per_item: float
    max_ready: int
    redis_us_per_item: float | None
    state: str
    gathered: Any

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def map_workflow(items: int, window: int, element_bytes: int = 0) -> Workflow:
    """split -> count (one item per element, ``window`` at a time) -> gather; elements
    are numbers, or objects of about ``element_bytes`` bytes of JSON."""
    wf = Workflow("map-bench")
    split = wf.task("split", payload=[items, element_bytes] if element_bytes else items)
    count = wf.task("count", map=split, concurrency=window, max_items=max(items, 1))
    wf.task("gather", after=[count])
    return wf


def handler(task: Task) -> Any:
    """split lists the items, each item does nothing, gather says how many it got."""
    if task.name == "split":
        if isinstance(task.payload, list):
            return [element(k, task.payload[1]) for k in range(task.payload[0])]
        return list(range(int(task.payload)))
    if task.name == "count":
        return None
    out = task.parents["count"]
    return {"items": out["items"]} if isinstance(out, dict) else {"items": len(out)}


def element(k: int, size: int) -> dict[str, Any]:
    """Element ``k`` of about ``size`` bytes of JSON."""
    given: dict[str, Any] = {"k": k, "file": f"s3://uploads/2026/11/{k:08d}.csv"}
    room = size - len(json.dumps(given, separators=(",", ":"))) - len(',"note":""')
    if room > 0:
        given["note"] = ("part of the nightly export " * (room // 27 + 1))[:room]
    return given


def _agent(url: str, namespace: str, index: int, max_payload: int, stop: Any) -> None:
    engine = Engine.connect(url, namespace=namespace, max_payload=max_payload)
    agent = Agent(engine, f"map-bench-{index}", {"": handler})
    threading.Thread(target=lambda: (stop.wait(), agent.stop()), daemon=True).start()
    try:
        agent.run()
    finally:
        engine.close()


def run_map_bench(
    engine: Engine,
    items: int,
    window: int = 1000,
    agents: int = 2,
    url: str | None = None,
    element_bytes: int = 0,
) -> MapResult:
    """Push one map workflow of ``items`` items and run it with ``agents`` processes."""
    r = engine.redis
    shard = engine.keys.shard(0)
    # split's output
    max_payload = max(engine.max_payload, (16 + element_bytes) * items + 1024)
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    procs = [
        ctx.Process(
            target=_agent, args=(url or engine.url, engine.keys.namespace, i, max_payload, stop)
        )
        for i in range(agents)
    ]
    for p in procs:
        p.start()
    deadline = time.monotonic() + 60
    while sum(a.state == "online" for a in engine.agents()) < agents:  # started and registered
        if time.monotonic() > deadline:
            raise RuntimeError("the benchmark's agents did not start within 60 s")
        time.sleep(0.05)
    baseline = int(r.info("memory")["used_memory"])
    cpu_before = redis_cpu_seconds(r)
    peak, max_ready = baseline, 0
    began = time.monotonic()
    wid = engine.push(map_workflow(items, window, element_bytes))
    state = "running"
    while state == "running":
        time.sleep(0.1)
        peak = max(peak, int(r.info("memory")["used_memory"]))
        max_ready = max(max_ready, int(r.zcard(shard.queue(""))))
        state = engine.state(wid).value
    total = time.monotonic() - began
    cpu_after = redis_cpu_seconds(r)
    stop.set()
    for p in procs:
        p.join(30)
    gathered = engine.status(wid).task("gather").output
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return MapResult(
        items=items,
        window=window,
        agents=agents,
        element_bytes=element_bytes,
        total_s=round(total, 2),
        items_per_s=round(items / total, 1) if total else 0.0,
        redis_baseline_mb=round(baseline / 1e6, 2),
        redis_peak_mb=round(peak / 1e6, 2),
        bytes_per_item=round((peak - baseline) / max(items, 1), 1),
        max_ready=max_ready,
        redis_us_per_item=None if cpu is None else round(cpu * 1e6 / max(items, 1), 1),
        state=state,
        gathered=gathered,
    )


def main() -> None:
    """``python -m demos.map_bench ITEMS [WINDOW]`` on a private Redis."""
    import json
    import sys

    items = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    window = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    with Engine.connect() as engine:
        url = f"redis://127.0.0.1:{engine.redis.connection_pool.connection_kwargs['port']}/0"
        print(json.dumps(run_map_bench(engine, items, window, url=url).to_dict()))


if __name__ == "__main__":
    main()

__all__ = ["MapResult", "handler", "map_workflow", "run_map_bench"]
