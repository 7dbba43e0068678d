"""What the engine reports about a schedule (:meth:`engine.Engine.schedules`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from .spec import ScheduleSpec


@dataclass(frozen=True)
class ScheduleInfo:
    """One stored schedule and how it has run.

    Times are epoch seconds (``None``: not yet, or no more). ``last_state`` is the state of
    the latest run (``cur``) as stored now, or its final state once it is cleaned up.
    """

    name: str
    template: str
    when: str  # "cron 0 2 * * *" or "every 15m" (" offset 5m")
    timezone: str
    next_due: float | None
    last_tick: float | None
    last_run: str | None
    last_state: str | None
    last_ended: float | None
    overlap: str
    catchup: str
    paused: bool
    runs: int
    skipped: int
    missed: int
    buffered: int
    spec: ScheduleSpec

    @property
    def cron(self) -> str | None:
        return self.spec.cron

    @property
    def ended(self) -> bool:
        """No tick is left (past end_at) and the schedule is not paused."""
        return self.next_due is None and not self.paused

    @property
    def description(self) -> str:
        """The cadence in words ("At 02:00 AM, Monday through Friday"), or as written."""
        return describe(self.spec)


@cache
def _words(expr: str) -> str | None:
    try:
        from cron_descriptor import Options, get_description
    except ImportError:  # an optional dependency: the expression itself then
        return None
    try:
        options = Options()
        options.use_24hour_time_format = True
        return str(get_description(expr, options))
    except Exception:  # noqa: BLE001 - any failure of the describer: show the expression
        return None


def describe(spec: ScheduleSpec) -> str:
    """A schedule's cadence in words (cron-descriptor when installed), with its zone."""
    if spec.cron is None:
        return spec.when
    words = _words(spec.cron)
    text = words if words else spec.when
    return f"{text} ({spec.timezone})"
