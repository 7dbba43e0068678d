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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import DefinitionError, NotFoundError
from .schedules.clock import Cadence, Plan, plan, run_input
from .schedules.spec import ScheduleSpec
from .store.codec import CompiledWorkflow, encode_input, run_options
from .store.schedules import DueSchedule, Run, TickOutcome, TickResult

if TYPE_CHECKING:
    from .client import Engine

log = logging.getLogger("redisflow.scheduler")

GATED = ("skip", "buffer_one", "buffer_all")  # overlap policies that hold the gate s/<name>
SAFETY_S = 1.0  # the longest sleep: pub/sub is only a hint
DUE_BATCH = 1000  # due schedules read per shard and pass
CALLS_PER_TRIP = 100  # tick.lua calls per pipelined round trip
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


class Ticker:
    """Builds tick.lua calls for schedules: the runs' inputs and workflows from the
    schedule's template (its latest version). Shared by the scheduler loop, trigger and
    backfill."""

    def __init__(self, engine: Engine, who: str) -> None:
        self.engine = engine
        self.who = who
        self._known: dict[str, _Known] = {}

    def known(self, name: str, version: str, spec_json: str) -> _Known:
        """The parsed spec and cadence of ``name`` at ``version`` (cached)."""
        k = self._known.get(name)
        if k is None or k.version != version:
            spec = ScheduleSpec.from_json(spec_json)
            k = self._known[name] = _Known(version, spec, Cadence(spec))
            if len(self._known) > 100_000:
                self._known.clear()
        return k

    def build(
        self,
        k: _Known,
        groups: Sequence[Sequence[int]],
        overlap: str,
        templates: dict[str, tuple[CompiledWorkflow, int]],
        *,
        first: int | None = None,
        count: int = 0,
    ) -> tuple[list[Any], list[Run]]:
        """push.lua's ARGV prefix and the runs for ``groups`` of ticks (each one run)."""
        spec = k.spec
        if not groups:
            return [], []
        got = templates.get(spec.template)
        if got is None:
            got = templates[spec.template] = self.engine.compile_template(spec.template)
        compiled, version = got
        shard = self.engine.keys.shard_of_schedule(spec.name)
        rows: list[tuple[CompiledWorkflow, str, str]] = []
        for ticks in groups:
            value = run_input(k.cadence, list(ticks), first=first, count=count)
            gates: list[tuple[str, int]] = []
            if compiled.concurrency is not None:
                gates.append(
                    (compiled.concurrency.gate(compiled.name, value), compiled.concurrency.limit)
                )
            if overlap in GATED:
                gates.append((gate_of(spec.name), 1))
            options = run_options(
                template=spec.template,
                version=version,
                gates=gates,
                schedule=spec.name,
                tick_ms=ticks[-1],
            )
            rows.append((compiled, encode_input(value, self.engine.max_payload), options))
        argv = self.engine.store.push_argv(shard, rows, self.who, 0)
        cut = len(argv) - 1 - 4 * len(rows)
        prefix, body = argv[:cut], argv[cut + 1 :]
        runs = [
            Run(ticks[-1], list(ticks[:-1]), body[4 * n : 4 * n + 4])
            for n, ticks in enumerate(groups)
        ]
        return prefix, runs

    def due_call(
        self, d: DueSchedule, now: int, templates: dict[str, tuple[CompiledWorkflow, int]]
    ) -> tuple[Any, Plan] | None:
        """The tick.lua call for a due schedule, and its plan (None: nothing to do)."""
        if d.spec is None or d.version is None or d.next_tick is None:
            return None
        k = self.known(d.name, d.version, d.spec)
        p = plan(k.cadence, d.next_tick, now)
        try:
            prefix, runs = self.build(
                k, p.runs, k.spec.overlap, templates, first=p.first, count=p.due
            )
        except (NotFoundError, DefinitionError) as e:
            # its template is gone or broken: the ticks are missed, the schedule goes on
            log.warning("schedule %s: %s; its due ticks are missed", d.name, e)
            prefix, runs = [], []
            p.missed += sum(len(r) for r in p.runs)
            p.runs = []
        call = self.engine.store.tick_call(
            d.name,
            "due",
            version=d.version,
            overlap=k.spec.overlap,
            who=self.who,
            prefix=prefix,
            runs=runs,
            expected_due=d.due,
            next_tick=p.next_tick,
            next_due=p.next_due,
            missed=p.missed,
            missed_shown=p.missed_shown,
        )
        return call, p

    def fire(
        self, name: str, how: str, ticks: Sequence[int], overlap: str | None = None
    ) -> list[TickOutcome]:
        """Fire ``ticks`` of schedule ``name`` now (``how``: ``now`` for a trigger,
        ``backfill``), each its own run under the overlap policy (the schedule's, or
        ``overlap``); ticks already fired are ``dup``. Sent again if the schedule changed
        meanwhile."""
        store = self.engine.store
        out: list[TickOutcome] = []
        templates: dict[str, tuple[CompiledWorkflow, int]] = {}
        for attempt in range(5):
            row = store.schedule_row(name)
            if row is None:
                raise NotFoundError(f"schedule {name!r} does not exist")
            k = self.known(name, row["v"], row["spec"])
            policy = overlap or k.spec.overlap
            result: TickResult | None = None
            for at in range(len(out), len(ticks), BACKFILL_CHUNK):
                part = ticks[at : at + BACKFILL_CHUNK]
                prefix, runs = self.build(k, [[t] for t in part], policy, templates)
                call = store.tick_call(
                    name, how, version=k.version, overlap=policy, who=self.who,
                    prefix=prefix, runs=runs,
                )  # fmt: skip
                result = store.scripts.run(call)
                if result.status != "ok":
                    break
                out += result.outcomes
            if result is None or result.status == "ok":
                return out
            if result.status == "gone":
                raise NotFoundError(f"schedule {name!r} does not exist")
            templates.clear()
            log.info("schedule %s changed while firing (attempt %d); again", name, attempt + 1)
        raise RuntimeError(f"schedule {name!r} kept changing while it was fired")


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
        engine: Engine,
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

    def stop(self) -> None:
        """Stop after the current pass (:meth:`run` returns)."""
        self._stop.set()

    def run_due(self) -> int:
        """One pass: fire everything due now on every shard. Returns how many schedules
        were ticked (calls that wrote something)."""
        store = self.engine.store
        ticked = 0
        wait_ms: int | None = None
        templates: dict[str, tuple[CompiledWorkflow, int]] = {}
        moved = False
        for shard in self.engine.keys.all_shards():
            now, due, later = store.due_schedules(shard, self.batch)
            if later is not None:
                gap = max(0, later - now)
                wait_ms = gap if wait_ms is None else min(wait_ms, gap)
            if not due:
                continue
            # Schedulers that wake together start at different places of the due list:
            # most of their calls then go to different schedules.
            turn = self._rng.randrange(len(due))
            due = due[turn:] + due[:turn]
            for at in range(0, len(due), CALLS_PER_TRIP):
                batch = store.batch()
                for d in due[at : at + CALLS_PER_TRIP]:
                    made = self.ticker.due_call(d, now, templates)
                    if made is not None:
                        batch.add(made[0])
                for reply in batch.execute():
                    if isinstance(reply, Exception):
                        log.warning("scheduler %s: tick refused: %s", self.id, reply)
                    elif reply.status == "ok":
                        ticked += 1
                        moved = True
                        self.fired += sum(1 for o in reply.outcomes if o.run)
                    else:
                        moved = moved or reply.status == "taken"
                        self.refused += 1
            # look again at once (more may be due by now), unless every call failed:
            # then not in a tight loop
            wait_ms = 0 if moved else min(wait_ms or STUCK_MS, STUCK_MS)
        self._wait_s = self.safety_s if wait_ms is None else min(self.safety_s, wait_ms / 1000)
        return ticked

    def run(self) -> None:
        """Fire due ticks until :meth:`stop`; Redis going away only pauses the loop."""
        from .agent import RETRY_BACKOFF, transient

        channels = [s.schedule_channel for s in self.engine.keys.all_shards()]
        pubsub: Any = None
        failures = 0
        try:
            while not self._stop.is_set():
                try:
                    if pubsub is None:
                        pubsub = self.engine.store.pubsub(channels)
                    self.run_due()
                    failures = 0
                    self._sleep(pubsub)
                except Exception as e:  # noqa: BLE001 - any error not transient is raised
                    if not transient(e):
                        raise
                    failures += 1
                    wait = RETRY_BACKOFF.compute(failures)
                    log.warning(
                        "scheduler %s: Redis unavailable (%s); again in %.1fs", self.id, e, wait
                    )
                    self._stop.wait(wait)
        finally:
            if pubsub is not None:
                pubsub.close()

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


def start_thread(
    engine: Engine, scheduler_id: str | None = None
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
