"""The scheduler: fires schedules' ticks, exactly once each, however many run.

Any number of schedulers may run (``redisflow scheduler``, or inside agents with
``redisflow-agent --scheduler``); there is no leader and no lock. Each one reads the
schedules whose due time has come (``P:sdue``, by Redis's clock), plans each (the ticks
due, the catch-up policy: :func:`engine.schedules.plan`) and sends one ``tick.lua`` call
per schedule. The call is a compare-and-set on the due time the plan started from: when
two schedulers plan the same tick, the first call fires it and moves the due time on,
the second is refused (``taken``) and writes nothing. Each tick is also recorded
(``P:stk:<name>``), so a manual trigger, a backfill or a late call never runs a tick
twice.

Between passes a scheduler sleeps until the next due time, at most a second (the safety
timer: pub/sub can lose messages), or until a schedule changes (``P:sched``).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.runtime.retrying import Backoff, transient
from engine.spec.rate_limits import rate_keys
from engine.spec.schemas import check_input

from ..errors import (
    DefinitionError,
    NotFoundError,
    NotReplicatedError,
    PartialWriteError,
    StateError,
)
from ..store.codec import CompiledWorkflow, encode_input, run_options
from ..store.keys import ShardKeys
from ..store.schedules import (
    S_SPEC,
    S_VERSION,
    DueSchedule,
    Run,
    ScheduleTick,
    TickOutcome,
    TickResult,
)
from ..store.scripts import Call
from .clock import Cadence, Plan, plan, run_input
from .spec import ScheduleSpec

if TYPE_CHECKING:
    from engine.runtime.deployment import Runner

log = logging.getLogger("redisflow.scheduler")

GATED = ("skip", "buffer_one", "buffer_all")  # overlap policies that hold the gate s/<name>
SAFETY_S = 1.0  # the longest sleep: pub/sub is only a hint
DUE_BATCH = 10_000  # due schedules read per shard and pass (names and due times)
SCHEDULES_PER_CALL = 100  # schedules one tick.lua call ticks
BACKFILL_CHUNK = 100  # ticks per tick.lua call of a backfill
STUCK_MS = 200  # the pause after a pass whose calls all failed


def gate_of(name: str) -> str:
    """The gate a schedule's runs hold under overlap skip / buffer_one / buffer_all: one
    run at a time, the next ones queued (buffer) or not pushed (skip)."""
    return f"s/{name}"


@dataclass
class _Known:
    version: str
    spec: ScheduleSpec
    cadence: Cadence


@dataclass
class _Part:
    """One schedule's part of a tick.lua call, before its runs are laid out."""

    known: _Known
    groups: list[list[int]]  # the ticks of each run
    overlap: str
    expected_due: int | None = None
    plan: Plan | None = None


Templates = dict[str, tuple[CompiledWorkflow, int]]


