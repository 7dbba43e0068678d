"""What :class:`~engine.Engine`'s schedule methods do: put, read, unpause, trigger,
backfill, preview. Every Redis call goes through the store (``engine.store``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.spec.schemas import check_input

from ..errors import DefinitionError, NotFoundError
from ..store.schedules import (
    S_COUNTERS,
    S_CURRENT,
    S_LAST_END,
    S_LAST_STATE,
    S_LAST_TICK,
    S_NEXT_DUE,
    S_PAUSED,
    S_SPEC,
    TickOutcome,
)
from .clock import Cadence, PreviewTick, preview, run_input
from .info import ScheduleInfo
from .scheduler import Ticker
from .spec import OVERLAP, ScheduleSpec

if TYPE_CHECKING:
    from engine.runtime.deployment import Runner

MOST_BACKFILL = 10_000  # ticks one backfill may cover


def put(engine: Runner, spec: ScheduleSpec) -> bool:
    """Store ``spec`` (new, or an update: the next due time is computed again from now,
    counters and fired ticks stay). Its template must exist. True when new."""
    engine.template(spec.template)  # NotFoundError for an unknown template: nothing written
    cadence = Cadence(spec)
    nt = cadence.next_after(engine.store.now_ms())
    compiled, _ = engine.compile_template(spec.template)
    if compiled.input_schema is not None:  # its runs' input must fit: refused now
        sample = run_input(cadence, [nt if nt is not None else engine.store.now_ms()])
        check_input(compiled.input_schema, sample, compiled.name)
    nx = None if nt is None else cadence.due(nt)
    return engine.store.schedules.schedule_put(
        spec.name, spec.to_json(), nt, nx, spec.paused, spec.pause_on_failure, engine.actor
    )


def _seconds(value: str | None) -> float | None:
    return int(value) / 1000 if value else None


def infos(engine: Runner, names: list[str]) -> list[ScheduleInfo]:
    """:class:`ScheduleInfo` of each schedule of ``names`` that exists, in order."""
    rows = engine.store.schedules.schedule_rows(names)
    present = [(n, r) for n, r in zip(names, rows, strict=True) if r is not None]
    current = {r[S_CURRENT] for _, r in present if r.get(S_CURRENT)}
    states = engine.store.schedules.run_states(current)
    out: list[ScheduleInfo] = []
    for name, row in present:
        spec = ScheduleSpec.from_json(row[S_SPEC])
        paused = row.get(S_PAUSED) == "1"
        cur = row.get(S_CURRENT) or None
        state = states.get(cur) if cur else None
        counts = [int(row.get(c) or 0) for c in S_COUNTERS]
        out.append(
            ScheduleInfo(
                name=name,
                template=spec.template,
                when=spec.when,
                timezone=spec.timezone,
                next_due=None if paused else _seconds(row.get(S_NEXT_DUE)),
                last_tick=_seconds(row.get(S_LAST_TICK)),
                last_run=cur,
                last_state=state or row.get(S_LAST_STATE) or None,
                last_ended=_seconds(row.get(S_LAST_END)),
                overlap=spec.overlap,
                catchup=spec.catchup,
                paused=paused,
                runs=counts[0],
                skipped=counts[1],
                missed=counts[2],
                buffered=counts[3],
                spec=spec,
            )
        )
    return out


def one(engine: Runner, name: str) -> ScheduleInfo:
    found = infos(engine, [name])
    if not found:
        raise NotFoundError(f"schedule {name!r} does not exist")
    return found[0]


def stored_spec(engine: Runner, name: str) -> ScheduleSpec:
    row = engine.store.schedules.schedule_row(name)
    if row is None:
        raise NotFoundError(f"schedule {name!r} does not exist")
    return ScheduleSpec.from_json(row[S_SPEC])


def unpause(engine: Runner, name: str, catchup: bool = False) -> bool:
    """Unpause from now (the ticks missed while paused are not run), or with ``catchup``
    from where it stopped (they are caught up as its catchup policy says)."""
    if catchup:
        return engine.store.schedules.schedule_unpause(name, who=engine.actor, keep=True)
    cadence = Cadence(stored_spec(engine, name))
    nt = cadence.next_after(engine.store.now_ms())
    nx = None if nt is None else cadence.due(nt)
    return engine.store.schedules.schedule_unpause(name, nt, nx, engine.actor)


def trigger(engine: Runner, name: str) -> TickOutcome:
    """Run a tick now (Redis's clock), under the schedule's overlap policy."""
    stored_spec(engine, name)
    outcomes = Ticker(engine, engine.actor).fire(name, "now", [engine.store.now_ms()])
    return outcomes[0]


def backfill(
    engine: Runner, name: str, start_ms: int, end_ms: int, overlap: str | None = None
) -> list[TickOutcome]:
    """Fire every tick of ``name`` in ``[start_ms, end_ms]`` not fired yet, oldest first,
    under ``overlap`` (default ``buffer_all``: one after another). Ticks fired before
    (by the schedule or an earlier backfill) are ``dup``: running it twice adds nothing."""
    if overlap is not None and overlap not in OVERLAP:
        raise DefinitionError(f"--overlap {overlap!r} is not one of {', '.join(OVERLAP)}")
    if end_ms < start_ms:
        raise DefinitionError("--to is before --from")
    now = engine.store.now_ms()
    if end_ms > now:
        raise DefinitionError("--to is in the future: a backfill runs ticks that have passed")
    cadence = Cadence(stored_spec(engine, name))
    ticks: list[int] = []
    t = cadence.next_after(start_ms - 1)
    while t is not None and t <= end_ms:
        ticks.append(t)
        if len(ticks) > MOST_BACKFILL:
            raise DefinitionError(
                f"the range holds more than {MOST_BACKFILL:,} ticks: backfill it in parts"
            )
        t = cadence.next_after(t)
    if not ticks:
        return []
    return Ticker(engine, engine.actor).fire(name, "backfill", ticks, overlap or "buffer_all")


def preview_stored(engine: Runner, name: str, count: int) -> tuple[ScheduleSpec, list[PreviewTick]]:
    spec = stored_spec(engine, name)
    return spec, preview(Cadence(spec), engine.store.now_ms(), count)
