"""Chaos tools: a Redis that restarts, a proxy that drops connections, random workflows.

:class:`RedisProcess` runs a redis-server with an append-only file on a fixed port, so
it can be shut down (gracefully or with SIGKILL) and started again where clients expect
it. :class:`ChaosProxy` sits between agents and Redis on loopback and can drop every
connection through it, refuse new ones for a while, or swallow the reply to a chosen
command (the server ran it; the client never hears back).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from engine_helpers import assert_stats_agree, spawn_agent, stop_process, wait_for

from engine import Engine, Workflow
from engine.connect.embedded import find_redis_server, free_port
from engine.errors import NotFoundError


def answers(port: int) -> bool:
    """True when a redis-server answers PING on ``port``."""
    try:
        client = redis.Redis(port=port, socket_connect_timeout=0.2, retry=None)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.ConnectionError, redis.TimeoutError):
        return False


class RedisProcess:
    """A redis-server on a fixed loopback port, persisting to an append-only file."""

    def __init__(self, folder: Path, fsync: str = "everysec") -> None:
        self.port = free_port()
        self.folder = folder
        self.fsync = fsync
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisProcess:
        argv = [find_redis_server(), "--port", str(self.port), "--bind", "127.0.0.1"]
        argv += ["--dir", str(self.folder), "--save", "", "--appendonly", "yes"]
        argv += ["--appendfsync", self.fsync]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: answers(self.port), what="redis-server to answer")
        return self

    def set_fsync(self, mode: str) -> None:
        """Change ``appendfsync`` of the running server (``always`` or ``everysec``)."""
        client = redis.Redis(port=self.port)
        try:
            client.config_set("appendfsync", mode)
        finally:
            client.close()

    def shutdown(self) -> None:
        """A graceful stop: SHUTDOWN writes and syncs the append-only file first."""
        assert self.proc is not None
        client = redis.Redis(port=self.port, retry=None)
        try:
            client.shutdown()
        except redis.ConnectionError:
            pass  # the server closes our connection as it goes
        finally:
            client.close()
        self.proc.wait(30)

    def kill(self) -> None:
        """SIGKILL: whatever the append-only file holds is what comes back."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


class ChaosProxy:
    """A TCP proxy on loopback whose connections can be dropped at any moment.

    Runs an asyncio loop in a daemon thread. Every method is safe to call from any
    thread.
    """

    def __init__(self, upstream_port: int) -> None:
        self.upstream = upstream_port
        self.port = free_port()
        self.cuts = 0  # cut() calls that dropped at least one connection
        self.dropped = 0  # connections dropped in all
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Transport] = set()
        self._trap: tuple[bytes, str, float] | None = None  # see swallow_reply_to, cut_after
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> ChaosProxy:
        self._thread.start()
        self._call(self._listen)
        return self

    def close(self) -> None:
        self._call(self._close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def cut(self) -> int:
        """Drop every open connection now (a reset, as when a network path fails)."""
        return self._call(self._cut)

    def refuse(self, seconds: float) -> None:
        """Drop every connection and refuse new ones for ``seconds``, as a down server."""
        self._call(self._refuse, seconds)

    def swallow_reply_to(self, marker: bytes, down_s: float = 0.0) -> None:
        """The next request containing ``marker`` reaches Redis; its reply never comes back.

        Every connection is dropped instead, and new ones are refused for ``down_s``.
        """
        self._call(self._arm, marker, "request", down_s)

    def cut_after(self, marker: bytes, down_s: float = 0.0) -> None:
        """The next reply or message containing ``marker`` is delivered, then as above."""
        self._call(self._arm, marker, "reply", down_s)

    # -- in the loop's thread ------------------------------------------------------------

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        async def run() -> Any:
            out = fn(*args)
            return await out if asyncio.iscoroutine(out) else out

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(10)

    def _arm(self, marker: bytes, where: str, down_s: float) -> None:
        self._trap = (marker, where, down_s)

    async def _spring(self, down_s: float) -> None:
        self._trap = None
        if down_s:
            await self._refuse(down_s)
        else:
            self._cut()

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", self.port, reuse_address=True
        )

    async def _close(self) -> None:
        self._cut()
        if self._server is not None:
            self._server.close()
            self._server = None

    def _cut(self) -> int:
        n = len(self._conns)
        for transport in list(self._conns):
            transport.abort()
        self._conns.clear()
        if n:
            self.cuts += 1
            self.dropped += n
        return n

    async def _refuse(self, seconds: float) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        self._cut()
        self._loop.call_later(seconds, lambda: asyncio.ensure_future(self._listen()))

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            writer.transport.abort()
            return
        pair = (writer.transport, up_writer.transport)
        self._conns.update(pair)
        marked = [False]  # this connection sent the trapped request

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, up: bool) -> None:
            try:
                while data := await src.read(65536):
                    trap = self._trap
                    if up and trap and trap[1] == "request" and trap[0] in data:
                        marked[0] = True
                    elif not up and marked[0] and trap:
                        await self._spring(trap[2])  # the reply goes nowhere
                        return
                    dst.write(data)
                    await dst.drain()
                    if not up and trap and trap[1] == "reply" and trap[0] in data:
                        await self._spring(trap[2])
                        return
            except (OSError, ConnectionError):
                pass
            finally:
                dst.transport.abort()

        try:
            await asyncio.gather(pump(reader, up_writer, True), pump(up_reader, writer, False))
        finally:
            for t in pair:
                t.abort()
                self._conns.discard(t)


