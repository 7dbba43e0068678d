"""Helpers the engine tests share: recounts, keyspace checks, agents and the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
from redis.cluster import RedisCluster

from engine import Agent, Engine, Task
from engine.store.keys import ShardKeys

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parent.parent
AGENT_DEFAULTS: dict[str, Any] = {"idle_check_s": 0.2, "maintain_s": 0.2}


def recount(engine: Engine) -> tuple[Counter[str], Counter[str]]:
    """Task and workflow counts by state, recounted from every workflow's status."""
    tasks: Counter[str] = Counter()
    workflows: Counter[str] = Counter()
    for shard in engine.keys.all_shards():
        for wid in engine.redis.zrange(shard.all, 0, -1):
            st = engine.status(wid)
            workflows[st.state.value] += 1
            for t in st.tasks:
                tasks[t.state.value] += 1
                # a map's items are tasks too in the shard's counters
                for state, n in (t.items or {}).items():
                    if state != "total":
                        tasks[state] += n
    return tasks, workflows


def assert_stats_agree(engine: Engine) -> None:
    """The O(1) counters equal a recount from the stored workflows."""
    tasks, workflows = recount(engine)
    stats = engine.stats()
    assert {k: v for k, v in stats.tasks.items() if v} == {k: v for k, v in tasks.items() if v}
    assert {k: v for k, v in stats.workflows.items() if v} == dict(workflows)
    for state, n in workflows.items():
        assert engine.count(state) == n


def primaries(client: redis.Redis) -> list[redis.Redis]:
    """One client per master holding data: the client itself on a single Redis, a client
    for each primary on a cluster (where DBSIZE, KEYS and INFO answer for one node only)."""
    if isinstance(client, RedisCluster):
        nodes = client.get_primaries()
        return [client.get_redis_connection(node) for node in nodes]
    return [client]


def scan_keys(client: redis.Redis, match: str | None = None) -> set[str]:
    """Every key in the database (every master of a cluster), read with SCAN."""
    return {
        k if isinstance(k, str) else k.decode()
        for node in primaries(client)
        for k in node.scan_iter(match=match, count=1000)
    }


def snapshot(client: redis.Redis) -> dict[str, Any]:
    """A comparable picture of the whole keyspace (every master of a cluster): every key
    with its dump."""
    out: dict[str, Any] = {}
    for key in scan_keys(client):
        out[key] = client.dump(key)
    return out


def subscribers(client: redis.Redis, channel: str) -> int:
    """How many clients listen on ``channel``: on a cluster, on the master of its slot,
    sharded subscriptions (SSUBSCRIBE) and plain ones."""
    if isinstance(client, RedisCluster):
        node = client.get_redis_connection(client.get_node_from_key(channel))
        sharded = node.pubsub_shardnumsub(channel)
        return int(sharded[0][1]) + int(node.pubsub_numsub(channel)[0][1])
    return int(client.pubsub_numsub(channel)[0][1])


def every_shard_listened(engine: Engine, channel: Callable[[ShardKeys], str]) -> bool:
    """Whether each shard's ``channel`` (e.g. its event channel) has a subscriber."""
    return all(subscribers(engine.redis, channel(s)) >= 1 for s in engine.keys.all_shards())


def publish(client: redis.Redis, channel: str, message: str) -> int:
    """Publish as the engine does: SPUBLISH on a cluster, PUBLISH on one Redis."""
    if isinstance(client, RedisCluster):
        return int(client.spublish(channel, message))
    return int(client.publish(channel, message))


def keys_on_one_shard(engine: Engine, n: int, prefix: str = "k") -> list[str]:
    """``n`` idempotency keys that route their pushes to one shard (any keys on one
    shard): for tests of an order or a limit that holds within a shard's queue."""
    keys: list[str] = []
    i = 0
    while len(keys) < n:
        key = f"{prefix}{i}"
        if engine.keys.shard_for(key) == engine.keys.shard_for(f"{prefix}0"):
            keys.append(key)
        i += 1
    return keys


def traces_of(engine: Engine, wid: str) -> list[str]:
    """Keys and index members that still mention workflow ``wid``."""
    found: list[str] = []
    r = engine.redis
    for key in scan_keys(r):
        if key.endswith(f":w:{wid}") or f":w:{wid}:" in key:  # its hash, input, maps
            found.append(key)
            continue
        kind = r.type(key)
        if kind == "zset":
            for member in r.zrange(key, 0, -1):
                if member == wid or member.startswith(f"{wid}:"):
                    found.append(f"{key} {member}")
        elif kind == "set":
            for member in r.smembers(key):
                if member == wid or member.startswith(f"{wid}:"):
                    found.append(f"{key} {member}")
    return found


def run_agent(
    engine: Engine,
    handlers: Mapping[str, Callable[[Task], Any]],
    agent_id: str = "a1",
    **options: Any,
) -> Agent:
    """Run an in-process agent until no work is left; returns it for its counters."""
    agent = Agent(engine, agent_id, handlers, **{**AGENT_DEFAULTS, **options})
    agent.run(until_idle=True)
    return agent


@contextmanager
def agent_thread(
    engine: Engine,
    handlers: Mapping[str, Callable[[Task], Any]],
    agent_id: str = "a1",
    **options: Any,
) -> Iterator[Agent]:
    """An agent running in a background thread until the block ends (then stopped)."""
    agent = Agent(engine, agent_id, handlers, **{**AGENT_DEFAULTS, **options})
    errors: list[BaseException] = []

    def target() -> None:
        try:
            agent.run()
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(e)

    thread = threading.Thread(target=target, name=f"agent-{agent_id}", daemon=True)
    thread.start()
    try:
        yield agent
    finally:
        agent.stop()
        thread.join(30)
    assert not thread.is_alive(), f"agent {agent_id} did not stop"
    if errors:
        raise errors[0]


