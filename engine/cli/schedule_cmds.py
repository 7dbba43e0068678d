"""``redisflow schedule put|list|show|pause|unpause|trigger|preview|backfill|rm`` and
``redisflow scheduler``: templates run on a cron or an interval (docs/schedules.md)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from engine.core.words import plural

from ..errors import DefinitionError, PartialWriteError
from ..schedules.policies import CATCHUP, OVERLAP
from .common import (
    EXIT_OK,
    Parents,
    connect,
    esc,
    name_arg,
    new_table,
    out,
    partly_written,
    positive_int,
    print_json,
    read_input,
    span,
)

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

    from ..client import Engine
    from ..schedules import PreviewTick, ScheduleInfo, ScheduleSpec
    from ..store.schedules import TickOutcome

# --name ... flags and the spec fields they fill
FLAG_FIELDS = (
    "name", "template", "cron", "every", "offset", "timezone", "overlap", "catchup",
    "catchup_window", "max_catchup", "jitter", "start_at", "end_at",
)  # fmt: skip


def specs_from_args(args: argparse.Namespace) -> list[ScheduleSpec]:
    """The schedules ``put`` stores: a file's, or one from flags. Validated before any
    connection (:class:`DefinitionError` naming the file or flag: nothing written)."""
    from ..schedules.spec import load_schedules, parse_schedule

    given = {f: getattr(args, f) for f in FLAG_FIELDS if getattr(args, f) is not None}
    if args.pause_on_failure:
        given["pause_on_failure"] = True
    if args.paused:
        given["paused"] = True
    if args.input is not None:
        given["input"] = read_input(args.input, args.max_payload)
    if args.file is not None:
        if given:
            flags = ", ".join(f"--{k.replace('_', '-')}" for k in given)
            raise DefinitionError(f"give a FILE or flags ({flags}), not both")
        return load_schedules(args.file)
    if "name" not in given:
        raise DefinitionError("give a FILE, or --name, --template and --cron or --every")
    return [parse_schedule(given, "command line")]


def _zone(name: str) -> ZoneInfo:
    """The time zone ``name`` (zoneinfo loads with the first schedule shown)."""
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


def _when(ts: float | None, zone: str, now: float, short: bool = False) -> str:
    """A time in the schedule's zone, and how far: ``2026-03-29 03:00:00 CEST (in 2h)``."""
    if ts is None:
        return "-"
    at = datetime.fromtimestamp(ts, UTC).astimezone(_zone(zone))
    rel = f"in {span(ts - now)}" if ts >= now else f"{span(now - ts)} ago"
    return f"{at:%m-%d %H:%M %Z} ({rel})" if short else f"{at:%Y-%m-%d %H:%M:%S %Z} ({rel})"


def _info_dict(info: ScheduleInfo) -> dict[str, Any]:
    out = {k: v for k, v in info.__dict__.items() if k != "spec"}
    out["description"] = info.description
    out["spec"] = info.spec.__dict__.copy()
    out["spec"].pop("paused", None)
    return out


def cmd_put(_: Engine | None, args: argparse.Namespace) -> int:
    from ..schedules.info import describe

    specs = specs_from_args(args)
    engine = connect(args)
    try:
        for spec in specs:  # every template first: nothing is written if one is missing
            engine.template(spec.template)
        done = [(spec, engine.put_schedule(spec)) for spec in specs]
        if args.json:
            print_json({"schedules": [{"name": s.name, "new": new} for s, new in done]})
            return EXIT_OK
        now = engine.server_time()
        for spec, new in done:
            info = engine.schedule(spec.name)
            what = "created" if new else "updated"
            state = "paused" if info.paused else f"next {_when(info.next_due, spec.timezone, now)}"
            print(f"schedule {spec.name}: {what}, {describe(spec)}, {state}")
    finally:
        engine.close()
    return EXIT_OK


def cmd_list(engine: Engine, args: argparse.Namespace) -> int:
    rows = engine.schedules()
    if args.json:
        print_json({"schedules": [_info_dict(i) for i in rows]})
        return EXIT_OK
    now = engine.server_time()
    table = new_table("name", "template", "when", "next", "last run", "runs", "skipped", "missed")
    for i in rows:
        if i.paused:
            nxt = "[yellow]paused[/]"
        elif i.next_due is None:
            nxt = "[dim]ended[/]"
        else:
            nxt = esc(_when(i.next_due, i.timezone, now, short=True))
        last = f"{i.last_run} {i.last_state or ''}" if i.last_run else "-"
        when = i.when + ("" if i.timezone == "UTC" else f" {i.timezone}")
        table.add_row(esc(i.name), esc(i.template), esc(when), nxt, esc(last),
                      f"{i.runs:,}", f"{i.skipped:,}", f"{i.missed:,}")  # fmt: skip
    out.print_table(table)
    out.print(f"[dim]{plural(len(rows), 'schedule')}[/]")
    return EXIT_OK


