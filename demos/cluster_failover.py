"""A master killed mid-run on a local Redis Cluster: what the failover costs.

Starts a local cluster (3 masters, 1 replica each), pushes ``--workflows`` chains of
``--tasks`` tasks spread over one shard per master, runs ``--agents`` agents (threads),
SIGKILLs the master of shard 0 once ``--kill-at`` of the tasks are done, and waits for
its replica to be promoted and for every workflow to finish. Prints one JSON line:
workflows pushed / succeeded / lost (gone with the writes the replica never got) /
unfinished, tasks re-run (attempts beyond the first) and how long the failover took.

    python -m demos.cluster_failover --workflows 2000 --tasks 3
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any

from engine import Agent, Engine, Workflow
from engine.errors import NotFoundError
from engine.local_cluster import LocalCluster


def chain(n: int) -> Workflow:
    wf = Workflow("chain")
    for i in range(n):
        wf.task(f"t{i}", type="t", after=[f"t{i - 1}"] if i else [])
    return wf


def count_done(engine: Engine) -> int:
    try:
        return engine.stats().tasks.get("succeeded", 0)
    except Exception:  # noqa: BLE001 - the cluster is failing over: no figure this time
        return -1


def run(workflows: int, tasks: int, agents: int, kill_at: float) -> dict[str, Any]:
    with LocalCluster(3, 1) as cluster:
        engine = Engine.connect(cluster.url)
        ids = engine.push_many([chain(tasks)] * workflows)
        runners = [
            Agent(engine, f"a{k}", {"t": lambda t: t.index}, lease_s=6.0, maintain_s=1.0)
            for k in range(agents)
        ]
        threads = [threading.Thread(target=a.run, daemon=True) for a in runners]
        for t in threads:
            t.start()
        total = workflows * tasks
        while count_done(engine) < kill_at * total:
            time.sleep(0.05)
        victim_node = engine.redis.get_node_from_key(  # type: ignore[attr-defined]
            engine.keys.shard(0).seq
        )
        victim = next(s for s in cluster.servers if s.port == victim_node.port)
        killed_at = time.monotonic()
        assert victim.process is not None
        victim.process.kill()
        recovered = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            done = count_done(engine)
            if recovered is None and done >= 0:
                try:
                    engine.redis.set(engine.keys.shard(0).prefix + ":probe", "1")
                    engine.redis.delete(engine.keys.shard(0).prefix + ":probe")
                    recovered = time.monotonic() - killed_at
                except Exception:  # noqa: BLE001 - still failing over
                    pass
            try:
                if engine.count("running") == 0:
                    break
            except Exception:  # noqa: BLE001 - still failing over
                pass
            time.sleep(0.2)
        for a in runners:
            a.stop()
        for t in threads:
            t.join(30)
        succeeded = lost = unfinished = reran = 0
        for wid in ids:
            try:
                st = engine.status(wid)
            except NotFoundError:
                lost += 1
                continue
            if st.state == "succeeded":
                succeeded += 1
            else:
                unfinished += 1
            reran += sum(max(0, t.attempts - 1) for t in st.tasks)
        engine.close()
        return {
            "workflows": workflows,
            "tasks": total,
            "succeeded": succeeded,
            "lost": lost,
            "unfinished": unfinished,
            "tasks_rerun": reran,
            "writable_again_s": None if recovered is None else round(recovered, 2),
        }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workflows", type=int, default=2000)
    p.add_argument("--tasks", type=int, default=3)
    p.add_argument("--agents", type=int, default=2)
    p.add_argument("--kill-at", type=float, default=0.3, help="share of tasks done at the kill")
    a = p.parse_args()
    print(json.dumps(run(a.workflows, a.tasks, a.agents, a.kill_at)))


if __name__ == "__main__":
    main()