WORK_MS = (0, 5, 20, 50, 100)


def random_workflow(
    rng: random.Random, tag: str, doomed: float = 0.0, work_ms: tuple[int, ...] = WORK_MS
) -> Workflow:
    """A random DAG named ``tag``: chains, fans and diamonds, some tasks failing at first.

    Each task fails its first 0-2 attempts (and is allowed that many retries); with
    probability ``doomed`` one task fails every attempt, so the workflow fails. Each
    works one of ``work_ms`` (milliseconds).
    """
    wf = Workflow(tag, retry_backoff=0.05, retry_backoff_max=0.2)
    n = rng.randint(1, 8)
    doomed_at = rng.randrange(n) if rng.random() < doomed else -1
    names: list[str] = []
    for i in range(n):
        k = min(i, rng.choice((0, 1, 1, 1, 2, 3)))
        parents = rng.sample(names, k) if k else []
        fails = rng.choice((0, 0, 0, 0, 1, 2))
        if i == doomed_at:
            fails = -1
        payload = {"w": tag, "f": fails, "s": rng.choice(work_ms)}
        names.append(f"t{i}")
        wf.task(f"t{i}", payload, after=parents, max_attempts=max(fails, 0) + 1)
    return wf


# -- a chaos run ----------------------------------------------------------------------------

TESTS = Path(__file__).resolve().parent
FINISHED = ("succeeded", "failed")


@dataclass
class Plan:
    """What a chaos run does; every event lands at a random moment of ``seconds``."""

    workflows: int
    seconds: float
    agents: int = 3
    kills: int = 3
    freezes: int = 1
    restarts: tuple[str, ...] = ("shutdown", "sigkill")  # in this order
    cut_every_s: float = 1.5  # mean interval between proxy cuts
    lease_s: float = 3.0
    backlog: int = 150  # workflows pushed ahead of the agents at most
    doomed: float = 0.05
    settle_s: float = 90.0  # how long the end may take to finish everything
    seed: int = 0
    redis_freezes: int = 0  # redis-server SIGSTOPped under load ...
    redis_freeze_s: float = 30.0  # ... this long each time
    work_ms: tuple[int, ...] = WORK_MS  # how long a task works, picked per task
    concurrency: int = 0  # each agent's (0: 1, 2, 3, 1, ... by slot)


@dataclass
class Slot:
    """One logical agent: an id and its current process."""

    id: str
    concurrency: int
    proc: subprocess.Popen[str] | None = None
    frozen_until: float = 0.0


@dataclass
class Figures:
    workflows: int = 0
    tasks: int = 0
    runs: int = 0
    kills: int = 0
    freezes: int = 0
    restarts: dict[str, int] = field(default_factory=dict)
    proxy_cuts: int = 0
    connections_dropped: int = 0
    lost: int = 0
    stuck: int = 0
    failed_workflows: int = 0
    duplicates: int = 0  # runs beyond the ones the outcome needed
    tasks_run_again: int = 0
    rejected: int = 0  # completions fenced off, as the agents still running at the end count
    redis_freezes: int = 0
    run_twice_at_once: int = 0  # tasks two agents ran at the same time (runs overlapping)
    seconds: float = 0.0


