"""The agent: claims ready tasks of its types, runs their handlers, reports outcomes.

One loop per agent. Each turn reports the outcomes gathered so far and claims as many
tasks as there are free slots, in one pipelined round trip. With ``concurrency=1``
handlers run inline (the fastest path for short tasks); otherwise in a thread pool.
``async def`` handlers run on the agent's event loop (a thread of its own), up to
``concurrency`` of them awaited at once. An
idle agent blocks on its types' wake-up channels, with a slow timer as a safety net
because pub/sub can lose messages. A second thread renews the lease and does the
shared housekeeping (reaping dead agents, promoting retries, retention).

Redis going away (a dropped connection, a restart, a server still loading) never ends an
agent: every step of the loop backs off and tries again, then resyncs from the state
Redis holds, and a stopping agent keeps trying to report and leave as long as its lease
could still hold. Only SIGTERM/SIGINT, or an error that retrying cannot cure (a refused
password or ACL permission, a bug), ends :meth:`Agent.run`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import queue
import signal
import socket
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis

from engine.core.outcomes import FATAL, SKIP, outcome_of
from engine.core.task import Handler, Task, TaskFailed
from engine.errors import EarlierReleaseError, LeaseLostError, NotReplicatedError
from engine.runtime.deployment import Host
from engine.runtime.handlers import EventLoop, awaited, is_async
from engine.runtime.json_logs import about
from engine.runtime.retrying import Backoff, transient
from engine.runtime.side_work import SideWork
from engine.runtime.tasklogs import BUDGET, TaskLogs
from engine.runtime.wait_keeper import WaitKeeper
from engine.spec.condition_pool import ConditionPool
from engine.spec.conditions import gate
from engine.store import Outcome, ShardKeys
from engine.store.calls import late_error
from engine.store.codec import RECORD_FORM
from engine.store.scripts import ScriptBatch

log = logging.getLogger("redisflow.agent")

# Without a concurrency given: plain handlers run inline, one at a time (the fastest for
# no-op tasks and for I/O of a loopback round trip, as threads cost more than they
# save); async handlers are awaited up to ASYNC_CONCURRENCY at once.
DEFAULT_CONCURRENCY = 1
ASYNC_CONCURRENCY = 32
INLINE_BATCH_S = 0.05
MAX_INLINE_BATCH = 256
WATCH_S = 0.25  # how often a task past its timeout is looked for, while any has one
# Between housekeeping rounds while retention has a backlog (maintain said a shard is
# still behind): rounds of about as long as this pause, so the sweep takes at most about
# half of the keeper's time and Redis's while it catches up.
SWEEP_PAUSE_S = 0.05
SHORT_WARN_S = 10.0  # with wait_replicas: at most one warning this often about shortfalls
EARLIER_WARN_S = 60.0  # at most one warning this often about agents of an earlier release


DRAIN_ASKED = 2  # heartbeat.lua's answer when an operator asked the agent to drain
CONDITION_BUDGET_S = 1.0  # wall-clock seconds one `when:` evaluation may take
MAX_EVALUATORS = 4  # condition evaluator processes an agent keeps at most
# An attempt is taken as still ours, with no question to Redis, for this share of the
# lease after the agent's last renewal began (see Agent._execute).
FENCE_SHARE = 0.5


# An Outcome made as the tuple it is: a NamedTuple's own constructor costs four times as much
# (a hot path: one per task).
_new_outcome = tuple.__new__


def _outcome(task: Task, kind: str, value: str) -> Outcome:
    return _new_outcome(Outcome, (task.workflow_id, task.key, task.attempt, kind, value))


class Agent:
    """A worker that runs tasks of the types it has handlers for.

    Example:
        >>> agent = Agent(engine, agent_id="sampleApp", handlers={"": lambda task: None})
        >>> agent.run(until_idle=True)

    Args:
        engine: the deployment to work for.
        agent_id: unique per logical worker; a restart with the same id takes back the
            tasks recorded as this agent's.
        handlers: task type -> callable taking a :class:`Task`, plain or ``async def``;
            its return value (any JSON value) is the task's output, an exception fails the
            attempt.
        concurrency: how many tasks run at once: async handlers awaited at once on the
            agent's event loop, plain ones in threads (inline for 1). Default: 1, or
            :data:`ASYNC_CONCURRENCY` when a handler is ``async def``.
        batch: how many tasks one claim takes at most (default: ``concurrency``; with
            inline handlers, sized from their measured time, up to 256).
        lease_s: how long the agent's tasks stay its own without a heartbeat.
        heartbeat_s: how often the lease is renewed (default a third of the lease); keep
            it under half the lease, or tasks started late in a renewal's interval each
            cost a question to Redis first (:data:`FENCE_SHARE`).
        idle_check_s: the safety timer of an idle agent.
        side: work to run beside the tasks, each in a thread of its own, started with
            the agent and stopped with it (:mod:`engine.runtime.side_work`): a scheduler
            (:class:`engine.schedules.scheduler.SchedulerThread`; any number of agents may
            fire schedules' ticks). The agent's own wait keeper always runs.
        log_budget: bytes of task logs the deployment keeps (:mod:`engine.runtime.tasklogs`;
            0: no limit); give every agent the same.
        condition_budget_s: the wall-clock seconds a task's ``when:`` condition may take
            to evaluate (in a worker process, :mod:`engine.spec.condition_pool`); past it the
            evaluation is stopped and the task fails without a retry.
    """

    def __init__(
        self,
        engine: Host,
        agent_id: str,
        handlers: Mapping[str, Handler],
        *,
        concurrency: int | None = None,
        batch: int | None = None,
        lease_s: float = 15.0,
        heartbeat_s: float | None = None,
        idle_check_s: float = 2.0,
        maintain_s: float = 2.0,
        max_lost: int = 5,
        side: Sequence[SideWork] = (),
        log_budget: int = BUDGET,
        condition_budget_s: float = CONDITION_BUDGET_S,
    ) -> None:
        if not handlers:
            raise ValueError("an agent needs at least one handler")
        async_types = frozenset(t for t, h in handlers.items() if is_async(h))
        if concurrency is None:
            concurrency = ASYNC_CONCURRENCY if async_types else DEFAULT_CONCURRENCY
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if batch is not None and batch < 1:
            raise ValueError("batch must be at least 1")
        if not isinstance(agent_id, str) or not agent_id.strip():
            raise ValueError("an agent needs an id (unique per logical worker)")
        if not lease_s > 0:
            raise ValueError("lease_s must be above 0")
        if heartbeat_s is not None and not 0 < heartbeat_s < lease_s:
            raise ValueError("heartbeat_s must be above 0 and below lease_s")
        if not condition_budget_s > 0:
            raise ValueError("condition_budget_s must be above 0")
        self.engine = engine
        self.id = agent_id
        self.handlers = dict(handlers)
        self.types = sorted(self.handlers)
        self._async_types = async_types
        self.concurrency = concurrency
        # Inline handlers (concurrency 1) claim in batches sized to take about
        # INLINE_BATCH_S, from the measured handler time: 256 at once for no-op tasks (each
        # script call costs Redis a fixed ~30 µs before its first task: 256 halve it per
        # task against 128, and a call stays near 1.5 ms),
        # one at a time for slow ones, so a slow agent never sits on others' work.
        self._adaptive = batch is None and concurrency == 1 and not self._async_types
        self.batch = batch or (1 if concurrency == 1 else concurrency)
        self.lease_s = lease_s
        self.heartbeat_s = heartbeat_s or lease_s / 3
        self.idle_check_s = idle_check_s
        self.maintain_s = maintain_s
        self.max_lost = max_lost
        self.processed = 0
        self.rejected = 0
        self.unconfirmed = 0  # with wait_replicas: writes fewer replicas acknowledged
        self._short_warned = -SHORT_WARN_S
        self._earlier_warned = -EARLIER_WARN_S
        self._stopping = threading.Event()
        self._closed = threading.Event()  # set once deregistered: the heartbeat ends
        self._lease_lost = threading.Event()
        self._lost_shards: set[int] | None = None  # where to register again (None: all)
        self._registered = False  # once: from then on, leaving is owed
        # Set when Redis was away: claims may have run with their replies lost.
        self._resync = False
        self._pubsub: Any = None
        self._beat: threading.Thread | None = None  # started once registered
        self._results: queue.SimpleQueue[Outcome] = queue.SimpleQueue()
        self._ran: list[Outcome] = []  # inline handlers' outcomes (the loop's thread alone)
        self._inflight = 0
        self._pool: ThreadPoolExecutor | None = None
        self._event_loop: EventLoop | None = None
        # the store's parts this agent uses, bound once: the claim/report loop's calls
        self._calls = engine.store.calls
        self._reads = engine.store.reads
        self._scripts = engine.store.scripts
        self._to_expand: list[tuple[str, str]] = []  # maps made ready by our reports
        self._shards = engine.keys.all_shards()
        self._unstarted: list[Task] = []  # claimed, never started, when stopping
        self._token_at = float("inf")  # monotonic time of a rate limit's next token
        self._next_shard = 0
        self._max_output = engine.max_payload
        # tasks with a timeout, running here: their `cancelled` is set at the deadline
        self._watched: dict[int, tuple[float, Task]] = {}
        # every task running here (pool, event loop; an inline batch): their `cancelled`
        # is set when the lease is lost
        self._running: dict[int, Task] = {}
        self._inline: list[Task] = []  # an inline batch's tasks not started yet
        self._inline_task: Task | None = None  # and the one running
        self._watch_lock = threading.Lock()
        # beside the tasks: the wait keeper (every agent's), then what it was handed
        self.side: list[SideWork] = [WaitKeeper(engine, maintain_s), *side]
        self._logs = TaskLogs(engine, log_budget)  # what handlers write, and run times
        # `when:` conditions: evaluator processes, started by the first one to decide
        self._conditions = ConditionPool(min(concurrency, MAX_EVALUATORS), condition_budget_s)
        # Fencing (see _execute): the lease epoch grows at every loss and registration;
        # _lost_at[shard] is the epoch of the last on that shard; _held_until is the
        # monotonic time until which a claim of the current epoch is surely still ours.
        self._epoch = 0
        self._lost_at: dict[int, int] = {}
        self._held_until = float("-inf")
        self._dropped: queue.SimpleQueue[Task] = queue.SimpleQueue()
        self.dropped = 0  # claimed tasks not run: their attempt was no longer ours

    # -- lifecycle ----------------------------------------------------------------------

    def stop(self) -> None:
        """Stop claiming; in-flight tasks finish and are reported, then :meth:`run` returns."""
        self._stopping.set()

    def _info(self) -> str:
        return json.dumps(
            {
                "types": self.types,
                "concurrency": self.concurrency,
                "lease_s": self.lease_s,
                "heartbeat_s": self.heartbeat_s,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "started_at": time.time(),
                "records": RECORD_FORM,
            }
        )

    def _wait_for_earlier(self, e: EarlierReleaseError) -> None:
        """Registering was refused: agents of an earlier release are live (they would
        misread the task records this one writes). Say which, now and then, and pause;
        the loop tries again, and the agent starts once they have stopped."""
        now = time.monotonic()
        if now - self._earlier_warned >= EARLIER_WARN_S:
            self._earlier_warned = now
            log.warning(
                "agent %s waits to start: agents of an earlier redisflow release are live "
                "(%s) and would misread the task records this release writes; it starts "
                "once they have stopped (redisflow agents drain ID)",
                self.id,
                ", ".join(str(e).split()),
            )
        self._stopping.wait(self.heartbeat_s)

    def _register(self, everywhere: bool = False) -> list[Task]:
        """Register on every shard the first time (or ``everywhere``: nothing runs here),
        then again only where the lease was lost: on the others this agent's running
        tasks are still its own (registering there would start them again under a new
        attempt)."""
        tasks: list[Task] = []
        with self._watch_lock:
            lost, self._lost_shards = self._lost_shards, set()
            self._lease_lost.clear()
        if everywhere:
            lost = None
        with self._watch_lock:
            # registering restarts this agent's running tasks there under new attempts:
            # those claimed before are no longer its own
            self._epoch += 1
            epoch = self._epoch
            for shard in self._shards:
                if lost is None or shard.shard in lost:
                    self._lost_at[shard.shard] = epoch
        began = time.monotonic()
        first = not self._registered  # only a start waits for an earlier release's agents
        done: list[ShardKeys] = []
        for shard in self._shards:
            if lost is not None and shard.shard not in lost:
                continue
            try:
                tasks += self._calls.register(
                    shard, self.id, self._info(), int(self.lease_s * 1000), first
                )
            except NotReplicatedError as e:
                tasks += self._short(e)[0]
            except EarlierReleaseError:
                for gone in done:  # not started after all: no entry stays live
                    self._calls.stop(gone, self.id, [])
                self._lease_lost.set()
                raise
            done.append(shard)
        if lost is None or all(s.shard in lost for s in self._shards):
            self._renewed(began, epoch)
        self._registered = True
        if tasks:
            log.info("agent %s took back %d task(s) of its own", self.id, len(tasks))
        return tasks

    def run(self, until_idle: bool = False) -> None:
        """Work until :meth:`stop` (SIGTERM/SIGINT), or until no work is left if ``until_idle``."""
        installed = self._install_signals()
        # In-flight tasks are counted whenever there is a pool: async tasks too (its
        # threads start only when a plain handler's task is submitted).
        if self.concurrency > 1 or self._async_types:
            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix=f"rf-{self.id}")
        if self._async_types:
            self._event_loop = EventLoop(f"rf-{self.id}-loop")
        self._lease_lost.set()  # not registered yet: the loop's first step registers
        self._beat = threading.Thread(target=self._heartbeat_loop, name="rf-heartbeat", daemon=True)
        for work in self.side:
            work.start()
        # the log shipper is the agent's own: it stops after the last reports (below)
        self._logs.start()
        try:
            self._loop(until_idle)
        finally:
            for work in self.side:
                work.stop()
            self._stopping.set()
            if self._registered:
                self._finish()
            self._logs.close()
            self._closed.set()
            if self._pubsub is not None:
                self._pubsub.close()
            if self._pool:
                self._pool.shutdown(wait=True)
            if self._event_loop:
                self._event_loop.close()
            self._conditions.close()
            if self._beat.is_alive():
                self._beat.join(timeout=self.heartbeat_s + 1)
            for sig, old in installed:
                signal.signal(sig, old)

    def _install_signals(self) -> list[tuple[signal.Signals, Any]]:
        """Stop on SIGTERM/SIGINT; returns each signal with the handler it had before."""
        if threading.current_thread() is not threading.main_thread():
            return []
        installed: list[tuple[signal.Signals, Any]] = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            installed.append((sig, signal.signal(sig, lambda *_: self.stop())))
        return installed

    def _leave(self) -> None:
        self._report()
        for shard in self._shards:
            unstarted = [
                t for t in self._unstarted if self.engine.keys.shard_of(t.workflow_id) == shard
            ]
            try:
                self._calls.stop(shard, self.id, unstarted)
            except NotReplicatedError as e:
                self._short(e)
        self._unstarted.clear()

    # -- the loop -----------------------------------------------------------------------

    def _loop(self, until_idle: bool) -> None:
        """Step after step until stopped; Redis going away only pauses it, with backoff."""
        backoff = Backoff()
        while not self._stopping.is_set():
            try:
                if self._step(until_idle):
                    return
                backoff.succeeded()
            except Exception as e:  # noqa: BLE001 - any error not transient is raised
                if not transient(e):
                    raise
                # Claims may have run with their replies lost, or Redis restarted: once
                # it answers, report and take back what Redis holds as ours.
                self._resync = self._registered
                wait = backoff.failed()
                log.warning("agent %s: Redis unavailable (%s); retrying in %.1fs", self.id, e, wait)
                self._stopping.wait(wait)

    def _step(self, until_idle: bool) -> bool:
        """Subscribe and register when due, report and claim, then wait for results or a
        wake-up. True when an until-idle agent has nothing left to do."""
        if self._pubsub is None:
            self._pubsub = self._reads.pubsub(s.wake(t) for s in self._shards for t in self.types)
        if self._resync:
            self._recover()
        if self._lease_lost.is_set():
            if self._registered:
                log.warning("agent %s lost its lease; registering again", self.id)
            try:
                self._start(self._register())
            except EarlierReleaseError as e:
                self._wait_for_earlier(e)
                return False
        if self._beat is not None and self._beat.ident is None:
            self._beat.start()
        if self._turn():
            return False
        if self._inflight:
            self._wait_result(self.idle_check_s)
            return False
        if until_idle and self._nothing_left():
            return True
        self._wait_wakeup(self._pubsub)
        return False

    def _turn(self) -> int:
        """Report outcomes and claim free slots' worth of tasks in one round trip.

        With several shards the claim goes first to the shard whose turn it is; only when
        it returns fewer tasks than there are free slots are the others asked, one after
        another, for the rest: never more tasks than free slots.
        """
        epoch = self._epoch  # before the claim: a lease lost after it fences its tasks off
        outcomes = self._collect()
        free = self.concurrency - self._inflight if self._pool else self.batch
        want = min(free, self.batch) if free > 0 and not self._stopping.is_set() else 0
        shards = self._shards
        if len(shards) > 1:
            self._next_shard = (self._next_shard + 1) % len(shards)
            shards = shards[self._next_shard :] + shards[: self._next_shard]
        pipe = self._scripts.batch()
        if outcomes:
            self._queue_report(pipe, outcomes)
        if want:
            self._queue_claim(pipe, shards[0], want)
        elif not outcomes:
            return 0
        replies = self._execute_pipe(pipe, outcomes)
        reports = len(self._report_shards(outcomes)) if outcomes else 0
        failed = self._count_reports(replies[:reports], outcomes)
        # the outcomes go before the claimed tasks are decoded (ClaimRows)
        del outcomes
        self._expand()
        tasks = self._claimed(replies[reports:], shards[0])
        del replies
        for shard in shards[1:] if want else []:
            if len(tasks) >= want or self._lease_lost.is_set():
                break
            pipe = self._scripts.batch()
            self._queue_claim(pipe, shard, want - len(tasks))
            tasks.extend(self._claimed(self._execute_pipe(pipe, []), shard))
        claimed = len(tasks)
        self._start(tasks, epoch)
        if failed is not None:
            raise failed  # after the claims' tasks started: the loop backs off
        return claimed

    def _queue_claim(self, pipe: ScriptBatch, shard: ShardKeys, count: int) -> None:
        # one claim over all our types: the best `count` tasks among them
        pipe.add(self._calls.claim_rows_call(shard, self.id, self.types, count))

    def _claimed(self, replies: list[Any], shard: ShardKeys) -> list[Task]:
        """The tasks in claim replies (of ``shard``); a lost lease is flagged for the
        main loop."""
        tasks: list[Task] = []
        for reply in replies:
            if isinstance(reply, LeaseLostError):
                self._lose_lease(shard)
                continue
            if isinstance(reply, Exception):
                raise reply
            claimed = reply.tasks()  # a ClaimRows, decoded now that the outcomes are gone
            token_in = claimed.token_in_s
            if token_in is not None:  # a rate limit's next token: sleep no longer
                self._token_at = min(self._token_at, time.monotonic() + token_in)
            tasks.extend(claimed)
        return tasks

    def _start(self, tasks: list[Task], epoch: int | None = None) -> None:
        """Run ``tasks``, claimed in lease epoch ``epoch`` (default: the current one).
        Inline, ``tasks`` is emptied as they run, each let go once it ran."""
        if not tasks:
            return
        if epoch is None:
            epoch = self._epoch
        if self._pool is None:
            began = time.perf_counter()
            ran = 0
            # A hot path: names bound once per batch; outcomes kept in a list of the
            # loop's own, which the next report takes (_collect). Each task is popped
            # and let go once it ran (the list held the caller's only reference): a
            # batch never holds its tasks and all their outcomes at once, which would
            # cost a garbage collection per batch.
            tasks.reverse()
            self._inline = tasks  # those not started yet, and the one running (below)
            stopping, execute, done = self._stopping, self._execute, self._ran
            while tasks:
                if stopping.is_set():
                    # the rest of the batch goes back to ready when we leave, its
                    # attempt not counted
                    self._unstarted.extend(reversed(tasks))
                    tasks.clear()
                    break
                t = self._inline_task = tasks.pop()
                outcome = execute(t, epoch)
                if outcome is not None:
                    done.append(outcome)
                ran += 1
            self._inline, self._inline_task = [], None
            if self._adaptive and ran:
                per_task = (time.perf_counter() - began) / ran
                self.batch = max(
                    1, min(MAX_INLINE_BATCH, int(INLINE_BATCH_S / max(per_task, 1e-6)))
                )
            return
        self._inflight += len(tasks)
        if self._event_loop is not None:
            self._event_loop.start_all(
                self._execute_async(t, epoch) for t in tasks if t.type in self._async_types
            )
        for t in tasks:
            if t.type not in self._async_types:
                self._pool.submit(self._execute_and_report, t, epoch)

    def _execute_and_report(self, task: Task, epoch: int) -> None:
        running = self._running  # a dict's set and pop are atomic: no lock on this path
        running[id(task)] = task
        try:
            outcome = self._execute(task, epoch)
            if outcome is not None:
                self._results.put(outcome)
        finally:
            running.pop(id(task), None)

    def _handler(self, task: Task) -> Handler:
        handler = self.handlers.get(task.type)
        if handler is None:  # taken back after a restart that dropped this type
            raise TaskFailed(f"agent {self.id} has no handler for type {task.type!r}")
        return handler

    def _execute(self, task: Task, epoch: int) -> Outcome | None:
        """Run ``task`` (claimed in lease epoch ``epoch``): its outcome, or None when its
        attempt was no longer this agent's and its handler was not run. (A hot path: a
        task with no condition nor timeout pays a clock read, the log mark and its
        handler, no call more.)"""
        if task._when is not None:  # a condition: decided before the handler runs
            decided = gate(task, self._conditions)
            if decided is not None:
                return _outcome(task, *decided)
        # Fencing: the handler runs only while the attempt is surely ours. Nobody can take
        # it but by reaping this agent, and Redis reaps it only once its lease has run out:
        # a lease renewal that began at t (heartbeat or registration) keeps it ours until
        # t + lease at least (a Redis clock stepping forward shortens that by at most a
        # third of a lease: lease_clock in lib/lease.lua), so within FENCE_SHARE of the
        # lease after t, and with no loss or registration since the claim (the epoch), no
        # question to Redis is needed: the plain path pays one clock read. Past it (a slow
        # condition, a long wait for a thread, a stalled heartbeat) Redis is asked.
        if self._fenced(epoch) and not self._still_ours(task, epoch):
            self._drop(task)
            return None
        logs = self._logs
        mark = logs.begin(task)  # what the handler writes is this attempt's
        if task.timeout is not None:
            outcome = self._execute_watched(task)
        else:
            try:
                out = self._handler(task)(task)
                if out is not None and inspect.isawaitable(out):  # async, not told by is_async
                    out = asyncio.run(awaited(out))
                outcome = self._succeeded(task, out)
            except Exception as e:  # noqa: BLE001 - any handler error fails the attempt
                outcome = self._failed(task, e)
        logs.end(mark, outcome.kind == "ok")
        return outcome

    def _execute_watched(self, task: Task) -> Outcome:
        """_execute for a task with a timeout: its `cancelled` is set at the deadline."""
        self._watch(task)
        try:
            out = self._handler(task)(task)
            if out is not None and inspect.isawaitable(out):
                out = asyncio.run(awaited(out, task.timeout))
            if task._late:  # told at its deadline: it failed by it
                return self._failed(task, TaskFailed(late_error(task.timeout)))
            return self._succeeded(task, out)
        except Exception as e:  # noqa: BLE001 - any handler error fails the attempt
            return self._failed(task, e)
        finally:
            self._unwatch(task)

    async def _execute_async(self, task: Task, epoch: int) -> None:
        if task._when is not None:  # a condition: decided before the handler runs
            # in a thread: the loop goes on with other handlers while a worker evaluates
            decided = await asyncio.to_thread(gate, task, self._conditions)
            if decided is not None:
                self._results.put(_outcome(task, *decided))
                return
        if self._fenced(epoch):  # as in _execute
            if not await asyncio.to_thread(self._still_ours, task, epoch):
                self._drop(task)
                return
        token = self._logs.begin(task)  # this coroutine's context: its own log
        self._watch(task)
        self._running[id(task)] = task
        try:
            out = await asyncio.wait_for(self._handler(task)(task), task.timeout)
            outcome = self._succeeded(task, out)
        except TimeoutError:
            task.cancelled.set()
            outcome = self._failed(task, TaskFailed(f"timed out after {task.timeout:g}s"))
        except Exception as e:  # noqa: BLE001 - any handler error fails the attempt
            outcome = self._failed(task, e)
        finally:
            self._unwatch(task)
            self._running.pop(id(task), None)
        self._logs.end(token, outcome.kind == "ok")
        self._results.put(outcome)

    # -- timeouts: the engine fails an attempt past its deadline (housekeeping); here the
    # handler is told, through task.cancelled, so it can stop

    def _watch(self, task: Task) -> None:
        if task.timeout is not None:
            with self._watch_lock:
                self._watched[id(task)] = (time.monotonic() + task.timeout, task)

    def _unwatch(self, task: Task) -> None:
        if task.timeout is not None:
            with self._watch_lock:
                self._watched.pop(id(task), None)

    def _lose_lease(self, shard: ShardKeys) -> None:
        """Redis declared this agent dead on ``shard`` (heartbeats missed while Redis
        ran): its running tasks there were handed on to others, so their handlers are
        told (``task.cancelled``; an ``--exec`` child is signalled) and their results will
        be refused. The loop registers there again."""
        one = len(self._shards) == 1
        with self._watch_lock:
            # the pool's and event loop's tasks, and an inline batch's: the one running
            # and those not started yet (told too: harmless, fencing drops them)
            running = [
                t
                for t in [*self._running.values(), *self._inline, *self._inline_now()]
                if one or self.engine.keys.shard_of(t.workflow_id).shard == shard.shard
            ]
            if self._lost_shards is not None:
                self._lost_shards.add(shard.shard)
            self._lease_lost.set()
            self._epoch += 1  # what was claimed there before is fenced off (_execute)
            self._lost_at[shard.shard] = self._epoch
            self._held_until = float("-inf")
        for task in running:
            task.cancelled.set()
        if running:
            log.warning(
                "agent %s lost its lease: %d running task(s) were handed on to others; "
                "their handlers are told to stop (task.cancelled)",
                self.id,
                len(running),
            )

    def _inline_now(self) -> list[Task]:
        task = self._inline_task
        return [] if task is None else [task]

    def _renewed(self, began: float, epoch: int) -> None:
        """Every shard's lease was renewed by calls that began at ``began`` (monotonic):
        claims of ``epoch`` are surely ours for a while (see :meth:`_execute`)."""
        with self._watch_lock:
            if self._epoch == epoch:
                self._held_until = began + FENCE_SHARE * self.lease_s

    def _renew(self, shard: ShardKeys) -> int:
        """Renew this agent's lease on ``shard``: heartbeat.lua's answer (0: the lease is
        gone; DRAIN_ASKED: an operator asked the agent to drain)."""
        try:
            return self._calls.heartbeat(shard, self.id, int(self.lease_s * 1000))
        except NotReplicatedError as e:
            return int(self._short(e)[0] or 0)

    def _fenced(self, epoch: int) -> bool:
        """Whether a claim of lease epoch ``epoch`` must be confirmed in Redis before its
        handler starts (see :meth:`_execute`): a loss or registration since, or the last
        renewal too long ago."""
        return epoch != self._epoch or time.monotonic() >= self._held_until

    def _still_ours(self, task: Task, epoch: int) -> bool:
        """Whether the attempt of ``task``, claimed in lease epoch ``epoch``, is still this
        agent's, asked of Redis: a heartbeat on its shard. Its answer that the lease is
        live means nobody reaped this agent since the claim (reaping removes the lease,
        and only a registration, which starts a new epoch, puts it back)."""
        shard = self.engine.keys.shard_of(task.workflow_id)
        backoff = Backoff()
        while self._lost_at.get(shard.shard, 0) <= epoch:
            try:
                alive = self._renew(shard)
            except Exception as e:  # noqa: BLE001 - no answer: the handler must not run
                if transient(e) and not self._stopping.is_set():
                    self._stopping.wait(backoff.failed())
                    continue
                log.warning(
                    "agent %s could not confirm it holds %s: %s",
                    self.id,
                    task.key,
                    e,
                    extra=about(task),
                )
                self._unstarted.append(task)  # handed back when the agent leaves
                return False
            if not alive:
                self._lose_lease(shard)
                return False
            return self._lost_at.get(shard.shard, 0) <= epoch
        return False

    def _drop(self, task: Task) -> None:
        """``task``'s attempt is no longer this agent's: its handler is not run."""
        log.warning(
            "agent %s: task %s of workflow %s (attempt %d) is no longer its own (its lease "
            "was lost before the handler started): not run here",
            self.id,
            task.name,
            task.workflow_id,
            task.attempt,
            extra=about(task),
        )
        self._dropped.put(task)

    def _cancel_late(self) -> None:
        """Set ``cancelled`` on the tasks running here past their timeout."""
        now = time.monotonic()
        with self._watch_lock:
            late = [k for k, (deadline, _) in self._watched.items() if deadline <= now]
            for k in late:
                task = self._watched.pop(k)[1]
                task._late = True  # whatever it returns now, the attempt timed out
                task.cancelled.set()

    def _succeeded(self, task: Task, out: Any) -> Outcome:
        if out is None:
            return _outcome(task, "ok", "")
        text = json.dumps(out, separators=(",", ":"))
        if len(text) > self._max_output:
            raise TaskFailed(f"output is {len(text)} bytes, over the {self._max_output}-byte limit")
        return _outcome(task, "ok", text)

    def _failed(self, task: Task, e: Exception) -> Outcome:
        kind = outcome_of(e)
        if kind is not None:  # NonRetryable, Abort, Skip (engine.core.outcomes)
            how, msg = kind
            if how == SKIP and task.item_index is not None:
                how, msg = FATAL, f"Skip is not supported in an item of a map ({msg})"
            return _outcome(task, how, msg[:65536])
        if isinstance(e, TaskFailed):
            msg = str(e)
        else:
            msg = "".join(traceback.format_exception_only(type(e), e)).strip()
        return _outcome(task, "err", msg[:65536])

    def _collect(self) -> list[Outcome]:
        out, self._ran = self._ran, []
        while True:
            try:
                out.append(self._results.get_nowait())
            except queue.Empty:
                break
        if self._pool is not None:
            self._inflight -= len(out)
        if not self._dropped.empty():
            self._count_dropped()
        return out

    def _count_dropped(self) -> None:
        while True:
            try:
                self._dropped.get_nowait()
            except queue.Empty:
                return
            self.dropped += 1
            if self._pool is not None:
                self._inflight -= 1

    def _wait_result(self, timeout: float) -> None:
        try:
            first = self._results.get(timeout=timeout)
        except queue.Empty:
            return
        self._results.put(first)

    def _report_shards(self, outcomes: list[Outcome]) -> dict[int, list[Outcome]]:
        if len(self._shards) == 1:  # the usual deployment: no shard to work out
            return {self._shards[0].shard: outcomes} if outcomes else {}
        by: dict[int, list[Outcome]] = {}
        for o in outcomes:
            by.setdefault(self.engine.keys.shard_of(o.workflow_id).shard, []).append(o)
        return by

    def _queue_report(self, pipe: ScriptBatch, outcomes: list[Outcome]) -> None:
        self._logs.queue(pipe)  # ended attempts' lines, ahead of their outcomes
        for shard_index, items in sorted(self._report_shards(outcomes).items()):
            shard = self.engine.keys.shard(shard_index)
            pipe.add(self._calls.complete_call(shard, self.id, items))

    def _count_reports(self, replies: list[Any], outcomes: list[Outcome]) -> Exception | None:
        """Count the outcomes recorded and rejected. Those whose report failed (Redis out
        of memory, read-only, ...) are kept to send again; the first failure is returned."""
        failed: Exception | None = None
        groups = [items for _, items in sorted(self._report_shards(outcomes).items())]
        for reply, items in zip(replies, groups, strict=True):
            if isinstance(reply, Exception):
                self._keep(items)
                failed = failed or reply
                continue
            self.processed += sum(1 for r in reply.codes if r == 1)
            self.rejected += sum(1 for r in reply.codes if r == 0)
            self._to_expand.extend(reply.expand)
        return failed

    def _expand(self) -> None:
        """Expand the maps our reports made ready (their items come from a parent's
        output). A failure leaves the rest to housekeeping, which finds them in Redis."""
        while self._to_expand:
            wid, c = self._to_expand.pop()
            try:
                self._calls.expand(wid, c)
            except NotReplicatedError as e:
                self._short(e)

    def _report(self) -> None:
        outcomes = self._collect()
        if not outcomes:
            return
        pipe = self._scripts.batch()
        self._queue_report(pipe, outcomes)
        failed = self._count_reports(self._execute_pipe(pipe, outcomes), outcomes)
        if failed is not None:
            raise failed

    def _keep(self, outcomes: list[Outcome]) -> None:
        """Outcomes not reported after all: queue them to be sent again."""
        for o in outcomes:
            self._results.put(o)
        if self._pool is not None:
            self._inflight += len(outcomes)

    def _execute_pipe(self, pipe: ScriptBatch, outcomes: list[Outcome]) -> list[Any]:
        """Run a round trip; if the connection drops, keep its outcomes to send again."""
        try:
            return pipe.execute()
        except NotReplicatedError as e:  # recorded on the master: nothing to send again
            return self._short(e)
        except (redis.ConnectionError, redis.TimeoutError):
            self._keep(outcomes)
            # The server may have run the claims and only the replies were lost: those
            # tasks are recorded as ours, and nothing else would ever run them.
            self._resync = True
            raise

    def _short(self, e: NotReplicatedError) -> list[Any]:
        """Writes the replicas did not all acknowledge in time (``wait_replicas``): they
        stand on the master and cannot be taken back, so the agent goes on with their
        replies, counts them and says so (once per :data:`SHORT_WARN_S`)."""
        self.unconfirmed += len(e.unconfirmed)
        now = time.monotonic()
        if now - self._short_warned >= SHORT_WARN_S:
            self._short_warned = now
            log.warning("agent %s: %s", self.id, e)
        return e.results

    def _recover(self) -> None:
        """After a failed round trip: report everything, then take back what is ours."""
        while self._inflight > 0 and not self._stopping.is_set():
            self._wait_result(1.0)
            self._report()
        if self._inflight:
            return  # stopping: the final drain reports, and leaving hands the rest back
        self._report()
        log.warning("agent %s: connection lost; taking back the tasks Redis holds for it", self.id)
        self._resync = False
        self._start(self._register(everywhere=True))

    def _finish(self) -> None:
        """Report what is in flight, then leave, handing back what never started.

        The heartbeat goes on meanwhile, or a drain longer than the lease would see the
        tasks handed on and their outcomes rejected. While Redis is away this keeps trying
        as long as the lease could still hold: after that, others run the tasks anyway.
        """
        backoff = Backoff()
        give_up: float | None = None
        while True:
            try:
                while self._inflight > 0:
                    self._wait_result(1.0)
                    self._report()
                self._leave()
                return
            except Exception as e:  # noqa: BLE001 - run() is ending: say why, don't raise
                now = time.monotonic()
                give_up = give_up or now + self.lease_s
                if not transient(e) or now >= give_up:
                    log.warning("agent %s could not report and leave: %s", self.id, e)
                    return
                time.sleep(min(backoff.failed(), give_up - now))

    def _next_due(self) -> float:
        """Seconds until the earliest retry backoff ends or a rate limit's next token a
        claim saw (``idle_check_s`` if none sooner)."""
        due = self._reads.next_due_s(self._shards)
        wait = self.idle_check_s if due is None else min(self.idle_check_s, due)
        token_at, self._token_at = self._token_at, float("inf")
        return max(0.0, min(wait, token_at - time.monotonic()))

    def _wait_wakeup(self, pubsub: Any) -> None:
        # Retries whose backoff ends send no wake-up: wait no longer than the first one.
        # A connection error ends the wait for the loop to handle, even while draining
        # the messages after a wake-up; redis-py subscribes again when it reconnects.
        deadline = time.monotonic() + self._next_due()
        while not self._stopping.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            msg = pubsub.get_message(timeout=min(left, 0.5))
            if msg is not None:
                while pubsub.get_message(timeout=0) is not None:
                    pass
                return

    def _nothing_left(self) -> bool:
        """True when nothing this agent serves can come from the work it sees: its queues
        are empty, and no running or paused workflow has a task (a map's item or step
        included) of its types that has not ended."""
        return self._reads.nothing_left(self._shards, self.types)

    # -- lease --------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        next_maintain = 0.0
        tick = pause = min(self.heartbeat_s, self.maintain_s)
        next_beat = time.monotonic() + tick  # registration has just renewed the leases
        # wake for the next beat on time, not on the first tick after it: the fencing
        # window (_held_until) counts from each renewal's start
        while not self._closed.wait(
            min(pause, WATCH_S if self._watched else pause, max(0.0, next_beat - time.monotonic()))
        ):
            pause = tick
            self._cancel_late()
            try:
                now = time.monotonic()
                if now >= next_beat:
                    next_beat = now + self.heartbeat_s
                    epoch, renewed = self._epoch, True
                    for shard in self._shards:
                        alive = self._renew(shard)
                        if alive == DRAIN_ASKED and not self._stopping.is_set():
                            log.info("agent %s: asked to drain: finishing, then stopping", self.id)
                            self.stop()
                        if not alive:
                            self._lose_lease(shard)
                            renewed = False
                    if renewed:
                        self._renewed(now, epoch)
                if now >= next_maintain:
                    # each shard's housekeeping is one agent's while it lives (reap.lua)
                    behind = 0
                    try:
                        behind = self.engine.maintain(
                            max_lost=self.max_lost,
                            keeper=self.id,
                            hold_s=3 * self.maintain_s,
                            lease_s=self.lease_s,
                            waits=False,  # the agent's own keeper thread runs them
                        )[4]
                    except NotReplicatedError as e:
                        self._short(e)
                    if behind:  # finished runs past their retention wait: again soon
                        pause = SWEEP_PAUSE_S
                    next_maintain = time.monotonic() + (pause if behind else self.maintain_s)
            except Exception as e:  # noqa: BLE001 - the thread must live on: log, retry
                log.warning("agent %s heartbeat failed: %s", self.id, e)
