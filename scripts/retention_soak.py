"""Retention under a steady load: fan10 runs pushed at a fixed rate, each kept ``--ttl``
seconds after it ends, agents running them; every ``--every`` seconds Redis's memory, the
finished runs kept and the backlog (runs past their retention not removed yet) are
sampled. Once the first retention period is over, removals match arrivals: the runs kept
and the memory level off (the run's verdict compares the growth over the second half of
what follows the first period with the first half).

    python scripts/retention_soak.py --rate 500 --seconds 180 --ttl 30 --agents 2

Not part of the test suite: it holds the machine for ``--seconds``. With ``--url`` it uses
that Redis (flushed first!); otherwise a redis-server of its own.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time
from typing import Any

import redis

from demos.shapes import fan10
from engine import Agent, EmbeddedRedis, Engine
from engine.store.reads import FINISHED_STATES


def agent_process(url: str, index: int, stop: Any) -> None:
    """One agent running no-op handlers until ``stop`` is set."""
    import threading

    engine = Engine.connect(url)
    agent = Agent(engine, f"soak-{os.getpid()}-{index}", {"": lambda task: None})
    threading.Thread(target=lambda: (stop.wait(), agent.stop()), daemon=True).start()
    agent.run()
    engine.close()


def sample(engine: Engine) -> dict[str, int]:
    """Memory, finished runs kept, and runs past their own retention not removed yet."""
    r = engine.redis
    now_ms = int(engine.server_time() * 1000)
    kept = due = 0
    for shard in engine.keys.all_shards():
        kept += sum(int(r.zcard(shard.by_state(s))) for s in FINISHED_STATES)
        due += int(r.zcount(shard.expire, "-inf", now_ms))
    return {"memory": int(r.info("memory")["used_memory"]), "kept": kept, "backlog": due}


def growth(rows: list[tuple[float, dict[str, int]]], key: str) -> float:
    """Least-squares slope of ``key`` per second over ``rows``."""
    if len(rows) < 2:
        return 0.0
    ts = [t for t, _ in rows]
    vs = [float(v[key]) for _, v in rows]
    mt, mv = sum(ts) / len(ts), sum(vs) / len(vs)
    den = sum((t - mt) ** 2 for t in ts)
    return sum((t - mt) * (v - mv) for t, v in zip(ts, vs, strict=True)) / den if den else 0.0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rate", type=float, default=500.0, help="fan10 runs pushed per second")
    p.add_argument("--seconds", type=float, default=180.0)
    p.add_argument("--ttl", type=float, default=30.0, help="each run's own retention (s)")
    p.add_argument("--agents", type=int, default=2)
    p.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    p.add_argument("--url", help="a Redis to use (FLUSHED first); default: one of its own")
    args = p.parse_args()

    server = None if args.url else EmbeddedRedis().start()
    url = args.url if server is None else server.url
    redis.Redis.from_url(url).flushall()
    engine = Engine.connect(url)
    stop = mp.Event()
    procs = [mp.Process(target=agent_process, args=(url, i, stop)) for i in range(args.agents)]
    for proc in procs:
        proc.start()
    wf = fan10()
    wf.ttl = args.ttl
    tick = 0.1
    pushed = 0
    rows: list[tuple[float, dict[str, int]]] = []
    start = time.monotonic()
    next_sample = start
    print(f"{'s':>5} {'pushed':>8} {'kept':>8} {'backlog':>8} {'memory MB':>10}")
    try:
        while (now := time.monotonic()) - start < args.seconds:
            due = int((now - start) * args.rate) - pushed  # steady: catch up what is due
            if due > 0:
                engine.push_many([wf] * due)
                pushed += due
            if now >= next_sample:
                row = sample(engine)
                rows.append((now - start, row))
                mb = row["memory"] / 1e6
                print(
                    f"{now - start:5.0f} {pushed:8d} {row['kept']:8d} {row['backlog']:8d} "
                    f"{mb:10.1f}",
                    flush=True,
                )
                next_sample += args.every
            time.sleep(max(0.0, tick - (time.monotonic() - now)))
    finally:
        stop.set()
        for proc in procs:
            proc.join(30)
        engine.close()
        if server is not None:
            server.stop()
    elapsed = time.monotonic() - start
    after = [row for row in rows if row[0] >= args.ttl + args.every]  # first period over
    half = len(after) // 2
    print(f"pushed {pushed} runs in {elapsed:.0f} s ({pushed / elapsed:.0f} runs/s)")
    for name, part in (("first", after[:half]), ("second", after[half:])):
        if len(part) >= 2:
            mem = growth(part, "memory") * 30 / 1e6
            kept = growth(part, "kept")
            print(
                f"{name} half after the first period ({part[0][0]:.0f}-{part[-1][0]:.0f} s): "
                f"memory {mem:+.2f} MB per 30 s, runs kept {kept:+.1f} per s"
            )


if __name__ == "__main__":
    main()