class Ticker:
    """Builds tick.lua calls for schedules: the runs' inputs and workflows from each
    schedule's template (its latest version). Shared by the scheduler loop, trigger and
    backfill."""

    def __init__(self, engine: Runner, who: str) -> None:
        self.engine = engine
        self.who = who
        self._known: dict[str, _Known] = {}

    def known(self, name: str, version: str, spec_json: str) -> _Known:
        """The parsed spec and cadence of ``name`` at ``version`` (cached)."""
        k = self._known.get(name)
        if k is None or k.version != version:
            if len(self._known) > 100_000:
                self._known.clear()
            spec = ScheduleSpec.from_json(spec_json)
            k = self._known[name] = _Known(version, spec, Cadence(spec))
        return k

    def _rows(self, part: _Part, templates: Templates) -> list[tuple[CompiledWorkflow, str, str]]:
        """The workflows of a part's runs, as push_argv takes them."""
        spec = part.known.spec
        got = templates.get(spec.template)
        if got is None:
            got = templates[spec.template] = self.engine.compile_template(spec.template)
        compiled, version = got
        first = part.plan.first if part.plan else None
        count = part.plan.due if part.plan else 0
        rows = []
        for ticks in part.groups:
            value = run_input(part.known.cadence, ticks, first=first, count=count)
            if compiled.input_schema is not None:
                check_input(compiled.input_schema, value, compiled.name)
            gates: list[tuple[str, int]] = []
            if compiled.concurrency is not None:
                gate = compiled.concurrency.gate(compiled.name, value)
                gates.append((gate, compiled.concurrency.limit))
            if part.overlap in GATED:
                gates.append((gate_of(spec.name), 1))
            options = run_options(
                template=spec.template,
                version=version,
                gates=gates,
                schedule=spec.name,
                tick_ms=ticks[-1],
                rate_keys=rate_keys(compiled.name, compiled.rate_keys or [], value),
            )
            rows.append((compiled, encode_input(value, self.engine.max_payload), options))
        return rows

    def call(
        self, shard: ShardKeys, how: str, parts: Sequence[_Part], templates: Templates
    ) -> Call[list[TickResult]]:
        """One tick.lua call for ``parts`` (schedules of ``shard``)."""
        rows: list[tuple[CompiledWorkflow, str, str]] = []
        spans: list[int] = []
        for part in parts:
            try:
                built = self._rows(part, templates)
            except (NotFoundError, DefinitionError) as e:
                if part.plan is None:  # a trigger or backfill: the caller hears of it
                    raise
                # its template is gone or broken: the ticks are missed, the schedule goes on
                log.warning("schedule %s: %s; its due ticks are missed", part.known.spec.name, e)
                if part.plan is not None:
                    part.plan.missed += sum(len(g) for g in part.groups)
                part.groups, built = [], []
            spans.append(len(rows))
            rows += built
        argv = self.engine.store.calls.push_argv(shard, rows, self.who, 0)
        cut = len(argv) - 1 - 4 * len(rows)
        prefix, body = argv[:cut], argv[cut + 1 :]
        ticks: list[ScheduleTick] = []
        for part, at in zip(parts, spans, strict=True):
            runs = [
                Run(g[-1], g[:-1], body[4 * (at + i) : 4 * (at + i) + 4])
                for i, g in enumerate(part.groups)
            ]
            p = part.plan
            ticks.append(
                ScheduleTick(
                    part.known.spec.name,
                    part.known.version,
                    part.overlap,
                    runs,
                    expected_due=part.expected_due,
                    next_tick=p.next_tick if p else None,
                    next_due=p.next_due if p else None,
                    missed=p.missed if p else 0,
                    missed_shown=p.missed_shown if p else (),
                )
            )
        return self.engine.store.schedules.tick_call(shard, how, prefix, ticks)

    def version_of(self, name: str) -> str | None:
        """The version of the spec of ``name`` parsed already (None: none)."""
        k = self._known.get(name)
        return None if k is None else k.version

    def due_part(self, d: DueSchedule, now: int) -> _Part | None:
        """A due schedule's plan at ``now`` (None: it changed since it was read)."""
        if d.version is None or d.next_tick is None or d.stored_due != d.due:
            return None  # removed, ended, or ticked by another scheduler since it was read
        if d.spec is None:
            k = self._known.get(d.name)
            if k is None or k.version != d.version:
                return None
        else:
            k = self.known(d.name, d.version, d.spec)
        p = plan(k.cadence, d.next_tick, now)
        return _Part(k, p.runs, k.spec.overlap, d.due, p)

    def fire(
        self, name: str, how: str, ticks: Sequence[int], overlap: str | None = None
    ) -> list[TickOutcome]:
        """Fire ``ticks`` of schedule ``name`` (``how``: ``now`` for a trigger,
        ``backfill``), each its own run under the overlap policy (the schedule's, or
        ``overlap``); ticks fired before are ``dup``. Sent again if the schedule changed
        meanwhile."""
        store = self.engine.store
        shard = self.engine.keys.shard_of_schedule(name)
        out: list[TickOutcome] = []
        for attempt in range(5):
            row = store.schedules.schedule_row(name)
            if row is None:
                raise NotFoundError(f"schedule {name!r} does not exist")
            k = self.known(name, row[S_VERSION], row[S_SPEC])
            policy = overlap or k.spec.overlap
            templates: Templates = {}
            status = "ok"
            for at in range(len(out), len(ticks), BACKFILL_CHUNK):
                part = _Part(k, [[t] for t in ticks[at : at + BACKFILL_CHUNK]], policy)
                call = self.call(shard, how, [part], templates)
                try:
                    [result] = store.scripts.run(call)
                except NotReplicatedError:  # written: not a refusal
                    raise
                except Exception as e:
                    raise _partly_fired(out, len(ticks), e) from None
                status = result.status
                if status != "ok":
                    break
                out += result.outcomes
            if status == "ok":
                return out
            if status == "gone":
                raise NotFoundError(f"schedule {name!r} does not exist")
            log.info("schedule %s changed while firing (attempt %d); again", name, attempt + 1)
        raise RuntimeError(f"schedule {name!r} kept changing while it was fired")


