"""What a standard resharding does to a running deployment, and what a shard move does.

Starts a local 3-master cluster, pushes ``--workflows`` chains of 3 tasks into one shard,
runs two agents (threads) and, a second in, moves the shard's slot to another master:

* ``--how reshard``: as ``redis-cli --cluster reshard`` does: the slot MIGRATING on the
  source and IMPORTING on the target, then MIGRATE ``--keys`` keys at a time;
* ``--how move``: ``redisflow cluster move`` (``engine/store/shard_moves.py``).

Then a fresh agent gets 20 s to finish what is left. Prints one JSON line: workflows
succeeded / still running / lost, the agents' errors, and the shard's counters beside a
recount from the stored workflows (they agree when nothing was corrupted).

    python -m demos.reshard_hazard --how reshard
    python -m demos.reshard_hazard --how move
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

from engine import Agent, Engine, Workflow
from engine.connect.local_cluster import LocalCluster
from engine.errors import NotFoundError
from engine.store.shard_moves import ShardMoves


def chain(n: int) -> Workflow:
    wf = Workflow("chain")
    for i in range(n):
        wf.task(f"t{i}", type="t", after=[f"t{i - 1}"] if i else [])
    return wf


def reshard_key_by_key(moves: ShardMoves, target: str, per_migrate: int) -> int:
    """The slot of shard 0 moved as redis-cli does: a few keys per MIGRATE."""
    home = moves.places()[0]
    nodes = {n.address: n for n in moves.nodes()}
    src, dst, to = moves.node(home.master), moves.node(target), nodes[target]
    dst.execute_command("CLUSTER", "SETSLOT", home.slot, "IMPORTING", nodes[home.master].id)  # type: ignore[no-untyped-call]
    src.execute_command("CLUSTER", "SETSLOT", home.slot, "MIGRATING", to.id)  # type: ignore[no-untyped-call]
    moved = 0
    while keys := src.execute_command("CLUSTER", "GETKEYSINSLOT", home.slot, per_migrate):  # type: ignore[no-untyped-call]
        src.execute_command(  # type: ignore[no-untyped-call]
            "MIGRATE", to.host, to.port, "", 0, 5000, "REPLACE", "KEYS", *keys
        )
        moved += len(keys)
        time.sleep(0.002)  # redis-cli's round trips, on a real network longer
    for node in (dst, src):
        node.execute_command("CLUSTER", "SETSLOT", home.slot, "NODE", to.id)  # type: ignore[no-untyped-call]
    return moved


def run(workflows: int, how: str, per_migrate: int) -> dict[str, Any]:
    sys.path.insert(0, "tests")
    from engine_helpers import recount

    errors: list[str] = []

    def serve(agent: Agent) -> None:
        try:
            agent.run()
        except Exception as e:  # noqa: BLE001 - counted: an agent that died
            errors.append(f"{agent.id}: {str(e)[:90]}")

    with LocalCluster(3) as cluster, Engine.connect(cluster.url, shards=1) as engine:
        ids = engine.push_many([chain(3)] * workflows)
        moves = ShardMoves(engine.redis, engine.keys)
        home = moves.places()[0]
        target = next(n.address for n in moves.nodes() if n.master and n.address != home.master)
        handlers = {"t": lambda t: time.sleep(0.0005) or t.index}
        engines = [Engine.connect(cluster.url) for _ in range(3)]
        agents = [Agent(e, f"a{k}", handlers, idle_check_s=0.2) for k, e in enumerate(engines)]
        threads = [threading.Thread(target=serve, args=(a,), daemon=True) for a in agents]
        for t in threads[:2]:
            t.start()
        time.sleep(1.0)
        if how == "move":
            moves.move(0, target)
        else:
            reshard_key_by_key(moves, target, per_migrate)
        time.sleep(1.0)
        threads[2].start()  # a fresh agent: 20 s to finish what is left
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and engine.count("running"):
            time.sleep(0.2)
        for a in agents:
            a.stop()
        for t in threads:
            t.join(10)
        states: dict[str, int] = {}
        for wid in ids:
            try:
                state = engine.status(wid).state.value
            except NotFoundError:
                state = "lost"
            states[state] = states.get(state, 0) + 1
        tasks, flows = recount(engine)
        stats = engine.stats()
        for e in engines:
            e.close()
        moves.close()
        return {
            "how": how,
            "workflows": states,
            "agent_errors": errors,
            "counters": {
                "workflows": {k: v for k, v in stats.workflows.items() if v},
                "tasks": {k: v for k, v in stats.tasks.items() if v},
            },
            "recount": {"workflows": dict(flows), "tasks": dict(tasks)},
        }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workflows", type=int, default=3000)
    p.add_argument("--how", choices=["reshard", "move"], default="reshard")
    p.add_argument("--keys", type=int, default=10, help="with reshard: keys per MIGRATE")
    a = p.parse_args()
    print(json.dumps(run(a.workflows, a.how, a.keys)))


if __name__ == "__main__":
    main()
