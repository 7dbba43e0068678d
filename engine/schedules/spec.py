"""A schedule's settings: what runs (a stored template), when (cron or every), and how
late, overlapping or missed ticks are handled.

A schedule comes from a YAML or JSON file (one mapping, a list, or ``schedules:`` with a
list) or from command-line flags; either way :func:`parse_schedule` validates it, and any
problem is one :class:`~engine.DefinitionError` line naming the file, the schedule and
the field. The stored form is :meth:`ScheduleSpec.to_json`: every field explicit, times
and durations in milliseconds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

from engine.core.timing import parse_duration
from engine.spec.definition import check_name, one_line, show_value

from ..errors import DefinitionError
from .policies import CATCHUP as CATCHUP
from .policies import OVERLAP as OVERLAP

# Keys every run's input gets from the scheduler (a schedule's own input may not set them).
RESERVED_INPUT = ("schedule", "tick", "ticks", "interval", "missed")

DEFAULT_CATCHUP_WINDOW_MS = 3_600_000
DEFAULT_MAX_CATCHUP = 100
MOST_CATCHUP = 1000
MOST_JITTER_MS = 86_400_000
LEAST_EVERY_MS = 1000
MOST_EVERY_MS = 366 * 86_400_000
MOST_DURATION_S = 100 * 366 * 86_400.0  # any duration of a schedule: at most a century
MAX_SCHEDULE_NAME = 200
MAX_INPUT_BYTES = 64 * 1024

FIELDS = (
    "name",
    "template",
    "cron",
    "every",
    "offset",
    "timezone",
    "input",
    "overlap",
    "catchup",
    "catchup_window",
    "max_catchup",
    "jitter",
    "start_at",
    "end_at",
    "pause_on_failure",
    "paused",
)


def format_ms(ms: int) -> str:
    """A duration as users write it: ``15m``, ``1h30m``, ``2d``, ``1.5s``, ``250ms``."""
    if ms == 0:
        return "0s"
    if ms % 1000:
        return f"{ms}ms" if ms < 1000 else f"{ms / 1000:g}s"
    s = ms // 1000
    out = ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if s >= size:
            out += f"{s // size}{unit}"
            s %= size
    return out


@dataclass(frozen=True)
class ScheduleSpec:
    """One schedule, validated. Times are epoch ms, durations ms.

    Exactly one of ``cron`` (5 fields or a macro like ``@daily``, in ``timezone``) and
    ``every_ms`` (ticks at ``offset_ms + k * every_ms`` from the Unix epoch) is set.
    ``paused`` is a request (``None``: leave the stored schedule as it is; new schedules
    start unpaused).
    """

    name: str
    template: str
    cron: str | None = None
    every_ms: int | None = None
    offset_ms: int = 0
    timezone: str = "UTC"
    input: dict[str, Any] | None = None
    overlap: str = "skip"
    catchup: str = "latest"
    catchup_window_ms: int = DEFAULT_CATCHUP_WINDOW_MS
    max_catchup: int = DEFAULT_MAX_CATCHUP
    jitter_ms: int = 0
    start_at_ms: int | None = None
    end_at_ms: int | None = None
    pause_on_failure: bool = False
    paused: bool | None = field(default=None, compare=False)

    @property
    def when(self) -> str:
        """``cron 0 2 * * *`` or ``every 15m`` (``offset 5m``) as text."""
        if self.cron is not None:
            return f"cron {self.cron}"
        text = f"every {format_ms(self.every_ms or 0)}"
        return text + (f" offset {format_ms(self.offset_ms)}" if self.offset_ms else "")

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def to_json(self) -> str:
        """The stored form (``spec`` field of ``P:s:<name>``): every setting but ``paused``."""
        data = asdict(self)
        del data["paused"]
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ScheduleSpec:
        """A spec as :meth:`to_json` stored it."""
        data = json.loads(text)
        try:
            return cls(**data)
        except TypeError:  # stored by another version: the fields this one knows
            return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


# -- parsing -------------------------------------------------------------------------------


def _problem(where: str, what: str) -> DefinitionError:
    return DefinitionError(one_line(f"{where}: {what}"))


def _duration(value: Any, key: str, where: str) -> int:
    """Milliseconds of a duration given as ``90s`` / ``15m`` / ``1h30m`` or seconds."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _problem(where, f"{key}: {show_value(value)} is not a duration (like 90s, 15m, 1h)")
    if isinstance(value, str):
        try:
            seconds = parse_duration(value, key)
        except DefinitionError as e:
            raise _problem(where, str(e)) from None
    else:
        seconds = float(value)
        if not math.isfinite(seconds) or seconds < 0:
            raise _problem(where, f"{key}: {show_value(value)} must be a duration of 0 or more")
    if seconds > MOST_DURATION_S:
        raise _problem(where, f"{key}: {show_value(value)} is too long (over a century)")
    return round(seconds * 1000)


