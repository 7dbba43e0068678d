"""Schedules: templates run on a cron or an interval, exactly once per tick.

* :mod:`.spec` — a schedule's settings: parsed from a file or flags, validated, stored
  as JSON;
* :mod:`.cron` — cron expressions as Debian cron runs them: macros, wildcard jobs, the
  times a jump forward skips;
* :mod:`.clock` — when its ticks fall (cron via cronsim and :mod:`.cron`, or every N from
  the epoch), time zones and daylight saving, jitter, the catch-up plan, preview;
* :mod:`.info` — :class:`ScheduleInfo`, what the reads return.

The scheduler loop is :mod:`.scheduler`; the scripts and reads are
:mod:`engine.store.schedules`. ``docs/schedules.md`` explains the semantics.
"""

from __future__ import annotations

from .clock import Cadence, Plan, PreviewTick, plan, preview
from .info import ScheduleInfo, describe
from .spec import CATCHUP, OVERLAP, ScheduleSpec, load_schedules, parse_schedule

__all__ = [
    "CATCHUP",
    "OVERLAP",
    "Cadence",
    "Plan",
    "PreviewTick",
    "ScheduleInfo",
    "ScheduleSpec",
    "describe",
    "load_schedules",
    "parse_schedule",
    "plan",
    "preview",
]