def _partly_fired(out: list[TickOutcome], total: int, cause: Exception) -> Exception:
    """A fire of ``total`` ticks stopped by ``cause`` after the calls that decided ``out``
    (each call atomic): the cause itself when no call went through, else a
    :class:`PartialWriteError` naming the ticks recorded and the runs they pushed."""
    if not out:
        return cause
    ids = [o.run for o in out if o.run]
    return PartialWriteError(
        f"{len(out)} of {total} tick(s) were recorded ({len(ids)} run(s) pushed), "
        f"the other {total - len(out)} were not: {cause}",
        done=[*out, *[None] * (total - len(out))],
        stored_ids=ids,
        failed=list(range(len(out), total)),
        cause=cause,
    )


class Scheduler:
    """One scheduler: fires every due tick of the deployment's schedules until stopped.

    Example:
        >>> Scheduler(engine).run()   # until stop() (or SIGTERM in `redisflow scheduler`)

    Args:
        engine: the deployment.
        scheduler_id: recorded in the pushed runs' events (default: engine.actor).
        safety_s: the longest sleep between passes.
    """

    def __init__(
        self,
        engine: Runner,
        *,
        scheduler_id: str | None = None,
        safety_s: float = SAFETY_S,
        batch: int = DUE_BATCH,
    ) -> None:
        self.engine = engine
        self.id = scheduler_id or engine.actor
        self.ticker = Ticker(engine, f"scheduler {self.id}")
        self.safety_s = safety_s
        self.batch = batch
        self.fired = 0  # runs pushed
        self.refused = 0  # tick.lua calls refused: another scheduler was first
        self._stop = threading.Event()
        self._wait_s = 0.0
        self._rng = random.Random()
        self._pool: ThreadPoolExecutor | None = None

    def stop(self) -> None:
        """Stop after the current pass (:meth:`run` returns)."""
        self._stop.set()

    def run_due(self) -> int:
        """One pass: fire what is due now on every shard. Returns how many schedules were
        ticked (their calls wrote something)."""
        ticked = 0
        wait_ms: int | None = None
        moved = False
        for shard in self.engine.keys.all_shards():
            now, due, later = self.engine.store.schedules.due_schedules(shard, self.batch)
            if later is not None:
                gap = max(0, later - now)
                wait_ms = gap if wait_ms is None else min(wait_ms, gap)
            if not due:
                continue
            done, went_on = self._tick_shard(shard, now, due)
            ticked += done
            moved = moved or went_on
            # look again at once (more may be due by now), unless every call failed:
            # then not in a tight loop
            wait_ms = 0 if moved else min(wait_ms or STUCK_MS, STUCK_MS)
        self._wait_s = self.safety_s if wait_ms is None else min(self.safety_s, wait_ms / 1000)
        return ticked

    def _tick_shard(
        self, shard: ShardKeys, now: int, due: list[tuple[str, int]]
    ) -> tuple[int, bool]:
        """Tick ``due`` schedules of one shard, a chunk per call. Schedulers that wake
        together start at different chunks; one that finds its chunk mostly taken by
        another stops here, to read what is still due."""
        chunks = [
            due[at : at + SCHEDULES_PER_CALL] for at in range(0, len(due), SCHEDULES_PER_CALL)
        ]
        turn = self._rng.randrange(len(chunks))
        templates: Templates = {}
        ticked, moved = 0, False
        # The tick call of one chunk runs in Redis while the next chunk is read and laid
        # out here (a second connection): the scheduler's Python and Redis overlap.
        pending: tuple[Future[list[TickResult]], int, int] | None = None

        def settle() -> bool:
            """Count the pending call's results; True when another scheduler works here."""
            nonlocal pending, ticked, moved
            if pending is None:
                return False
            future, size, gone = pending
            pending = None
            try:
                results = future.result()
            except (NotFoundError, StateError) as e:
                log.warning("scheduler %s: tick refused: %s", self.id, e)
                return False
            taken = 0
            for r in results:
                if r.status == "ok":
                    ticked += 1
                    moved = True
                    self.fired += sum(1 for o in r.outcomes if o.run)
                else:
                    taken += r.status == "taken"
                    self.refused += 1
            moved = moved or taken > 0
            return (taken + gone) * 2 > size  # another scheduler works here

        try:
            for chunk in chunks[turn:] + chunks[:turn]:
                parts = []
                heads = self.engine.store.schedules.schedule_heads
                for d in heads(shard, chunk, self.ticker.version_of):
                    part = self.ticker.due_part(d, now)
                    if part is not None:
                        parts.append(part)
                gone = len(chunk) - len(parts)  # mostly ticked by another scheduler: move on
                moved = moved or gone > 0
                if not parts:
                    if settle() or gone * 2 > len(chunk):
                        break
                    continue
                call = self.ticker.call(shard, "due", parts, templates)
                if settle():
                    break
                pending = (self._sender().submit(self.engine.store.scripts.run, call),
                           len(chunk), gone)  # fmt: skip
        finally:
            settle()
        return ticked, moved

    def _sender(self) -> ThreadPoolExecutor:
        """The thread that sends tick calls (made on first use)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix=f"ticks-{self.id}")
        return self._pool

    def run(self) -> None:
        """Fire due ticks until :meth:`stop`; Redis going away only pauses the loop."""
        channels = [s.schedule_channel for s in self.engine.keys.all_shards()]
        pubsub: Any = None
        backoff = Backoff()
        try:
            while not self._stop.is_set():
                try:
                    if pubsub is None:
                        pubsub = self.engine.store.reads.pubsub(channels)
                    self.run_due()
                    backoff.succeeded()
                    self._sleep(pubsub)
                except Exception as e:  # noqa: BLE001 - any error not transient is raised
                    if not transient(e):
                        raise
                    wait = backoff.failed()
                    log.warning(
                        "scheduler %s: Redis unavailable (%s); again in %.1fs", self.id, e, wait
                    )
                    self._stop.wait(wait)
        finally:
            if pubsub is not None:
                pubsub.close()
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None

    def _sleep(self, pubsub: Any) -> None:
        """Until the next due time (at most the safety timer) or a change notice."""
        deadline = time.monotonic() + self._wait_s
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if pubsub.get_message(timeout=min(left, 0.25)) is not None:
                while pubsub.get_message(timeout=0) is not None:
                    pass
                return


class SchedulerThread:
    """A scheduler in a daemon thread of its own, as an agent's side work
    (``Agent(side=[SchedulerThread(engine, agent_id)])``, ``redisflow-agent --scheduler``)."""

    def __init__(self, engine: Runner, scheduler_id: str | None = None) -> None:
        self.engine = engine
        self.scheduler_id = scheduler_id
        self._running: tuple[Scheduler, threading.Thread] | None = None

    def start(self) -> threading.Thread:
        """Start the scheduler's thread."""
        self._running = start_thread(self.engine, self.scheduler_id)
        return self._running[1]

    def stop(self) -> None:
        """Stop the scheduler after its current pass (its thread waited for up to 5 s)."""
        if self._running is not None:
            scheduler, thread = self._running
            scheduler.stop()
            thread.join(timeout=5)


def start_thread(
    engine: Runner, scheduler_id: str | None = None
) -> tuple[Scheduler, threading.Thread]:
    """A scheduler running in a daemon thread of its own (agents with ``--scheduler``)."""
    scheduler = Scheduler(engine, scheduler_id=scheduler_id)

    def loop() -> None:
        try:
            scheduler.run()
        except Exception:  # noqa: BLE001 - logged: the agent goes on running tasks
            log.exception("scheduler %s stopped", scheduler.id)

    thread = threading.Thread(target=loop, name="rf-scheduler", daemon=True)
    thread.start()
    return scheduler, thread