def _epoch_ms(value: Any, key: str, zone: ZoneInfo, where: str) -> int:
    """An ISO 8601 time (or a YAML timestamp) as epoch ms; without an offset it is read in
    the schedule's time zone."""
    if isinstance(value, datetime):
        at = value
    elif isinstance(value, date):
        at = datetime.combine(value, time())
    elif isinstance(value, str):
        try:
            at = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise _problem(
                where, f"{key}: {show_value(value)} is not a time (like 2026-01-01T06:00)"
            ) from None
    else:
        raise _problem(where, f"{key}: {show_value(value)} is not a time (like 2026-01-01T06:00)")
    if at.tzinfo is None:
        at = at.replace(tzinfo=zone)
    return int(at.timestamp() * 1000)


def _choice(value: Any, key: str, choices: tuple[str, ...], where: str) -> str:
    if value not in choices:
        raise _problem(where, f"{key}: {show_value(value)} is not one of {', '.join(choices)}")
    return str(value)


def check_cron(expr: Any, where: str) -> str:
    """``expr`` if it is a 5-field cron expression (or one of Debian cron's macros:
    ``@yearly @annually @monthly @weekly @daily @midnight @hourly``) that fires."""
    from cronsim import CronSim, CronSimError

    from .cron import MACROS, expand

    if not isinstance(expr, str):
        raise _problem(where, f"cron: {show_value(expr)} must be a string (quote it)")
    text = " ".join(expr.split())
    if text.startswith("@"):
        if text.lower() not in MACROS:
            raise _problem(
                where,
                f"cron: {show_value(expr)} is not a cron macro (known: {', '.join(MACROS)})",
            )
        return text.lower()
    if len(text.split()) != 5:
        raise _problem(
            where,
            f"cron: {show_value(expr)} has {len(text.split())} fields; a cron expression "
            "has 5 (minute hour day-of-month month day-of-week), or is a macro like @daily",
        )
    try:
        it = CronSim(expand(text), datetime(2000, 1, 1, tzinfo=ZoneInfo("UTC")))
        next(it)
    except CronSimError as e:
        raise _problem(where, f"cron: {show_value(expr)} is not a cron expression ({e})") from None
    except StopIteration:
        raise _problem(where, f"cron: {show_value(expr)} never fires") from None
    return text


def check_timezone(value: Any, where: str) -> str:
    """``value`` if it names an IANA time zone (``Europe/Paris``, ``UTC``)."""
    if not isinstance(value, str) or not value.strip():
        raise _problem(where, f"timezone: {show_value(value)} is not a time zone name")
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise _problem(
            where,
            f"timezone: {show_value(value)} is not an IANA time zone (like UTC, Europe/Paris, "
            "America/New_York)",
        ) from None
    return value


