"""A master killed mid-run on a local Redis Cluster, with pushes and agents going on:
what the failover loses, with ``WAIT`` off and on.

Starts a local cluster (3 masters, 1 replica each) and ``--agents`` agents (threads, an
``Engine`` each, as separate processes would have). First a throughput phase: pushes
``--measure`` chains of ``--tasks`` tasks as fast as it can and times the agents
draining them (tasks/s: the cost of WAIT). Then a pusher pushes ``--workflows`` more in
batches of ``--batch`` at ``--rate`` workflows/s, recording every id a push acknowledged,
while the agents record every completion Redis acknowledged. Once ``--kill-at`` of them
are pushed, the master of shard 0 is SIGKILLed. With ``--freeze-replica-ms``, its replica is
cut off that long first (stopped with SIGSTOP, its link closed by ``CLIENT KILL TYPE
replica`` on the master, continued after the kill): the master goes on acknowledging
writes its replica never gets, as on a broken or slow link when a master dies, which
loopback replication otherwise hardly ever shows. Its replica is promoted; a replacement
node then joins as the new master's replica (as an operator would restart the dead one).
At the end it counts, in one JSON line:

* workflows acknowledged, found, ``lost`` (acknowledged but gone, or its id now naming a
  later push: the promoted replica's id counter is behind), succeeded, unfinished;
  with ``--wait-replicas``, ``unconfirmed`` (pushed, but told the replicas had not
  acknowledged them) and how many of those are gone;
* tasks re-run (attempts beyond the first), completions acknowledged and ``lost`` (the
  task ran again after its acknowledged completion), completions unconfirmed;
* how long until shard 0 was writable again, and until it had a replica again.

    python -m demos.cluster_failover --workflows 3000 --wait-replicas 0
    python -m demos.cluster_failover --workflows 3000 --wait-replicas 1 --freeze-replica-ms 300
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import traceback
from typing import Any

import redis

from engine import Agent, Engine, NotReplicatedError, Workflow
from engine.connect.local_cluster import LocalCluster
from engine.errors import NotFoundError
from engine.store import Outcome
from engine.store.scripts import ScriptBatch


def chain(n: int) -> Workflow:
    wf = Workflow("chain")
    for i in range(n):
        wf.task(f"t{i}", type="t", after=[f"t{i - 1}"] if i else [])
    return wf


class CountingAgent(Agent):
    """An agent that records the completions Redis acknowledged: ``(wid, key, attempt)``,
    split into those its replicas confirmed and those they did not (``wait_replicas``)."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.acked: list[tuple[str, str, int]] = []
        self.acked_unconfirmed: list[tuple[str, str, int]] = []
        self._pipe = threading.local()  # the report calls of this round trip that fell short

    def _execute_pipe(self, pipe: ScriptBatch, outcomes: list[Outcome]) -> list[Any]:
        self._pipe.short = set()
        return super()._execute_pipe(pipe, outcomes)

    def _short(self, e: NotReplicatedError) -> list[Any]:
        if hasattr(self._pipe, "short"):
            self._pipe.short = set(e.unconfirmed)
        return super()._short(e)

    def _count_reports(self, replies: list[Any], outcomes: list[Outcome]) -> Exception | None:
        groups = [items for _, items in sorted(self._report_shards(outcomes).items())]
        for k, (reply, items) in enumerate(zip(replies, groups, strict=True)):
            if isinstance(reply, Exception):
                continue
            short = getattr(self._pipe, "short", set())
            into = self.acked_unconfirmed if k in short else self.acked
            into.extend(
                (o[0], o[1], o[2]) for o, code in zip(items, reply.codes, strict=True) if code == 1
            )
        return super()._count_reports(replies, outcomes)


def shard0_writable(engine: Engine) -> bool:
    key = engine.keys.shard(0).prefix + ":probe"
    try:
        engine.redis.set(key, "1", ex=5)
        return True
    except (redis.RedisError, OSError):
        return False


def master_of_shard0(engine: Engine) -> int:
    node = engine.redis.get_node_from_key(engine.keys.shard(0).seq)  # type: ignore[attr-defined]
    return int(node.port)


