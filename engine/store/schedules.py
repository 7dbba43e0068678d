"""Schedules in Redis: the calls of ``schedule.lua`` and ``tick.lua``, and the reads.

A schedule lives in shard ``crc32(name) % shards`` (:meth:`Keyspace.shard_of_schedule`)
and its runs are pushed into the same shard, so one script can fire a tick, check the
previous run and push the next. :class:`Schedules` is the
``schedules`` part of :class:`~engine.store.Store`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import redis

from .codec import F_STATE
from .keys import Keyspace, ShardKeys
from .layout import is_cluster
from .scripts import Call, Scripts

# Fields of P:s:<name> (schedule.lua, tick.lua; the workflow-end code writes ls, le and
# paused when a run of a pause_on_failure schedule fails).
S_SPEC, S_VERSION, S_NEXT_TICK, S_NEXT_DUE, S_LAST_TICK = "spec", "v", "nt", "nx", "lt"
S_CURRENT, S_PAUSED, S_PAUSE_ON_FAILURE = "cur", "paused", "pof"
S_LAST_STATE, S_LAST_END = "ls", "le"
S_COUNTERS = ("runs", "skipped", "missed", "buffered")

# What a tick.lua call decided for one tick.
FIRED, BUFFERED, SKIPPED, DUP = "fired", "buffered", "skipped", "dup"


@dataclass(frozen=True)
class TickOutcome:
    """One tick of a tick.lua call: ``what`` happened (fired, buffered, skipped, dup) and
    the run it pushed (None for none)."""

    tick: int
    what: str
    run: str | None


@dataclass(frozen=True)
class TickResult:
    """tick.lua's reply: ``status`` ok, or why nothing was written (``taken``: another
    scheduler fired it or the schedule changed; ``early``; ``gone``: removed)."""

    status: str
    outcomes: tuple[TickOutcome, ...] = ()


@dataclass(frozen=True)
class Run:
    """One run for tick.lua: its tick (the dedup), the other ticks it carries, and its
    workflow as push_workflows takes it (definition number, name, input JSON, options)."""

    tick: int
    carried: Sequence[int]
    row: Sequence[Any]


@dataclass(frozen=True)
class ScheduleTick:
    """One schedule's part of a tick.lua call: what its runs were built from (``version``),
    its runs, and with ``due`` the compare-and-set value and where it moves on to."""

    name: str
    version: str
    overlap: str
    runs: Sequence[Run] = ()
    expected_due: int | None = None
    next_tick: int | None = None
    next_due: int | None = None
    missed: int = 0
    missed_shown: Sequence[int] = ()


def _tick_results(reply: Any) -> list[TickResult]:
    out: list[TickResult] = []
    for item in reply:
        status = str(item[0])
        if status != "ok":
            out.append(TickResult(status))
            continue
        outcomes = tuple(TickOutcome(int(t), str(w), str(r) or None) for t, w, r in item[1])
        out.append(TickResult(status, outcomes))
    return out


def _int(reply: Any) -> int:
    return int(reply)


@dataclass(frozen=True)
class DueSchedule:
    """A schedule whose due time has come, as a scheduler reads it."""

    name: str
    due: int  # P:sdue's score, the CAS value of tick.lua
    spec: str | None  # None when the reader has it (schedule_heads' known) or it is gone
    version: str | None
    next_tick: int | None
    stored_due: int | None = None  # nx as stored now: not `due`, another scheduler ticked it


class Schedules:
    """Schedule calls and reads: the ``schedules`` part of :class:`~engine.store.Store`."""

    def __init__(self, client: redis.Redis, keys: Keyspace, scripts: Scripts, event_cap: int):
        self.redis = client
        self.keys = keys
        self.scripts = scripts
        self.event_cap = event_cap

    def _schedule_call(self, name: str, what: str, who: str, *extra: Any) -> int:
        shard = self.keys.shard_of_schedule(name)
        args = [shard.prefix, self.event_cap, what, name, who, *extra]
        return self.scripts.run(Call("schedule", [shard.schedule(name)], args, _int))

    # -- schedule.lua -------------------------------------------------------------------

    def schedule_put(
        self,
        name: str,
        spec_json: str,
        next_tick: int | None,
        next_due: int | None,
        paused: bool | None,
        pause_on_failure: bool,
        who: str = "",
    ) -> bool:
        """Store a schedule (its next tick computed by the caller); True when new."""
        flag = "" if paused is None else ("1" if paused else "0")
        return bool(
            self._schedule_call(
                name,
                "put",
                who,
                spec_json,
                "" if next_tick is None else next_tick,
                "" if next_due is None else next_due,
                flag,
                "1" if pause_on_failure else "0",
            )
        )

    def schedule_pause(self, name: str, who: str = "") -> bool:
        """Pause; False when it already was (:class:`~engine.NotFoundError` if missing)."""
        return bool(self._schedule_call(name, "pause", who))

    def schedule_unpause(
        self,
        name: str,
        next_tick: int | None = None,
        next_due: int | None = None,
        who: str = "",
        *,
        keep: bool = False,
    ) -> bool:
        """Unpause from ``next_tick`` (None: no tick is left), or with ``keep`` from the
        stored one (the ticks missed meanwhile are caught up); False when it was not
        paused."""
        nt = "" if next_tick is None else next_tick
        nx = "" if next_due is None else next_due
        how = "keep" if keep else "set"
        return bool(self._schedule_call(name, "unpause", who, how, nt, nx))

    def schedule_remove(self, name: str, who: str = "") -> None:
        """Delete a schedule and its fired ticks (its runs are left alone)."""
        self._schedule_call(name, "rm", who)

    # -- tick.lua -----------------------------------------------------------------------

    def tick_call(
        self, shard: ShardKeys, how: str, prefix: Sequence[Any], ticks: Sequence[ScheduleTick]
    ) -> Call[list[TickResult]]:
        """tick.lua for ``ticks`` of schedules of ``shard``: ``how`` is ``due`` (each a
        compare-and-set on its ``expected_due``, then it moves on to ``next_tick``),
        ``now`` or ``backfill``; ``prefix`` is push.lua's ARGV from who pushes to the last
        definition (:meth:`push_argv` without the workflows). One result per schedule."""

        def opt(v: int | None) -> Any:
            return "" if v is None else v

        args: list[Any] = [shard.prefix, self.event_cap, how, len(prefix), *prefix, len(ticks)]
        for t in ticks:
            args += [t.name, opt(t.expected_due), t.version, opt(t.next_tick), opt(t.next_due)]
            shown = json.dumps(list(t.missed_shown)) if t.missed_shown else "[]"
            args += [t.missed, shown, t.overlap, len(t.runs)]
            for run in t.runs:
                args += [run.tick, ",".join(str(x) for x in run.carried), *run.row]
        return Call("tick", [shard.schedules_due], args, _tick_results)

    # -- reads --------------------------------------------------------------------------

    def schedule_row(self, name: str) -> dict[str, str] | None:
        """Every field of schedule ``name``'s hash; None when there is no such schedule."""
        row = cast(
            "dict[str, str]", self.redis.hgetall(self.keys.shard_of_schedule(name).schedule(name))
        )
        return row or None

    def schedule_rows(self, names: Sequence[str]) -> list[dict[str, str] | None]:
        """:meth:`schedule_row` of several schedules in one round trip."""
        pipe = self.redis.pipeline(transaction=False)
        for name in names:
            pipe.hgetall(self.keys.shard_of_schedule(name).schedule(name))
        return [row or None for row in pipe.execute()]

    def schedule_names(self) -> list[str]:
        """Every schedule's name, in name order."""
        pipe = self.redis.pipeline(transaction=False)
        for shard in self.keys.all_shards():
            pipe.zrange(shard.schedule_names, 0, -1)
        return sorted(n for names in pipe.execute() for n in names)

    def run_states(self, wids: Iterable[str]) -> dict[str, str | None]:
        """The state of each workflow (None: cleaned up), in one round trip."""
        wids = list(wids)
        pipe = self.redis.pipeline(transaction=False)
        for wid in wids:
            pipe.hget(self.keys.shard_of(wid).workflow(wid), F_STATE)
        return dict(zip(wids, pipe.execute(), strict=True))

    def fired_ticks(self, name: str) -> list[int]:
        """The ticks recorded as fired or skipped for ``name`` (its dedup), oldest first."""
        key = self.keys.shard_of_schedule(name).schedule_ticks(name)
        return [int(float(cast(str, t))) for t in self.redis.zrange(key, 0, -1)]

    def due_schedules(
        self, shard: ShardKeys, limit: int
    ) -> tuple[int, list[tuple[str, int]], int | None]:
        """Redis's clock (ms), the schedules of ``shard`` due by then (name and due ms, at
        most ``limit``, earliest first), and the earliest due time still to come (None:
        nothing waits; now: more are due than were read). One round trip."""
        pipe = self.redis.pipeline(transaction=False)
        cluster = is_cluster(self.redis)  # a cluster pipeline takes keyed commands only
        if not cluster:
            pipe.time()
        pipe.zrange(shard.schedules_due, 0, limit, withscores=True)
        *clock, first = pipe.execute()
        sec, usec = self.redis.time() if cluster else clock[0]
        now = int(sec) * 1000 + int(usec) // 1000
        due = [(str(n), int(s)) for n, s in first if s <= now][:limit]
        later = next((int(s) for _, s in first if s > now), None)
        if len(first) > limit and later is None:
            later = now  # more are due than were read: come back at once
        return now, due, later

    def schedule_heads(
        self,
        shard: ShardKeys,
        due: Sequence[tuple[str, int]],
        known: Callable[[str], str | None] = lambda name: None,
    ) -> list[DueSchedule]:
        """What a plan needs of each due schedule, in one call (heads.lua): its version,
        next tick and due time as stored now, and its spec unless ``known(name)`` (the
        version the caller has parsed) is its version."""
        args: list[Any] = [shard.prefix, self.event_cap]
        for name, _ in due:
            args += [name, known(name) or ""]
        rows = self.scripts.run(Call("heads", [shard.schedules_due], args, list))
        return [
            DueSchedule(
                name,
                score,
                spec or None,
                v or None,
                int(nt) if nt else None,
                int(nx) if nx else None,
            )
            for (name, score), (v, nt, nx, spec) in zip(due, rows, strict=True)
        ]