class ChaosRun:
    """Agents, a proxy and a restartable Redis, driven by a :class:`Plan`, then checked."""

    def __init__(self, folder: Path, plan: Plan) -> None:
        self.plan = plan
        self.rng = random.Random(plan.seed)
        self.folder = folder
        self.logs = folder / "runs"
        self.logs.mkdir()
        self.redis = RedisProcess(folder, fsync="always").start()
        self.proxy = ChaosProxy(self.redis.port).start()
        self.engine = Engine.connect(self.redis.url)
        self.slots = [Slot(f"c{k}", plan.concurrency or 1 + k % 3) for k in range(plan.agents)]
        self.pushed: dict[str, tuple[str, Workflow]] = {}  # tag -> (wid, definition)
        self.figures = Figures()
        self.deaths: list[str] = []  # agents that exited by themselves
        self.problems: list[str] = []

    # -- agents -----------------------------------------------------------------------

    def _spawn(self, slot: Slot) -> None:
        env = {**os.environ, "REDISFLOW_URL": self.proxy.url}
        env |= {"RF_CHAOS_LOG": str(self.logs), "RF_CHAOS_ME": slot.id}
        args = ["--id", slot.id, "--handler", "chaos_handler:run"]
        args += ["--lease", str(self.plan.lease_s), "--concurrency", str(slot.concurrency)]
        slot.proc = spawn_agent(*args, env=env, cwd=TESTS, log=self.folder / f"{slot.id}.err")

    def _check_alive(self) -> None:
        for slot in self.slots:
            assert slot.proc is not None
            if slot.proc.poll() is not None:
                err = (self.folder / f"{slot.id}.err").read_text()[-2000:]
                self.deaths.append(f"{slot.id} exited {slot.proc.returncode}: {err}")
                self._spawn(slot)

    def _kill(self) -> None:
        slot = self.rng.choice([s for s in self.slots if not s.frozen_until])
        assert slot.proc is not None
        slot.proc.send_signal(signal.SIGKILL)
        slot.proc.wait(30)
        self.figures.kills += 1
        time.sleep(self.rng.uniform(0, 0.5))
        if self.figures.kills % 2 == 0:
            # a new id: the dead one's tasks wait for its lease to run out
            slot.id = f"{slot.id.split('-')[0]}-{self.figures.kills}"
        self._spawn(slot)  # the same id takes its tasks back at once

    def _freeze(self) -> None:
        slot = self.rng.choice([s for s in self.slots if not s.frozen_until])
        assert slot.proc is not None
        slot.proc.send_signal(signal.SIGSTOP)
        slot.frozen_until = time.monotonic() + self.plan.lease_s + 2.5  # past its lease
        self.figures.freezes += 1

    def _thaw(self, now: float = float("inf")) -> None:
        for slot in self.slots:
            if slot.frozen_until and slot.frozen_until <= now:
                assert slot.proc is not None
                slot.proc.send_signal(signal.SIGCONT)
                slot.frozen_until = 0.0

    # -- Redis ------------------------------------------------------------------------

    def _freeze_redis(self) -> None:
        """SIGSTOP redis-server for ``redis_freeze_s`` under load: clients hang, time
        goes on; then SIGCONT."""
        assert self.redis.proc is not None
        self.redis.proc.send_signal(signal.SIGSTOP)
        try:
            time.sleep(self.plan.redis_freeze_s)
        finally:
            self.redis.proc.send_signal(signal.SIGCONT)
        self.figures.redis_freezes += 1

    def _restart(self, how: str) -> None:
        if how == "shutdown":
            self.redis.set_fsync("everysec")  # SHUTDOWN syncs the file itself
            self.redis.shutdown()
        else:
            # SIGKILL keeps only what reached the disk: with `always`, every write
            # acknowledged (the server starts so; wait out any older everysec write)
            self.redis.set_fsync("always")
            time.sleep(2.5)
            self.redis.kill()
        time.sleep(self.rng.uniform(0.2, 1.5))
        self.redis.start()
        self.figures.restarts[how] = self.figures.restarts.get(how, 0) + 1

    # -- load -------------------------------------------------------------------------

    def _finished(self) -> int:
        return sum(self.engine.count(s) for s in FINISHED)

    def _push_some(self, elapsed: float) -> None:
        # spread over the run, so every event meets agents at work
        due = int(self.plan.workflows * min(1.0, 0.05 + elapsed / self.plan.seconds))
        room = self.plan.backlog - (len(self.pushed) - self._finished())
        n = min(room, due - len(self.pushed), 100)
        if n <= 0:
            return
        base = len(self.pushed)
        wfs = [
            random_workflow(self.rng, f"w{base + k}", self.plan.doomed, self.plan.work_ms)
            for k in range(n)
        ]
        for wf, wid in zip(wfs, self.engine.push_many(wfs), strict=True):
            self.pushed[wf.name] = (wid, wf)

    # -- the run ----------------------------------------------------------------------

    def run(self) -> Figures:
        """Push all the workflows while the events happen, then let everything finish."""
        began = time.monotonic()
        for slot in self.slots:
            self._spawn(slot)
        plan, rng = self.plan, self.rng
        at = lambda: began + rng.uniform(0.05, 0.95) * plan.seconds  # noqa: E731
        events: list[tuple[float, str]] = [(at(), "kill") for _ in range(plan.kills)]
        events += [(at(), "freeze") for _ in range(plan.freezes)]
        events += [(at(), "redis_freeze") for _ in range(plan.redis_freezes)]
        span = plan.seconds / (len(plan.restarts) + 1)
        events += [
            (began + span * (k + rng.uniform(0.7, 1.3)), f"restart:{how}")
            for k, how in enumerate(plan.restarts)
        ]
        events.sort(reverse=True)
        next_cut = began + rng.expovariate(1 / plan.cut_every_s)
        try:
            while time.monotonic() < began + plan.seconds or len(self.pushed) < plan.workflows:
                now = time.monotonic()
                self._thaw(now)
                self._check_alive()
                while events and events[-1][0] <= now:
                    _, what = events.pop()
                    if what == "kill":
                        self._kill()
                    elif what == "freeze":
                        self._freeze()
                    elif what == "redis_freeze":
                        self._freeze_redis()
                    else:
                        self._restart(what.split(":")[1])
                if now >= next_cut:
                    self.proxy.cut()
                    next_cut = now + rng.expovariate(1 / plan.cut_every_s)
                self._push_some(now - began)
                time.sleep(0.1)
            self._thaw()
            wait_for(
                lambda: self._check_alive() or self._finished() >= len(self.pushed),
                timeout=plan.settle_s,
                what="every workflow to finish",
            )
        except AssertionError as e:
            self.problems.append(str(e))
        self._check_alive()
        self.figures.seconds = round(time.monotonic() - began, 1)
        self.figures.proxy_cuts = self.proxy.cuts
        self.figures.connections_dropped = self.proxy.dropped
        return self.figures

    def stop_agents(self) -> None:
        """SIGTERM every agent: each must finish its work, leave cleanly and exit 0."""
        for slot in self.slots:
            if slot.proc is not None and slot.proc.poll() is None:
                slot.proc.send_signal(signal.SIGCONT)
                slot.proc.send_signal(signal.SIGTERM)
        for slot in self.slots:
            if slot.proc is not None:
                try:
                    code = slot.proc.wait(60)
                except subprocess.TimeoutExpired:
                    slot.proc.kill()
                    code = slot.proc.wait(30)
                if code != 0:
                    self.problems.append(f"agent {slot.id} ended with {code} on SIGTERM")

    def close(self) -> None:
        """Stop everything still running: agents, the proxy and Redis."""
        for slot in self.slots:
            if slot.proc is not None:
                stop_process(slot.proc)
        self.engine.close()
        self.proxy.close()
        self.redis.stop()

    # -- the checks -------------------------------------------------------------------

    def check(self) -> list[str]:
        """Everything that went wrong (empty when nothing did); fills in the figures."""
        problems = list(self.problems) + [f"died by itself: {d}" for d in self.deaths]
        starts, ends = self._read_runs()
        fig = self.figures
        fig.workflows = len(self.pushed)
        fig.runs = len(starts)
        runs_of = Counter((tag, name) for _, _, tag, name, _, _ in starts)
        for tag, (wid, wf) in self.pushed.items():
            try:
                st = self.engine.status(wid)
            except NotFoundError:
                st = None
            if st is None or st.name != tag:
                fig.lost += 1
                problems.append(f"workflow {tag} ({wid}) lost")
                continue
            if st.state not in FINISHED:
                fig.stuck += 1
                problems.append(f"workflow {tag} ({wid}) stuck {st.state}: {st.counts}")
                continue
            fig.tasks += len(st.tasks)
            doomed = any(t.payload["f"] < 0 for t in wf.tasks)
            fig.failed_workflows += doomed
            want = "failed" if doomed else "succeeded"
            if st.state != want:
                problems.append(f"workflow {tag} is {st.state}, expected {want}")
            outputs = {t.name: t.output for t in st.tasks}
            for t in st.tasks:
                runs = runs_of[(tag, t.name)]
                if t.state == "succeeded":
                    out = t.output
                    if (out["by"], out["a"]) != (t.agent, t.attempts):
                        problems.append(
                            f"{tag}.{t.name}: output of {out['by']} attempt {out['a']} "
                            f"recorded for {t.agent} attempt {t.attempts} (a zombie's)"
                        )
                    saw = {p: [outputs[p]["by"], outputs[p]["a"]] for p in t.parents}
                    if out["saw"] != saw:
                        problems.append(f"{tag}.{t.name} saw {out['saw']}, parents gave {saw}")
                    extra = runs - (t.failures + 1)
                    fig.duplicates += max(extra, 0)
                    fig.tasks_run_again += extra > 0
                    if t.failures > t.payload["f"]:
                        problems.append(f"{tag}.{t.name}: {t.failures} failures: {t.error}")
                elif not doomed:
                    problems.append(f"{tag}.{t.name} ended {t.state}: {t.error}")
        for when, _, tag, name, attempt, saw in starts:
            for parent, got in saw.items():
                done = None if got is None else ends.get((tag, parent, got[0], got[1]))
                if done is None or done > when:
                    problems.append(
                        f"{tag}.{name} attempt {attempt} started before {parent} succeeded"
                    )
        fig.rejected = sum(1 for e in self._rejections())
        fig.run_twice_at_once = self._overlapping()
        if fig.run_twice_at_once and not (self.plan.kills or self.plan.freezes):
            # no agent was killed or frozen: every agent stayed healthy throughout
            problems.append(f"{fig.run_twice_at_once} task(s) ran on two agents at once")
        try:
            assert_stats_agree(self.engine)
        except AssertionError as e:
            problems.append(f"counters differ from a recount: {e}")
        return problems

    def _overlapping(self) -> int:
        """How many tasks had two runs going at the same time (by the runs' start and
        end lines; a run that never logged its end, cut short by a SIGKILL, is left out)."""
        spans: dict[tuple[str, str], list[tuple[float, float]]] = {}
        opened: dict[tuple[str, str, str, str], float] = {}
        for path in self.logs.glob("*.log"):
            for line in path.read_text().splitlines():
                parts = line.split(" ", 6)
                if len(parts) < 7:
                    continue
                kind, when, me, tag, name, attempt, _ = parts
                key = (tag, name, me, attempt)
                if kind == "S":
                    opened[key] = float(when)
                elif key in opened:
                    spans.setdefault((tag, name), []).append((opened.pop(key), float(when)))
        twice = 0
        for runs in spans.values():
            runs.sort()
            twice += any(b[0] < a[1] for a, b in zip(runs, runs[1:], strict=False))
        return twice

    def _rejections(self) -> list[str]:
        found: list[str] = []
        for path in self.folder.glob("*.err"):
            for line in path.read_text().splitlines():
                m = re.search(r"tasks? done, ([\d,]+) rejected", line)
                if m:
                    found += [line] * int(m.group(1).replace(",", ""))
        return found

    def _read_runs(self) -> tuple[list[Start], dict[tuple[str, str, str, int], float]]:
        starts: list[Start] = []
        ends: dict[tuple[str, str, str, int], float] = {}
        for path in self.logs.glob("*.log"):
            for line in path.read_text().splitlines():
                parts = line.split(" ", 6)
                if len(parts) < 7:
                    continue  # cut short by a SIGKILL
                kind, when, me, tag, name, attempt, extra = parts
                if kind == "S":
                    starts.append((float(when), me, tag, name, int(attempt), json.loads(extra)))
                elif kind == "E":
                    ends[(tag, name, me, int(attempt))] = float(when)
        return starts, ends


Start = tuple[float, str, str, str, int, dict[str, Any]]