def _input(value: Any, where: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _problem(
            where, f"input: {show_value(value)} must be a mapping (each run gets it, plus its tick)"
        )
    taken = [k for k in RESERVED_INPUT if k in value]
    if taken:
        raise _problem(where, f"input: {', '.join(taken)} is set by the scheduler; use another key")
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise _problem(where, f"input: not JSON ({e})") from None
    if len(text.encode()) > MAX_INPUT_BYTES:
        raise _problem(where, f"input: over {MAX_INPUT_BYTES} bytes as JSON")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _bool(value: Any, key: str, where: str) -> bool:
    if not isinstance(value, bool):
        raise _problem(where, f"{key}: {show_value(value)} must be true or false")
    return value


def parse_schedule(data: Any, where: str = "schedule") -> ScheduleSpec:
    """Validate one schedule given as a mapping (a file's entry, or flags gathered).

    Raises :class:`~engine.DefinitionError` with one line: ``where``, the schedule's name
    when known, the field and what is wrong.
    """
    if not isinstance(data, Mapping):
        raise _problem(where, f"a schedule is a mapping of settings, not {show_value(data)}")
    name = data.get("name")
    if name is None:
        raise _problem(where, "name: missing (every schedule has a name)")
    name = check_name(name, "name", where)
    if len(name) > MAX_SCHEDULE_NAME:
        raise _problem(where, f"name: {len(name)} characters long; at most {MAX_SCHEDULE_NAME}")
    where = f"{where}: schedule {name!r}"
    unknown = [str(k) for k in data if k not in FIELDS]
    if unknown:
        raise _problem(
            where, f"unknown field {show_value(unknown[0])} (known: {', '.join(FIELDS)})"
        )
    if data.get("template") is None:
        raise _problem(where, "template: missing (the stored template each tick runs)")
    template = check_name(data["template"], "template", where)
    zone_name = check_timezone(data.get("timezone", "UTC"), where)
    zone = ZoneInfo(zone_name)
    cron, every, offset = data.get("cron"), data.get("every"), data.get("offset")
    if (cron is None) == (every is None):
        raise _problem(where, "give either cron: (5 fields) or every: (like 15m), not both")
    every_ms = None
    offset_ms = 0
    if cron is not None:
        cron = check_cron(cron, where)
        if offset is not None:
            raise _problem(where, "offset: only with every: (a cron expression says its minute)")
    else:
        every_ms = _duration(every, "every", where)
        if not LEAST_EVERY_MS <= every_ms <= MOST_EVERY_MS:
            raise _problem(where, f"every: {show_value(every)} must be between 1s and 366d")
        if offset is not None:
            offset_ms = _duration(offset, "offset", where)
            if offset_ms >= every_ms:
                raise _problem(
                    where, f"offset: {show_value(offset)} must be shorter than every ({every})"
                )
    window = data.get("catchup_window")
    window_ms = (
        DEFAULT_CATCHUP_WINDOW_MS if window is None else _duration(window, "catchup_window", where)
    )
    most = data.get("max_catchup", DEFAULT_MAX_CATCHUP)
    if isinstance(most, bool) or not isinstance(most, int) or not 1 <= most <= MOST_CATCHUP:
        raise _problem(
            where,
            f"max_catchup: {show_value(most)} must be a whole number from 1 to {MOST_CATCHUP}",
        )
    jitter = data.get("jitter")
    jitter_ms = 0 if jitter is None else _duration(jitter, "jitter", where)
    if jitter_ms > MOST_JITTER_MS:
        raise _problem(where, f"jitter: {show_value(jitter)} is over a day")
    start_ms = end_ms = None
    if data.get("start_at") is not None:
        start_ms = _epoch_ms(data["start_at"], "start_at", zone, where)
    if data.get("end_at") is not None:
        end_ms = _epoch_ms(data["end_at"], "end_at", zone, where)
    if start_ms is not None and end_ms is not None and end_ms <= start_ms:
        raise _problem(where, "end_at: must be after start_at")
    paused = data.get("paused")
    return ScheduleSpec(
        name=name,
        template=template,
        cron=cron,
        every_ms=every_ms,
        offset_ms=offset_ms,
        timezone=zone_name,
        input=_input(data.get("input"), where),
        overlap=_choice(data.get("overlap", "skip"), "overlap", OVERLAP, where),
        catchup=_choice(data.get("catchup", "latest"), "catchup", CATCHUP, where),
        catchup_window_ms=window_ms,
        max_catchup=most,
        jitter_ms=jitter_ms,
        start_at_ms=start_ms,
        end_at_ms=end_ms,
        pause_on_failure=_bool(data.get("pause_on_failure", False), "pause_on_failure", where),
        paused=None if paused is None else _bool(paused, "paused", where),
    )


# -- files ---------------------------------------------------------------------------------


class _LinedLoader(yaml.SafeLoader):
    """YAML's safe loader, noting each mapping's line (``__line__``) for messages."""


def _lined_mapping(loader: _LinedLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    out = loader.construct_mapping(node, deep=True)
    out["__line__"] = node.start_mark.line + 1
    return out


_LinedLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _lined_mapping)


def _strip_lines(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_lines(v) for k, v in value.items() if k != "__line__"}
    if isinstance(value, list):
        return [_strip_lines(v) for v in value]
    return value


def _read(text: str, source: str) -> Any:
    if source.endswith(".json"):
        try:
            return json.loads(text)
        except ValueError as e:
            line = getattr(e, "lineno", None)
            at = f"{source}:{line}" if line else source
            raise DefinitionError(one_line(f"{at}: invalid JSON: {e}")) from None
    try:
        return yaml.load(text, Loader=_LinedLoader)  # noqa: S506 - a SafeLoader
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        at = f"{source}:{mark.line + 1}" if mark else source
        raise DefinitionError(one_line(f"{at}: invalid YAML: {e.problem or e.context}")) from None
    except yaml.YAMLError as e:
        raise DefinitionError(one_line(f"{source}: invalid YAML: {e}")) from None


def load_text(text: str, source: str = "<text>") -> list[ScheduleSpec]:
    """Every schedule in YAML/JSON ``text``: one mapping, a list, or ``schedules: [...]``."""
    doc = _read(text, source)
    if doc is None:
        raise DefinitionError(f"{one_line(source)}: the file is empty")
    if isinstance(doc, dict) and "schedules" in doc:
        doc = doc["schedules"]
        if not isinstance(doc, list):
            raise DefinitionError(f"{one_line(source)}: schedules: must be a list")
    entries = doc if isinstance(doc, list) else [doc]
    out: list[ScheduleSpec] = []
    seen: set[str] = set()
    for k, entry in enumerate(entries):
        line = entry.get("__line__") if isinstance(entry, dict) else None
        where = f"{source}:{line}" if line else f"{source}: entry {k + 1}"
        spec = parse_schedule(_strip_lines(entry), one_line(where))
        if spec.name in seen:
            raise _problem(one_line(where), f"schedule {spec.name!r} is in the file twice")
        seen.add(spec.name)
        out.append(spec)
    if not out:
        raise DefinitionError(f"{one_line(source)}: no schedule in the file")
    return out


def load_schedules(path: str | Path) -> list[ScheduleSpec]:
    """Read and validate every schedule of a file (see :func:`load_text`)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DefinitionError(f"{one_line(str(p))}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DefinitionError(one_line(f"{p}: cannot read: {e}")) from None
    return load_text(text, str(p))
