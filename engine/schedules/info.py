"""What the engine reports about a schedule (:meth:`engine.Engine.schedules`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from .cron import expand
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


def _days_joined(expr: str) -> str | None:
    """How Debian cron joins a day-of-month and a day-of-week that are both restricted:
    ``"and"`` when either field starts with ``*`` (``*/2``), else ``"or"``; None when one
    of them is a plain ``*`` (the other alone decides)."""
    dom, dow = expr.split()[2], expr.split()[4]
    if dom == "*" or dow == "*":
        return None
    return "and" if dom.startswith("*") or dow.startswith("*") else "or"


NAMES = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")


def _sim(expr: str) -> Any:
    from cronsim import CronSim

    return CronSim(expr, datetime(2000, 1, 1))


def _listed(numbers: Iterable[int]) -> str:
    ns = sorted(numbers)
    if len(ns) <= 4:
        return ", ".join(str(n) for n in ns[:-1]) + f" and {ns[-1]}" if len(ns) > 1 else str(ns[0])
    return f"{ns[0]}, {ns[1]}, {ns[2]}, … {ns[-1]}"


@cache
def _words(expr: str) -> str | None:
    try:
        from cron_descriptor import ExpressionDescriptor, Options
    except ImportError:  # an optional dependency: the expression itself then
        return None
    try:
        options = Options()
        options.use_24hour_time_format = True
        whole = ExpressionDescriptor(expr, options)
        joined = _days_joined(expr)
        if joined is None:
            return str(whole.get_description())
        # cron-descriptor always says "or": the days as Debian cron joins the two fields
        dow = expr.split()[4]
        time, month = whole.get_time_of_day_description(), whole.get_month_description()
        if "/" in expr.split()[2]:  # "every 2 days" would hide that it restarts each month
            dom = f", on days {_listed(_sim(expr).days)} of the month"
        else:
            dom = whole.get_day_of_month_description()
        days = str(ExpressionDescriptor(f"0 0 * * {dow}", options).get_day_of_week_description())
        for lead in (", only on ", ", or on ", ", "):
            if days.startswith(lead):
                days = days[len(lead) :]
                break
        if "/" in dow and all(isinstance(d, int) for d in _sim(expr).weekdays):
            names = [NAMES[d % 7] for d in sorted(int(d) for d in _sim(expr).weekdays)]
            days = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
        link = ", if that day is also " if joined == "and" else ", or on "
        text = whole.transform_verbosity(f"{time}{dom}{link}{days}{month}")
        return str(whole.transform_case(text, options.casing_type))
    except Exception:  # noqa: BLE001 - any failure of the describer: show the expression
        return None


def describe(spec: ScheduleSpec) -> str:
    """A schedule's cadence in words (cron-descriptor when installed), with its zone."""
    if spec.cron is None:
        return spec.when
    words = _words(expand(spec.cron))
    text = words if words else spec.when
    return f"{text} ({spec.timezone})"