def cmd_show(engine: Engine, args: argparse.Namespace) -> int:
    from ..schedules.spec import format_ms

    i = engine.schedule(args.name)
    if args.json:
        print_json(_info_dict(i))
        return EXIT_OK
    s = i.spec
    now = engine.server_time()
    lines = [
        ("schedule", i.name),
        ("template", f"{i.template} (its latest version each tick)"),
        ("when", f"{i.when}: {i.description}"),
        ("timezone", i.timezone),
        ("state", "paused" if i.paused else ("ended" if i.next_due is None else "active")),
        ("next due", _when(i.next_due, i.timezone, now)),
        ("last tick", _when(i.last_tick, i.timezone, now)),
        ("last run", f"{i.last_run} {i.last_state or ''}" if i.last_run else "-"),
        ("overlap", s.overlap),
        ("catchup", f"{s.catchup} (window {format_ms(s.catchup_window_ms)}, "
                    f"at most {s.max_catchup})"),
        ("jitter", format_ms(s.jitter_ms) if s.jitter_ms else "none"),
        ("start_at", _when(s.start_at_ms / 1000, i.timezone, now) if s.start_at_ms else "-"),
        ("end_at", _when(s.end_at_ms / 1000, i.timezone, now) if s.end_at_ms else "-"),
        ("pause_on_failure", "yes" if s.pause_on_failure else "no"),
        ("input", "-" if s.input is None else json.dumps(s.input, ensure_ascii=False)),
        ("runs", f"{i.runs:,} ({i.buffered:,} buffered), {i.skipped:,} skipped, "
                 f"{i.missed:,} missed"),
    ]  # fmt: skip
    width = max(len(k) for k, _ in lines)
    for k, v in lines:
        print(f"{k:<{width}}  {v}")
    return EXIT_OK


def cmd_pause(engine: Engine, args: argparse.Namespace) -> int:
    changed = engine.pause_schedule(args.name)
    if args.json:
        print_json({"name": args.name, "paused": True, "changed": changed})
    else:
        print(f"schedule {args.name}: {'paused' if changed else 'was paused already'}")
    return EXIT_OK


def cmd_unpause(engine: Engine, args: argparse.Namespace) -> int:
    changed = engine.unpause_schedule(args.name, catchup=args.catchup)
    if args.json:
        print_json({"name": args.name, "paused": False, "changed": changed})
        return EXIT_OK
    if not changed:
        print(f"schedule {args.name}: was not paused")
        return EXIT_OK
    i = engine.schedule(args.name)
    how = "catching up from where it stopped" if args.catchup else "from now"
    nxt = _when(i.next_due, i.timezone, engine.server_time())
    print(f"schedule {args.name}: unpaused {how}, next {nxt}")
    return EXIT_OK


def _outcome(o: TickOutcome, zone: str) -> str:
    at = datetime.fromtimestamp(o.tick / 1000, UTC).astimezone(_zone(zone))
    run = f" run {o.run}" if o.run else ""
    why = {"skipped": " (its previous run is still going: overlap)", "dup": " (ran before)"}
    return f"{at:%Y-%m-%d %H:%M:%S %Z}: {o.what}{run}{why.get(o.what, '')}"


def cmd_trigger(engine: Engine, args: argparse.Namespace) -> int:
    o = engine.trigger_schedule(args.name)
    if args.json:
        print_json(o.__dict__)
    else:
        print(f"schedule {args.name}: {_outcome(o, engine.schedule(args.name).timezone)}")
    return EXIT_OK


def _time_arg(text: str, zone: ZoneInfo, flag: str) -> datetime:
    try:
        at = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise DefinitionError(
            f"{flag} {text!r} is not a time (like 2026-03-01T00:00, in the schedule's time zone"
            " unless it says its offset)"
        ) from None
    at = at if at.tzinfo is not None else at.replace(tzinfo=zone)
    if at.timestamp() < 0:  # near year 1, the zone's offset would carry it out of range
        raise DefinitionError(f"{flag} {text!r} is before 1970-01-01: no schedule ticked then")
    return at


