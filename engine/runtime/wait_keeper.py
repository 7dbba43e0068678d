"""The wait tasks' keeper: activates wait tasks as they are reached and ends them when
their timers are due (``waits.lua``), woken by ``P:wake:~wait`` and by its own timer.

Every agent runs one in a thread (:class:`engine.runtime.agent.Agent`); the script is
idempotent, so any number may. No polling: between wake-ups it sleeps until the next
timer, or ``backstop_s`` at most (a lost wake-up, a timer armed on another shard's
clock).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import redis
from redis.backoff import ExponentialBackoff

from engine.runtime import child_runs
from engine.runtime.retrying import Backoff
from engine.spec.wait_tasks import WAIT_TYPE
from engine.store.calls import WaitsPass

if TYPE_CHECKING:
    from engine.runtime.deployment import Runner

log = logging.getLogger("redisflow.waits")


class WaitKeeper:
    """Run :meth:`step` on every wake-up and when the next timer is due."""

    def __init__(self, engine: Runner, backstop_s: float = 2.0) -> None:
        self.engine = engine
        self.backstop_s = backstop_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._passing = threading.Lock()  # held by the thread's pass (stop waits for it)

    def step(self) -> float | None:
        """One pass over every shard: wait tasks reached, timers due, child runs to
        start, to report and to cancel; seconds until the next timer (None for none)."""
        nearest: float | None = None
        for shard in self.engine.keys.all_shards():
            acks: list[str] = []
            for _ in range(100):  # at most 50,000 of each per shard per pass
                done = self.engine.store.calls.waits(shard, acks=acks)
                acks = self._children(done)
                if not done.more and not acks:
                    break
            if done.next_in_ms is not None:
                s = done.next_in_ms / 1000
                nearest = s if nearest is None else min(nearest, s)
        return nearest

    def _children(self, done: WaitsPass) -> list[str]:
        """Start, report and cancel the child runs handed out; the acks to send. One that
        fails is logged and left leased: a keeper takes it again in 30 s."""
        for member in done.spawns:
            self._guard(child_runs.spawn, member)
        acks = [f"e:{wid}" for wid in done.ends if self._guard(child_runs.report_end, wid)]
        acks += [f"o:{wid}" for wid in done.orphans if self._guard(child_runs.cancel_orphan, wid)]
        return acks

    def _guard(self, step: Callable[[Runner, str], None], arg: str) -> bool:
        """Run ``step(engine, arg)``; False when it failed (logged, left to a retry)."""
        try:
            step(self.engine, arg)
        except (redis.ConnectionError, redis.TimeoutError):
            raise  # Redis away: the pass ends, the run loop backs off
        except Exception as e:  # noqa: BLE001 - one child's trouble must not stop the rest
            log.warning("wait keeper: %s %s: %s", step.__name__, arg, e)
            return False
        return True

    def run(self) -> None:
        """Until :meth:`stop`: a pass, then sleep until a wake-up or the next timer."""
        store = self.engine.store
        pubsub: Any = None
        backoff = Backoff(ExponentialBackoff(cap=self.backstop_s, base=0.1))
        while not self._stop.is_set():
            try:
                if pubsub is None:
                    shards = self.engine.keys.all_shards()
                    pubsub = store.reads.pubsub(s.wake(WAIT_TYPE) for s in shards)
                with self._passing:
                    if self._stop.is_set():
                        break
                    nearest = self.step()
                backoff.succeeded()
                wait = self.backstop_s if nearest is None else min(nearest, self.backstop_s)
                deadline = time.monotonic() + wait
                while not self._stop.is_set():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    if pubsub.get_message(timeout=min(left, 0.5)) is not None:
                        while pubsub.get_message(timeout=0) is not None:
                            pass
                        break
            except Exception as e:  # noqa: BLE001 - the thread must live on: log, retry
                if self._stop.is_set():
                    break  # stopping: its engine may be closed already
                pause = backoff.failed()
                log.warning("wait keeper: %s", e)
                if pubsub is not None:
                    try:
                        pubsub.close()
                    except Exception:  # noqa: BLE001, S110 - closing a broken connection
                        pass
                    pubsub = None
                self._stop.wait(pause)
        if pubsub is not None:
            pubsub.close()

    def start(self) -> threading.Thread:
        """Run in a daemon thread."""
        self._thread = threading.Thread(target=self.run, name="rf-waits", daemon=True)
        self._thread.start()
        return self._thread

    def stop(self, timeout: float = 0.0) -> None:
        """Stop it: a pass under way ends first (up to 5 s) and none starts after, so
        nothing of it acts once this returns; the thread itself ends within its next
        half-second wait (``timeout``: wait that long for it; by default not at all: it
        holds nothing an agent must hand back)."""
        self._stop.set()
        if self._passing.acquire(timeout=5):
            self._passing.release()
        if self._thread is not None and timeout > 0:
            self._thread.join(timeout)