def promtool() -> str:
    """promtool's path. Missing, the test is skipped, but not under CI (``CI=true``),
    where .ci/run installs it (Debian's package ``prometheus``) and it must be there."""
    import shutil

    import pytest

    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail("promtool is missing under CI: .ci/run installs it (package prometheus)")
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    return found


def cli(
    *args: str,
    env: Mapping[str, str] | None = None,
    tool: str = "redisflow",
    timeout: float = 60,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a console script to completion and capture its output."""
    return subprocess.run(
        [str(BIN / tool), *args],
        env=dict(env) if env is not None else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd or ROOT,
        check=False,
    )


def spawn_agent(
    *args: str, env: Mapping[str, str], cwd: Path | None = None, log: Path | None = None
) -> subprocess.Popen[str]:
    """Start ``redisflow-agent`` as a separate process (a new session, killable alone).

    Its output is piped, or appended to ``log`` for an agent that may write more than a
    pipe holds before anyone reads it.
    """
    out = log.open("a") if log is not None else subprocess.PIPE
    try:
        return subprocess.Popen(
            [str(BIN / "redisflow-agent"), *args],
            env=dict(env),
            cwd=cwd or ROOT,
            stdout=out,
            stderr=subprocess.STDOUT if log is not None else subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    finally:
        if log is not None:
            out.close()  # type: ignore[union-attr]


def stop_process(proc: subprocess.Popen[str], sig: int = signal.SIGKILL) -> None:
    """Signal a process we started (if still running) and reap it."""
    if proc.poll() is None:
        os.kill(proc.pid, sig)
    proc.communicate(timeout=30)


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The stderr of a failed command, checked to be one line without a traceback."""
    err = result.stderr.strip()
    assert "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("redisflow"), err
    return err


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` s.

    The timeout only guards against a hang: no test asserts how fast anything is.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what or predicate}")
        time.sleep(0.02)


class Hand:
    """An agent driven step by step from a test: it calls the scripts directly, on every
    shard as an agent does (registered on each, claiming from each in turn, reporting
    each outcome to its workflow's shard)."""

    def __init__(self, engine: Engine, agent_id: str = "hand", lease_s: float = 60.0) -> None:
        self.engine = engine
        self.id = agent_id
        self.lease_ms = int(lease_s * 1000)
        self.shards = engine.keys.all_shards()
        self._next = 0  # the shard the next claim starts from
        self.taken_back = self.register()

    def register(self) -> list[Task]:
        """Register (again) on every shard; returns the tasks taken back."""
        taken: list[Task] = []
        info = '{"types": [""], "records": 2}'  # an agent of this release
        for shard in self.shards:
            taken += self.engine.store.calls.register(shard, self.id, info, self.lease_ms)
        return taken

    def claim(self, task_type: str = "", count: int = 100) -> list[Task]:
        """Claim up to ``count`` ready tasks of one type, in all, from the shards in turn
        (each claim starts from the shard after the last one's first)."""
        got: list[Task] = []
        n = len(self.shards)
        start, self._next = self._next, (self._next + 1) % n
        for i in range(n):
            if len(got) >= count:
                break
            shard = self.shards[(start + i) % n]
            got += self.engine.store.scripts.run(
                self.engine.store.calls.claim_call(shard, self.id, [task_type], count - len(got))
            )
        return got

    def claim_one(self, task_type: str = "") -> Task:
        [task] = self.claim(task_type, 1)
        return task

    def report(self, task: Task, how: str, value: str) -> int:
        """Report one outcome to its workflow's shard; 1 when recorded, 0 when rejected."""
        outcome = (task.workflow_id, task.key, task.attempt, how, value)
        shard = self.engine.keys.shard_of(task.workflow_id)
        reported = self.engine.store.scripts.run(
            self.engine.store.calls.complete_call(shard, self.id, [outcome])
        )
        for wid, c in reported.expand:  # a map made ready: expand it, as an agent does
            self.engine.store.calls.expand(wid, c)
        [ok] = reported.codes
        return ok

    def succeed(self, task: Task, output: Any = None) -> int:
        return self.report(task, "ok", "" if output is None else json.dumps(output))

    def fail(self, task: Task, error: str = "failed on purpose") -> int:
        return self.report(task, "err", error)

    def heartbeat(self) -> int:
        """Heartbeat on every shard: 1 when every lease was still held."""
        held = [self.engine.store.calls.heartbeat(s, self.id, self.lease_ms) for s in self.shards]
        return int(all(held))

    def expire(self) -> None:
        """Make this agent's lease run out now (as if it stopped heartbeating long ago)."""
        for shard in self.shards:
            self.engine.redis.zadd(shard.agents_live, {self.id: 0})

    def stop(self, unstarted: Iterable[Task] = ()) -> None:
        """Leave every shard; ``unstarted`` tasks were claimed but never run (their attempt
        is undone on their workflow's shard)."""
        tasks = list(unstarted)
        for shard in self.shards:
            mine = [t for t in tasks if self.engine.keys.shard_of(t.workflow_id) == shard]
            self.engine.store.calls.stop(shard, self.id, mine)