def cmd_backfill(engine: Engine, args: argparse.Namespace) -> int:
    from ..store.schedules import TickOutcome

    zone = _zone(engine.schedule(args.name).timezone)
    start = _time_arg(args.start, zone, "--from")
    end = _time_arg(args.end, zone, "--to")
    partial: PartialWriteError | None = None
    try:
        outcomes = engine.backfill_schedule(args.name, start, end, args.overlap)
    except PartialWriteError as e:  # the ticks recorded are shown, then why the rest not
        partial = e
        outcomes = [o for o in e.done if isinstance(o, TickOutcome)]
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.what] = counts.get(o.what, 0) + 1
    if args.json:
        print_json({"name": args.name, "ticks": [o.__dict__ for o in outcomes], "counts": counts})
    else:
        for o in outcomes:
            print(_outcome(o, zone.key))
    if partial is not None:
        return partly_written(partial, "ticks", "listed")
    if not args.json:
        summary = ", ".join(f"{n} {w}" for w, n in sorted(counts.items())) or "no tick in range"
        print(f"schedule {args.name}: {summary}", file=sys.stderr)
    return EXIT_OK


def _preview_rows(ticks: list[PreviewTick], spec: ScheduleSpec) -> list[str]:
    from ..schedules.spec import format_ms

    rows = []
    for t in ticks:
        due = ""
        if t.due_ms != t.tick_ms:
            due = f"  (due +{format_ms(t.due_ms - t.tick_ms)}: jitter)"
        note = f"  {t.note}" if t.note else ""
        rows.append(f"{t.local:%Y-%m-%d %a %H:%M:%S %Z}{due}{note}")
    return rows


def cmd_preview(_: Engine | None, args: argparse.Namespace) -> int:
    import os

    from ..schedules import Cadence, describe, load_schedules, preview

    if os.path.exists(args.target):
        specs = load_schedules(args.target)
        if args.schedule:
            specs = [s for s in specs if s.name == args.schedule]
            if not specs:
                raise DefinitionError(f"{args.target}: no schedule named {args.schedule!r}")
        elif len(specs) > 1:
            names = ", ".join(s.name for s in specs)
            raise DefinitionError(f"{args.target} holds {names}: pick one with --schedule")
        spec = specs[0]
        now = int(datetime.now(UTC).timestamp() * 1000)
    else:
        engine = connect(args)
        try:
            spec = engine.schedule(args.target).spec
            now = int(engine.server_time() * 1000)
        finally:
            engine.close()
    if args.start is not None:
        now = int(_time_arg(args.start, _zone(spec.timezone), "--from").timestamp() * 1000)
    ticks = preview(Cadence(spec), now, args.next)
    if args.json:
        print_json({
            "name": spec.name,
            "ticks": [{"tick": t.tick_ms, "due": t.due_ms, "local": t.local.isoformat(),
                       "note": t.note} for t in ticks],
        })  # fmt: skip
        return EXIT_OK
    print(f"# {spec.name}: {describe(spec)}")
    for row in _preview_rows(ticks, spec):
        print(row)
    return EXIT_OK


def cmd_rm(engine: Engine, args: argparse.Namespace) -> int:
    engine.remove_schedule(args.name)
    if args.json:
        print_json({"removed": args.name})
    else:
        print(f"schedule {args.name}: removed (its runs go on)")
    return EXIT_OK


def cmd_scheduler(engine: Engine, args: argparse.Namespace) -> int:
    import logging

    from ..schedules.scheduler import Scheduler

    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    scheduler = Scheduler(engine, scheduler_id=args.id)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: scheduler.stop())
    print(f"redisflow scheduler {scheduler.id}: firing schedules' ticks", file=sys.stderr)
    scheduler.run()
    print(
        f"redisflow scheduler {scheduler.id}: {plural(scheduler.fired, 'run')} pushed, "
        f"{plural(scheduler.refused, 'tick')} left to other schedulers",
        file=sys.stderr,
    )
    return EXIT_OK