def replica_of(cluster: LocalCluster, master_port: int) -> Any:
    for server in cluster.servers:
        try:
            with redis.Redis(port=server.port, decode_responses=True) as c:
                info = c.info("replication")
        except redis.ConnectionError:
            continue
        if info["role"] == "slave" and int(info["master_port"]) == master_port:
            return server
    return None


class Pusher:
    """Pushes batches at a steady rate, recording what each push acknowledged."""

    def __init__(self, engine: Engine, tasks: int, total: int, batch: int, rate: float) -> None:
        self.engine, self.wf = engine, engine.compile(chain(tasks))
        self.total, self.batch, self.rate = total, batch, rate
        self.acked: list[tuple[str, int]] = []  # (id, the input it was pushed with)
        self.unconfirmed: list[tuple[str, int]] = []
        self.failed = 0  # workflows whose push raised: never acknowledged
        self.attempted = 0
        self.errors: dict[str, int] = {}  # workflows whose push failed, by error

    def run(self) -> None:
        began = time.monotonic()
        while self.attempted < self.total:
            n = min(self.batch, self.total - self.attempted)
            serials = list(range(self.attempted, self.attempted + n))  # each push's input
            self.attempted += n
            try:
                ids = self.engine.push_many([self.wf] * n, serials)
                self.acked += zip(ids, serials, strict=True)
            except NotReplicatedError as e:
                short = set(e.unconfirmed)
                for k, p in enumerate(e.results):
                    into = self.unconfirmed if k in short else self.acked
                    into.append((p.id, serials[k]))  # type: ignore[attr-defined]
            except (redis.RedisError, OSError) as e:
                self.failed += n
                if type(e).__name__ not in self.errors:  # say where, once per kind
                    traceback.print_exception(e, file=sys.stderr)
                self.errors[type(e).__name__] = self.errors.get(type(e).__name__, 0) + n
            lag = began + self.attempted / self.rate - time.monotonic()
            if lag > 0:
                time.sleep(lag)


