"""The Templates & Schedules screen's data: what it reads, its cells in words, its actions.

This is the one module of the console that names the engine's template and schedule API
(``templates``, ``run``, ``schedules``, ``schedule``, ``pause_schedule``,
``unpause_schedule``, ``trigger_schedule``, ``preview_schedule``): a renamed call there
is a one-place fix here. No Textual here; every function taking an engine runs in a
worker thread.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from engine import (
    DefinitionError,
    Engine,
    PreviewTick,
    RunResult,
    ScheduleInfo,
    TemplateInfo,
    WorkflowSummary,
    plural,
)

from .actions import Action
from .clock import format_age

RUNS_SHOWN = 10  # recent runs in a schedule's detail
TICKS_SHOWN = 10  # upcoming ticks in a schedule's detail

# What each overlap policy does with a tick while the schedule's latest run goes on.
OVERLAP_WORDS = {
    "skip": "the tick is skipped (and counted) while its latest run has not ended",
    "buffer_one": "the run waits (queued) for the latest to end; at most one waits",
    "buffer_all": "the run waits (queued) its turn behind every run before it",
    "cancel_other": "its latest run, if not ended, is cancelled and the new one starts",
    "allow_all": "the run starts even while earlier runs go on",
}
# a schedule's state: its glyph and the look (a state colour) it is drawn in
STATE_LOOKS = {"active": ("▶", "online"), "paused": ("‖", "paused"), "ended": ("○", "dim")}
OVERLAP_SHORT = {
    "skip": "skip",
    "buffer_one": "buffer one",
    "buffer_all": "buffer all",
    "cancel_other": "cancel other",
    "allow_all": "allow all",
}


# -- reading ---------------------------------------------------------------------------


@dataclass
class Catalog:
    """What the screen lists: every template and every schedule."""

    templates: list[TemplateInfo]
    schedules: list[ScheduleInfo]


def read_catalog(engine: Engine) -> Catalog:
    """Every template (latest version, run counts) and every schedule, by name."""
    templates = sorted(engine.templates(), key=lambda t: t.name)
    schedules = sorted(engine.schedules(), key=lambda s: s.name)
    return Catalog(templates, schedules)


@dataclass
class ScheduleDetail:
    """One schedule as its detail shows it: settings, the next ticks, recent runs."""

    info: ScheduleInfo
    ticks: list[PreviewTick]
    runs: list[WorkflowSummary] = field(default_factory=list)


def read_detail(engine: Engine, name: str) -> ScheduleDetail:
    """Schedule ``name``, its next ticks and the recent runs of its template.

    The engine lists runs by template, not by schedule: the runs shown are its
    template's, started by this schedule or otherwise.
    """
    info = engine.schedule(name)
    ticks = [] if info.paused else engine.preview_schedule(name, TICKS_SHOWN)
    runs = engine.list(template=info.template, limit=RUNS_SHOWN)
    return ScheduleDetail(info, ticks, runs)


# -- cells -----------------------------------------------------------------------------


def schedule_state(info: ScheduleInfo) -> str:
    """``paused``, ``ended`` (no tick left) or ``active``."""
    if info.paused:
        return "paused"
    if info.next_due is None:
        return "ended"
    return "active"


def cadence_words(info: ScheduleInfo) -> str:
    """The cadence in words (``At 02:00, Monday through Friday``; ``every 15m``), without
    the time zone the screen shows beside it."""
    text = str(info.description)
    suffix = f" ({info.timezone})"
    return text[: -len(suffix)] if text.endswith(suffix) else text


def local_time(ts: float, zone: str, now: float | None = None) -> str:
    """``ts`` in ``zone``: ``Tue 02:00`` within six days of ``now``, ``12 Mar 02:00``
    within its year, else ``2030-01-01 02:00``."""
    try:
        tz: Any = ZoneInfo(zone)
    except (ValueError, OSError, KeyError):
        tz = UTC
    at = datetime.fromtimestamp(ts, tz)
    if now is not None and abs(ts - now) < 6 * 86400:
        return at.strftime("%a %H:%M")
    if now is not None and at.year == datetime.fromtimestamp(now, tz).year:
        return at.strftime("%d %b %H:%M")
    return at.strftime("%Y-%m-%d %H:%M")


def relative(ts: float, now: float) -> str:
    """``in 3h`` or ``2m ago``."""
    return f"in {format_age(ts - now)}" if ts >= now else f"{format_age(now - ts)} ago"


def next_due_text(info: ScheduleInfo, now: float) -> str:
    """``in 3h · Tue 02:00`` (in the schedule's zone), ``-`` when none is due."""
    if info.next_due is None:
        return "-"
    return f"{relative(info.next_due, now)} · {local_time(info.next_due, info.timezone, now)}"


def last_run_parts(info: ScheduleInfo) -> tuple[str, str]:
    """``(#42, succeeded)``: the latest run and its state (``("-", "")`` before one)."""
    if not info.last_run:
        return "-", ""
    return f"#{info.last_run}", str(info.last_state or "")


def overlap_text(info: ScheduleInfo) -> str:
    return OVERLAP_SHORT.get(info.overlap, info.overlap)


def settings(info: ScheduleInfo) -> list[tuple[str, str]]:
    """A schedule's settings as ``(label, value)`` lines, only those set."""
    spec = info.spec
    catchup = f"{info.catchup} within {_ms(spec.catchup_window_ms)}, at most {spec.max_catchup}"
    words = cadence_words(info)
    rows = [
        ("template", info.template),
        ("when", info.when if words == info.when else f"{info.when}  ({words})"),
        ("time zone", info.timezone),
        ("overlap", f"{info.overlap}: {OVERLAP_WORDS.get(info.overlap, '')}"),
        ("catch-up", catchup),
    ]
    if spec.jitter_ms:
        rows.append(("jitter", f"up to {_ms(spec.jitter_ms)} (the same per tick everywhere)"))
    if spec.start_at_ms is not None:
        rows.append(("starts", local_time(spec.start_at_ms / 1000, info.timezone)))
    if spec.end_at_ms is not None:
        rows.append(("ends", local_time(spec.end_at_ms / 1000, info.timezone)))
    if spec.pause_on_failure:
        rows.append(("on failure", "pauses when a run fails"))
    if spec.input:
        rows.append(("input", json.dumps(spec.input, ensure_ascii=False)))
    return rows


def counters(info: ScheduleInfo) -> str:
    """``12 runs · 1 skipped · 0 missed · 0 buffered``."""
    return (
        f"{plural(info.runs, 'run')} · {info.skipped:,} skipped · {info.missed:,} missed"
        f" · {info.buffered:,} buffered"
    )


def _ms(ms: int) -> str:
    return format_age(ms / 1000) if ms % 1000 == 0 else f"{ms}ms"


# -- the run input ---------------------------------------------------------------------


def parse_input(text: str) -> Any:
    """A run's input typed in one line: JSON, or nothing (``None``).

    Raises :class:`DefinitionError` naming what is wrong and where (``column 12``).
    """
    text = text.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DefinitionError(f"input is not JSON: {e.msg} at column {e.colno}") from None


def run_template(engine: Engine, name: str, input: Any) -> RunResult:
    """Push a run of template ``name`` (its latest version) with ``input``."""
    return engine.run(name, input)


def run_outcome(result: RunResult) -> str:
    """``Pushed run 42 of report (v3)``."""
    if result.existing:
        return f"Run {result.id} of {result.template} (v{result.version}) existed already"
    return f"Pushed run {result.id} of {result.template} (v{result.version})"


# -- schedule actions ------------------------------------------------------------------


def _latest(info: ScheduleInfo) -> str:
    run, state = last_run_parts(info)
    if run == "-":
        return "it has no run yet"
    return f"its latest run {run} is {state or 'gone'}"


def plan_pause(engine: Engine, name: str) -> Action:
    """Pause schedule ``name``, or unpause it if it is paused."""
    info = engine.schedule(name)
    now = engine.server_time()
    if info.paused:
        ticks = engine.preview_schedule(name, 1)
        nxt = (
            f"{local_time(ticks[0].tick_ms / 1000, info.timezone, now)} {info.timezone} "
            f"({relative(ticks[0].tick_ms / 1000, now)})"
            if ticks
            else "none: it has no tick left"
        )
        body = (
            f"Schedule “{name}” ({info.when}, {info.timezone}) fires again from now: next "
            f"tick {nxt}. Ticks that passed while it was paused are not run "
            f"(`redisflow schedule unpause --catchup` runs them)."
        )

        def unpause(e: Engine) -> str:
            done = e.unpause_schedule(name)
            return f"Unpaused schedule {name}" if done else f"Schedule {name} was not paused"

        return Action(f"Unpause schedule {name}?", body, "Unpause", unpause)
    due = (
        f"its next tick, {local_time(info.next_due, info.timezone, now)} {info.timezone} "
        f"({relative(info.next_due, now)}), and every later one"
        if info.next_due is not None
        else "no tick (it has none left)"
    )
    body = (
        f"Schedule “{name}” ({info.when}, {info.timezone}) stops firing: {due} will not "
        f"start a run until it is unpaused. Runs going on are left alone; {_latest(info)}."
    )

    def pause(e: Engine) -> str:
        done = e.pause_schedule(name)
        return f"Paused schedule {name}" if done else f"Schedule {name} was paused already"

    return Action(f"Pause schedule {name}?", body, "Pause", pause)


def plan_trigger(engine: Engine, name: str) -> Action:
    """Run one tick of schedule ``name`` now, under its overlap policy."""
    info = engine.schedule(name)
    body = (
        f"Schedule “{name}” runs template “{info.template}” once now, as a tick of its own, "
        f"under its overlap policy {info.overlap}: "
        f"{OVERLAP_WORDS.get(info.overlap, 'as the policy says')}. Now {_latest(info)}."
        + (" It stays paused." if info.paused else "")
    )

    def trigger(e: Engine) -> str:
        outcome = e.trigger_schedule(name)
        return trigger_outcome(name, outcome.what, outcome.run)

    return Action(f"Trigger schedule {name} now?", body, "Trigger", trigger)


def trigger_outcome(name: str, what: str, run: str | None) -> str:
    """A trigger's outcome in words."""
    if what == "fired":
        return f"Triggered schedule {name}: run {run} started"
    if what == "buffered":
        return f"Triggered schedule {name}: run {run} waits (queued) for the runs before it"
    if what == "skipped":
        return f"Triggered schedule {name}: skipped, its latest run has not ended (overlap skip)"
    if what == "dup":
        return f"Schedule {name} fired this tick already: nothing new"
    return f"Triggered schedule {name}: {what}" + (f", run {run}" if run else "")
