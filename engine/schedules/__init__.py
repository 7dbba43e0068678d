"""Schedules: templates run on a cron or an interval, exactly once per tick.

* :mod:`.spec` — a schedule's settings: parsed from a file or flags, validated, stored
  as JSON (its ``overlap`` and ``catchup`` choices in :mod:`.policies`);
* :mod:`.cron` — cron expressions as Debian cron runs them: macros, wildcard jobs, the
  times a jump forward skips;
* :mod:`.clock` — when its ticks fall (cron via cronsim and :mod:`.cron`, or every N from
  the epoch), time zones and daylight saving, jitter, the catch-up plan, preview;
* :mod:`.info` — :class:`ScheduleInfo`, what the reads return.

The scheduler loop is :mod:`.scheduler`; the scripts and reads are
:mod:`engine.store.schedules`. ``docs/schedules.md`` explains the semantics.

The names below are imported on first use (PEP 562): a module that needs only
:mod:`.policies` does not load the YAML reader, cronsim and the time zones.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .clock import Cadence, Plan, PreviewTick, plan, preview
    from .info import ScheduleInfo, describe
    from .spec import CATCHUP, OVERLAP, ScheduleSpec, load_schedules, parse_schedule

# Every name and the module it comes from.
_HOMES: dict[str, str] = {
    **dict.fromkeys(("Cadence", "Plan", "PreviewTick", "plan", "preview"), ".clock"),
    **dict.fromkeys(("ScheduleInfo", "describe"), ".info"),
    **dict.fromkeys(
        ("CATCHUP", "OVERLAP", "ScheduleSpec", "load_schedules", "parse_schedule"), ".spec"
    ),
}

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


def __getattr__(name: str) -> Any:
    """A name of ``__all__``, imported from its module on first use and kept here after."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