def run(
    workflows: int,
    tasks: int,
    agents: int,
    kill_at: float,
    wait_replicas: int,
    wait_timeout_ms: int,
    freeze_ms: int,
    measure: int,
    batch: int,
    rate: float,
) -> dict[str, Any]:
    options = {"wait_replicas": wait_replicas, "wait_timeout_ms": wait_timeout_ms}
    with LocalCluster(3, 1) as cluster:
        engine = Engine.connect(cluster.url, **options)
        runners = [
            CountingAgent(
                Engine.connect(cluster.url, **options),
                f"a{k}",
                {"t": lambda t: t.index},
                lease_s=6.0,
                maintain_s=1.0,
            )
            for k in range(agents)
        ]
        # throughput: pushes as fast as they go, then the agents draining them
        wf = engine.compile(chain(tasks))
        began = time.monotonic()
        measured_ids: list[str] = []
        for at in range(0, measure, batch):
            measured_ids += engine.push_many([wf] * min(batch, measure - at))
        push_rate = measure / (time.monotonic() - began)
        threads = [threading.Thread(target=a.run, daemon=True) for a in runners]
        began = time.monotonic()
        for t in threads:
            t.start()
        while engine.count("running") > 0:
            time.sleep(0.02)
        tasks_per_s = measure * tasks / (time.monotonic() - began)

        pusher = Pusher(Engine.connect(cluster.url, **options), tasks, workflows, batch, rate)
        pushing = threading.Thread(target=pusher.run, daemon=True)
        pushing.start()
        while len(pusher.acked) + len(pusher.unconfirmed) < kill_at * workflows:
            time.sleep(0.01)
        victim_port = master_of_shard0(engine)
        victim = next(s for s in cluster.servers if s.port == victim_port)
        heir = replica_of(cluster, victim_port)
        assert victim.process is not None and heir is not None and heir.process is not None
        if freeze_ms:  # the replica cut off: what the master acknowledges now, it lacks
            os.kill(heir.process.pid, signal.SIGSTOP)
            with redis.Redis(port=victim_port) as master:
                master.execute_command("CLIENT", "KILL", "TYPE", "replica")
            time.sleep(freeze_ms / 1000)
        killed_at = time.monotonic()
        victim.process.kill()
        if freeze_ms:
            os.kill(heir.process.pid, signal.SIGCONT)
        writable = replicated = None
        deadline = killed_at + 120
        while writable is None and time.monotonic() < deadline:
            if shard0_writable(engine):
                writable = time.monotonic() - killed_at
            else:
                time.sleep(0.05)
        if writable is not None:  # the dead master's replacement joins as a replica
            cluster.add_replica(master_of_shard0(engine))
            replicated = time.monotonic() - killed_at
        pushing.join(300)
        while time.monotonic() < deadline:
            try:
                if engine.count("running") == 0:
                    break
            except (redis.RedisError, OSError):
                pass
            time.sleep(0.2)
        for a in runners:
            a.stop()
        for t in threads:
            t.join(30)

        def final(pushed: list[tuple[str, int]]) -> dict[str, Any]:
            # found: the id names the workflow pushed with that input (a lost push's id
            # is given again to a later push by the promoted replica's older counter)
            found, reused, states = 0, 0, {"succeeded": 0}
            for wid, serial in pushed:
                try:
                    st = engine.status(wid)
                except NotFoundError:
                    continue
                if st.input != serial:
                    reused += 1
                    continue
                found += 1
                states[st.state] = states.get(st.state, 0) + 1
                for i, t in enumerate(st.tasks):
                    attempts[(wid, str(i))] = t.attempts
            return {"found": found, "reused": reused, "states": states}

        attempts: dict[tuple[str, str], int] = {}
        measured = [(w, None) for w in measured_ids]
        acked, unconfirmed = final(pusher.acked), final(pusher.unconfirmed)
        final(measured)  # type: ignore[arg-type]
        done_acked = [c for a in runners for c in a.acked]
        done_short = [c for a in runners for c in a.acked_unconfirmed]

        def lost(completions: list[tuple[str, str, int]]) -> int:
            # acknowledged, yet its task ran again (workflows found intact only)
            return sum(1 for w, k, n in completions if attempts.get((w, k), n) != n)

        out = {
            "wait_replicas": wait_replicas,
            "freeze_replica_ms": freeze_ms,
            "tasks_per_s_before_kill": round(tasks_per_s),
            "pushes_per_s_before_kill": round(push_rate),
            "workflows_acknowledged": len(pusher.acked),
            "found": acked["found"],
            "lost": len(pusher.acked) - acked["found"],
            "lost_ids_reused": acked["reused"],
            "succeeded": acked["states"]["succeeded"],
            "unfinished": acked["found"] - acked["states"]["succeeded"],
            "push_failed": pusher.failed,
            "push_errors": pusher.errors,
            "pushes_attempted": pusher.attempted,
            "unconfirmed": len(pusher.unconfirmed),
            "unconfirmed_lost": len(pusher.unconfirmed) - unconfirmed["found"],
            "tasks_rerun": sum(max(0, n - 1) for n in attempts.values()),
            "completions_acknowledged": len(done_acked),
            "completions_lost": lost(done_acked),
            "completions_unconfirmed": len(done_short),
            "completions_unconfirmed_lost": lost(done_short),
            "writable_again_s": None if writable is None else round(writable, 2),
            "replicated_again_s": None if replicated is None else round(replicated, 2),
        }
        for a in runners:
            a.engine.close()
        pusher.engine.close()
        engine.close()
        return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workflows", type=int, default=3000, help="pushed while the master dies")
    p.add_argument("--tasks", type=int, default=3)
    p.add_argument("--agents", type=int, default=2)
    p.add_argument("--kill-at", type=float, default=0.3, help="share pushed at the kill")
    p.add_argument("--wait-replicas", type=int, default=0)
    p.add_argument("--wait-timeout", type=int, default=500, metavar="MS")
    p.add_argument("--freeze-replica-ms", type=int, default=0, metavar="MS")
    p.add_argument("--measure", type=int, default=2000, help="workflows of the throughput phase")
    p.add_argument("--batch", type=int, default=30, help="workflows per push")
    p.add_argument("--rate", type=float, default=500.0, help="workflows pushed per second")
    a = p.parse_args()
    print(
        json.dumps(
            run(
                a.workflows,
                a.tasks,
                a.agents,
                a.kill_at,
                a.wait_replicas,
                a.wait_timeout,
                a.freeze_replica_ms,
                a.measure,
                a.batch,
                a.rate,
            )
        )
    )


if __name__ == "__main__":
    main()
