"""How long moving a shard blocks its master: one shard of ``--workflows`` workflows on a
local 3-master Redis Cluster, moved to another master and back.

The move is one script on the source master (``engine/store/shard_moves.py``): nothing
else runs there meanwhile, other shards of that master included. Prints one JSON line:
the slot's keys, each move's blocked time (the script, seen from the mover) and the
longest PING of the source seen by another client while it ran.

    python -m demos.shard_move_cost --workflows 10000 --tasks 3 --run
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any

import redis

from engine import Agent, Engine, Workflow
from engine.connect.local_cluster import LocalCluster
from engine.store.shard_moves import ShardMoves


def chain(n: int) -> Workflow:
    wf = Workflow("chain")
    for i in range(n):
        wf.task(f"t{i}", type="t", after=[f"t{i - 1}"] if i else [])
    return wf


def longest_ping(address: str, stop: threading.Event, out: list[float]) -> None:
    """PING the node at ``address`` back to back until ``stop``; the slowest in ``out``."""
    host, _, port = address.rpartition(":")
    with redis.Redis(host=host, port=int(port)) as c:
        worst = 0.0
        while not stop.is_set():
            t0 = time.perf_counter()
            c.ping()
            worst = max(worst, time.perf_counter() - t0)
        out.append(worst)


def timed_move(moves: ShardMoves, target: str, source: str) -> dict[str, Any]:
    stop, worst = threading.Event(), []
    pinger = threading.Thread(target=longest_ping, args=(source, stop, worst))
    pinger.start()
    time.sleep(0.05)
    report = moves.move(0, target)
    stop.set()
    pinger.join()
    return {**report.to_dict(), "longest_ping_ms": round(worst[0] * 1000, 1)}


def run(workflows: int, tasks: int, execute: bool) -> dict[str, Any]:
    with LocalCluster(3) as cluster, Engine.connect(cluster.url, shards=1) as engine:
        for at in range(0, workflows, 5000):
            engine.push_many([chain(tasks)] * min(5000, workflows - at))
        if execute:
            Agent(engine, "a1", {"t": lambda t: t.index}).run(until_idle=True)
        moves = ShardMoves(engine.redis, engine.keys)
        home = moves.places()[0]
        away = next(f"127.0.0.1:{p}" for p in cluster.ports if f"127.0.0.1:{p}" != home.master)
        there = timed_move(moves, away, home.master)
        back = timed_move(moves, home.master, away)
        moves.close()
        return {
            "workflows": workflows,
            "tasks": tasks,
            "ran": execute,
            "keys": home.keys,
            "there": there,
            "back": back,
            "us_per_key": round(there["blocked_ms"] * 1000 / max(1, home.keys), 1),
        }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workflows", type=int, default=10_000)
    p.add_argument("--tasks", type=int, default=3)
    p.add_argument("--run", action="store_true", help="run every workflow before the moves")
    a = p.parse_args()
    print(json.dumps(run(a.workflows, a.tasks, a.run)))


if __name__ == "__main__":
    main()