def register(sub: Any, parents: Parents) -> None:
    """Add ``schedule`` and ``scheduler`` to the ``redisflow`` parser."""
    p = sub.add_parser(
        "schedule",
        help="run templates on a cron or an interval: put, list, show, pause, unpause, "
        "trigger, preview, backfill, rm",
        description="Schedules run a stored template on a cron (5 fields, in a time zone) "
        "or every fixed interval; each tick runs once whatever the number of schedulers "
        "(`redisflow scheduler`, or `redisflow-agent --scheduler`). See docs/schedules.md.",
    )
    ss = p.add_subparsers(dest="schedule_command", required=True, metavar="ACTION")

    q = ss.add_parser(
        "put",
        parents=parents,
        help="store or update schedules from a file, or one from flags",
        description="Store (or update) schedules: every one of a YAML/JSON FILE (a mapping, "
        "a list, or schedules: [...]), or one given by flags. An update computes the next "
        "due time again from now; counters and fired ticks stay.",
    )
    q.add_argument("file", nargs="?", metavar="FILE")
    q.add_argument("--name", help="the schedule's name")
    q.add_argument("--template", help="the stored template each tick runs (its latest version)")
    q.add_argument("--cron", metavar="EXPR", help='5 fields, e.g. "0 2 * * *"')
    q.add_argument("--every", metavar="DURATION", help="an interval from the epoch: 15m, 1h")
    q.add_argument("--offset", metavar="DURATION", help="with --every: shift the ticks (5m)")
    q.add_argument("--timezone", metavar="ZONE", help="IANA zone of --cron (default UTC)")
    q.add_argument("--input", metavar="JSON|@FILE", help="a mapping every run's input starts from")
    q.add_argument(
        "--overlap", choices=OVERLAP, help="while the previous run goes on (default skip)"
    )
    q.add_argument("--catchup", choices=CATCHUP, help="missed ticks (default latest)")
    q.add_argument("--catchup-window", metavar="DURATION", help="latest: how late (default 1h)")
    q.add_argument("--max-catchup", type=positive_int, metavar="N", help="all: at most N (100)")
    q.add_argument("--jitter", metavar="DURATION", help="delay each tick by up to this")
    q.add_argument("--start-at", metavar="TIME", help="no tick before (ISO 8601)")
    q.add_argument("--end-at", metavar="TIME", help="no tick after (ISO 8601)")
    q.add_argument("--pause-on-failure", action="store_true", help="pause when a run fails")
    q.add_argument("--paused", action="store_true", help="store it paused")
    q.set_defaults(run=cmd_put, no_engine=True, writes=True)

    q = ss.add_parser("list", parents=parents, help="schedules: next due, last run, counters")
    q.set_defaults(run=cmd_list)
    q = ss.add_parser("show", parents=parents, help="one schedule in full")
    q.add_argument("name", type=name_arg)
    q.set_defaults(run=cmd_show)
    q = ss.add_parser("pause", parents=parents, help="stop firing its ticks")
    q.add_argument("name", type=name_arg)
    q.set_defaults(run=cmd_pause)
    q = ss.add_parser("unpause", parents=parents, help="fire its ticks again, from now")
    q.add_argument("name", type=name_arg)
    q.add_argument(
        "--catchup",
        action="store_true",
        help="from where it stopped: the ticks missed meanwhile as its catchup policy says",
    )
    q.set_defaults(run=cmd_unpause)
    q = ss.add_parser("trigger", parents=parents, help="run a tick now (the overlap policy holds)")
    q.add_argument("name", type=name_arg)
    q.set_defaults(run=cmd_trigger)
    q = ss.add_parser(
        "preview",
        parents=parents,
        help="the next ticks of a stored schedule or a file, daylight saving marked",
    )
    q.add_argument("target", metavar="NAME|FILE")
    q.add_argument("--next", type=positive_int, default=10, metavar="N", help="how many (10)")
    q.add_argument("--schedule", metavar="NAME", help="a FILE of several: which one")
    q.add_argument(
        "--from", dest="start", metavar="TIME", help="the ticks after TIME (default: now)"
    )
    q.set_defaults(run=cmd_preview, no_engine=True)
    q = ss.add_parser(
        "backfill",
        parents=parents,
        help="run the ticks of a past range that did not run (twice adds nothing)",
    )
    q.add_argument("name", type=name_arg)
    q.add_argument("--from", dest="start", required=True, metavar="TIME", help="first (ISO 8601)")
    q.add_argument("--to", dest="end", required=True, metavar="TIME", help="last (ISO 8601)")
    q.add_argument("--overlap", choices=OVERLAP, help="default buffer_all: one run after another")
    q.set_defaults(run=cmd_backfill)
    q = ss.add_parser("rm", parents=parents, help="delete a schedule (its runs go on)")
    q.add_argument("name", type=name_arg)
    q.set_defaults(run=cmd_rm)

    p = sub.add_parser(
        "scheduler",
        parents=parents,
        help="fire schedules' ticks until SIGTERM (any number may run)",
    )
    p.add_argument("--id", default=None, help="recorded in the runs' events (default user@host)")
    p.set_defaults(run=cmd_scheduler)
