"""``redisflow``: the operator CLI."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from .. import agent_ops, timing, viz
from ..client import Engine
from ..conditions import NOT_GIVEN
from ..definition import DEFAULT_MAX_PAYLOAD, DEFAULT_MAX_TASKS, check_name, resolve, validate
from ..definition import plan as plan_workflow
from ..errors import DefinitionError, PartialWriteError
from ..flow import check_key
from ..loader import load_file
from ..model import TaskState, WorkflowState, WorkflowStatus
from ..rules import OUTCOMES, Plan, PlannedTask
from ..store.codec import encode_input
from ..waits import wait_line
from . import bulk_cmds, cluster_cmds, log_cmds, rate_limit_cmds, schedule_cmds, template_cmds
from .common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_TIMED_OUT,
    add_global_options,
    apply_global_options,
    closed_pipe,
    connect,
    connection_options,
    env_flag,
    guarded,
    mark_leaves,
    partly_written,
    print_json,
)
from .http_cmds import add_http_commands

if TYPE_CHECKING:
    from rich.console import OverflowMethod

STATE_STYLE = {
    "scheduled": "blue",
    "queued": "blue",
    "running": "cyan",
    "paused": "yellow",
    "succeeded": "green",
    "failed": "red",
    "cancelled": "magenta",
    "waiting": "dim",
    "ready": "blue",
    "skipped": "dim",
    "upstream_failed": "dark_orange",
}


class Parser(argparse.ArgumentParser):
    """Reports a usage error as one line (bad input, exit code 2), not the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: {message} (see {self.prog} --help)\n")


class _LazyConsole:
    """rich's Console, imported on first use: commands that print JSON start faster."""

    _console: Any = None

    def console(self) -> Any:
        """The console, made on first use (as wide as a terminal, else unbounded)."""
        if self._console is None:
            from rich.console import Console

            class _Console(Console):
                def on_broken_pipe(self) -> None:
                    raise BrokenPipeError  # main() ends quietly (rich would exit 1)

            # Output that is not a terminal is never cut to a width: as wide as it needs.
            width = None if terminal() else UNCUT_WIDTH
            _LazyConsole._console = _Console(highlight=False, width=width)
        return self._console

    def print(self, *objects: Any) -> None:
        self.console().print(*objects)

    def print_table(self, table: Any) -> None:
        """Print a table whose last column gives way on a narrow terminal; on one too
        narrow for the other columns and a few characters of it, the table is printed
        at its full width (the terminal wraps its lines): nothing is cut or dropped."""
        console = self.console()
        if terminal():
            wide = console.options.update_width(UNCUT_WIDTH)
            last = table._measure_column(console, wide, table.columns[-1]).maximum
            expand, table.expand = table.expand, False
            natural = console.measure(table, options=wide).maximum
            table.expand = expand
            if natural > console.width < natural - last + LAST_COLUMN_LEAST:
                table.expand = False
                width, console.width = console.width, natural  # print(width=) caps at it
                try:
                    console.print(table)
                finally:
                    console.width = width
                return
        console.print(table)


UNCUT_WIDTH = 100_000  # the width of output that is not a terminal: nothing is cut
LAST_COLUMN_LEAST = 24  # a table's last column, on a terminal: at least this, else full width


def terminal() -> bool:
    """Whether stdout is a terminal (else tables take the width their cells need)."""
    return sys.stdout.isatty()


out = _LazyConsole()


def _table(*columns: str, overflow: OverflowMethod = "ellipsis") -> Any:
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for col in columns:
        table.add_column(col, overflow=overflow)
    return table


def positive_int(text: str) -> int:
    """An integer of at least 1 (page numbers, page sizes, counts)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {_arg(text)}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def max_tasks(text: str) -> int:
    """A limit on tasks per workflow, up to the engine's own (push_many checks that one)."""
    value = positive_int(text)
    if value > DEFAULT_MAX_TASKS:
        raise argparse.ArgumentTypeError(f"must be at most {DEFAULT_MAX_TASKS}, not {value}")
    return value


KEY_PREFIX = "key:"  # `status key:order-8812`: the workflow pushed with that key


def workflow_id(text: str) -> str:
    """A workflow id (a whole number), or ``key:<K>``: the workflow pushed with
    idempotency key K (looked up once connected: :func:`resolve_key`)."""
    if text.startswith(KEY_PREFIX):
        try:
            check_key(text[len(KEY_PREFIX) :])
        except DefinitionError as e:
            raise argparse.ArgumentTypeError(f"{_arg(text)}: {e}") from None
        return text
    if not (text.isascii() and text.isdigit()) or len(text) > 19:
        raise argparse.ArgumentTypeError(
            f"not a workflow id (a whole number, or key:<idempotency key>): {_arg(text)}"
        )
    return str(int(text))


def resolve_key(engine: Engine, wid: str) -> str:
    """A workflow id as given: ``key:<K>`` becomes the id of the workflow K names."""
    if wid.startswith(KEY_PREFIX):
        return engine.id_for_key(wid[len(KEY_PREFIX) :])
    return wid


def name_arg(text: str) -> str:
    """A workflow name or task type given on the command line."""
    try:
        return check_name(text, "the name", None)
    except DefinitionError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _arg(text: str) -> str:
    """An argument as typed, escaped for a one-line message."""
    return repr(text) if text.isprintable() else ascii(text)


def esc(value: object) -> str:
    """``value`` as text that rich prints as is (names may hold ``[...]``)."""
    from rich.markup import escape

    return escape(str(value))


def positive_float(text: str) -> float:
    """A number of seconds above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {_arg(text)}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
    return value


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``1h30m``, ``7d`` or ``2w`` in seconds."""
    try:
        return timing.parse_duration(text)
    except DefinitionError:
        raise argparse.ArgumentTypeError(
            f"not a duration: {_arg(text)} (e.g. 90s, 15m, 1h30m, 7d)"
        ) from None


class _Ago(float):
    """Seconds before now, remembering the text given (for messages)."""

    text: str


def _ago_arg(text: str) -> _Ago:
    """``--since`` / ``--until``: a duration before now (``2h``) or a time
    (``2026-12-01T06:00``, ``06:00``: the last one), as seconds before now."""
    try:
        seconds = timing.parse_duration(text)
    except DefinitionError:
        try:
            when = timing.parse_time(text)
        except DefinitionError:
            raise argparse.ArgumentTypeError(
                f"not a duration or a time: {_arg(text)} (e.g. 2h, 30m, 2026-12-01T06:00)"
            ) from None
        seconds = time.time() - when.timestamp()
        if seconds < 0 and "-" not in text:  # a time of day: the last one, not the next
            seconds += 86400
    value = _Ago(seconds)
    value.text = text
    return value


def _retention(text: str) -> float | None:
    """``expire``'s retention: a duration, or ``never`` (None)."""
    if text == "never":
        return None
    try:
        seconds = timing.parse_duration(text)
    except DefinitionError:
        raise argparse.ArgumentTypeError(
            f"not a duration or 'never': {_arg(text)} (e.g. 12h, 7d, 2w, never)"
        ) from None
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"a retention must be above 0, not {_arg(text)}")
    return seconds


def parse_time(text: str) -> datetime:
    """An ISO 8601 time or a time of day (see :func:`engine.timing.parse_time`)."""
    try:
        return timing.parse_time(text)
    except DefinitionError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix(f"--at {text!r} ")) from None


def _span(s: float) -> str:
    """A length of time, roughly: ``3d``, ``5h``, ``12m``, ``40s``."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s / size:.0f}{unit}"
    return f"{s:.0f}s"


def _ago(ts: float | None, now: float) -> str:
    if ts is None:
        return "-"
    s = max(0.0, now - ts)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s / size:.0f}{unit} ago"
    return f"{s:.0f}s ago"


def _type_label(task_type: str) -> str:
    return esc(task_type) if task_type else '""'


def _styled(state: str) -> str:
    style = STATE_STYLE.get(state)
    return f"[{style}]{state}[/]" if style else esc(state)


# -- commands ---------------------------------------------------------------------------


def read_input(text: str | None, max_bytes: int, what: str = "--input", noun: str = "input") -> Any:
    """``--input`` (or ``what``): JSON text, or ``@path`` of a JSON file; None when not
    given.

    Raises :class:`DefinitionError` naming what is wrong (nothing is pushed).
    """
    if text is None:
        return None
    where = what
    if text.startswith("@"):
        where = text[1:]
        try:
            with open(where, encoding="utf-8") as f:
                text = f.read(max_bytes + 1)
        except (OSError, UnicodeDecodeError) as e:
            raise DefinitionError(f"{where}: cannot read the input file ({e})") from None
    if len(text.encode(errors="surrogatepass")) > max_bytes:
        raise DefinitionError(f"{where}: the {noun} is over the {max_bytes}-byte limit")
    try:
        value = json.loads(text)
    except RecursionError:
        raise DefinitionError(f"{where}: the {noun} is nested too deeply") from None
    except ValueError as e:
        raise DefinitionError(f"{where}: the {noun} is not JSON ({e})") from None
    encode_input(value, max_bytes)  # every other check a stored input passes
    return value


def cmd_push(engine: Engine, args: argparse.Namespace) -> int:
    # compiled once, before connecting (see run)
    runs = [c for c in args.compiled for _ in range(args.copies)]
    if args.key is not None:
        if len(runs) != 1:
            raise DefinitionError(
                f"--key names one run: push one workflow without --copies, not {len(runs)}"
            )
        ids = [
            engine.push(
                runs[0], args.input, key=args.key, start_in=args.start_in, start_at=args.start_at
            )
        ]
    else:
        try:
            ids = engine.push_many(
                runs,
                None if args.input is None else [args.input] * len(runs),
                start_in=args.start_in,
                start_at=args.start_at,
            )
        except PartialWriteError as e:  # the ids of what was written, then why the rest not
            if args.json:
                print_json({"ids": e.stored_ids, "written": e.written, "total": e.total})
            else:
                for wid in e.stored_ids:
                    print(wid, flush=True)
            return partly_written(e)
    return report_pushed(engine, ids, args)


def report_pushed(engine: Engine, ids: list[str], args: argparse.Namespace) -> int:
    """Print the ids pushed, and with ``--wait`` wait for them (exit 1 if any failed)."""
    if args.json and not args.wait:
        print_json({"ids": ids})
    elif not args.json:
        for wid in ids:
            print(wid, flush=True)
    if not args.wait:
        return EXIT_OK
    if engine.embedded is not None:
        print(
            "redisflow: waiting on a private Redis that no agent can reach; give --url or "
            "REDISFLOW_URL to wait for agents (see: redisflow server)",
            file=sys.stderr,
        )
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    final: dict[str, str] = {}
    said = _UnservedNotes(engine)
    if ids:
        said.check(ids[0])  # at once; then for the workflow waited for, every CHECK_S
    try:
        for wid in ids:  # --timeout bounds the whole wait, not each workflow's
            while True:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError
                try:
                    slice_s = CHECK_S if left is None else min(CHECK_S, left)
                    final[wid] = engine.wait(wid, timeout=slice_s).value
                    break
                except TimeoutError:
                    said.check(wid)
    except TimeoutError:
        late = [wid for wid in ids if wid not in final]
        print(
            f"redisflow: gave up after {args.timeout:g}s; still unfinished: {', '.join(late)}",
            file=sys.stderr,
        )
        return EXIT_TIMED_OUT
    if args.json:
        print_json({"ids": ids, "states": final})
    else:
        for wid, st in final.items():
            print(f"workflow {wid}: {st}", file=sys.stderr)
    return EXIT_OK if all(s == "succeeded" for s in final.values()) else EXIT_FAILED


CHECK_S = 10.0  # while waiting: how often to look for ready tasks no live agent serves
RESAY_S = 60.0  # an unchanged note is said again this often


class _UnservedNotes:
    """Say on stderr when a waited-for workflow has ready tasks no live agent serves."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.last = ""
        self.said_at = 0.0

    def check(self, wid: str) -> None:
        from ..unserved import unserved, unserved_line

        line = unserved_line(unserved(self.engine.status(wid), self.engine.agents()))
        now = time.monotonic()
        if line and (line != self.last or now - self.said_at >= RESAY_S):
            print(f"redisflow: workflow {wid}: {line}", file=sys.stderr, flush=True)
            self.said_at = now
        self.last = line


def map_counts(items: dict[str, int]) -> str:
    """A map's items on one line: ``98,211 ✔ 12 ✖ 1,777 running/ready/waiting``."""
    active = items["running"] + items["ready"] + items["waiting"]
    parts = [f"{items['succeeded']:,} ✔", f"{items['failed']:,} ✖"]
    if active:
        parts.append(f"{active:,} running/ready/waiting")
    if items["cancelled"]:
        parts.append(f"{items['cancelled']:,} cancelled")
    total = items.get("total")
    parts.append("(expanding)" if total is None else f"of {total:,}")
    return " ".join(parts)


def _took(started: float | None, finished: float | None) -> str:
    if started is None or finished is None:
        return "-"
    return f"{finished - started:.3f}s"


def _detail(output: Any, error: str | None) -> str:
    """The output / error cell: the error's last line in red, or the output as JSON."""
    if error:
        return f"[red]{esc((error.strip().splitlines() or [''])[-1][:300])}[/]"
    shown = "" if output is None else json.dumps(output, separators=(",", ":"))
    return esc(shown[:300])


def _wide_table(*columns: str) -> Any:
    """A table whose last column alone gives way on narrow terminals; output that is not
    a terminal is never cut (see :class:`_LazyConsole`)."""
    table = _table(*columns)
    for col in table.columns:
        col.no_wrap = True
    table.columns[-1].ratio = 1
    table.expand = terminal()  # else as wide as its cells: nothing cut, no padding
    return table


def _steps_line(steps: dict[str, TaskState] | None) -> str:
    """An item's steps and their states, for a map whose items run several steps."""
    if not steps:
        return ""
    return "\n[dim]steps[/] " + "  ".join(f"{esc(n)} {_styled(s.value)}" for n, s in steps.items())


def cmd_items(engine: Engine, args: argparse.Namespace) -> int:
    """``status WID --task MAP``: a page of a map's items."""
    task = engine.status(args.wid).task(args.task)
    if task.items is None:
        raise DefinitionError(f"task {args.task!r} of workflow {args.wid} is not a map")
    state = "failed" if args.failed else None
    offset = (args.page - 1) * args.limit
    rows = engine.items(args.wid, args.task, offset, args.limit, state)
    total = task.items["failed"] if args.failed else task.items.get("total")
    if total is None:  # still expanding: what is stored so far
        total = sum(n for k, n in task.items.items() if k != "total")
    if args.json:
        print_json(
            {
                "id": args.wid,
                "task": args.task,
                "page": args.page,
                "total": total,
                "counts": task.items,
                "items": [r.to_dict() for r in rows],
            }
        )
        return EXIT_OK
    out.print(f"[bold]{esc(task.name)}[/] of workflow {args.wid}  {map_counts(task.items)}")
    table = _wide_table("item", "state", "attempts", "agent", "took", "element", "output / error")
    for r in rows:
        element = "" if r.element is None else json.dumps(r.element, separators=(",", ":"))
        table.add_row(
            str(r.index),
            _styled(r.state.value),
            f"{r.attempts}" + (f" ({r.failures} failed)" if r.failures else ""),
            esc(r.agent) if r.agent else "-",
            _took(r.started_at, r.finished_at),
            esc(element[:60]) or "-",
            _detail(r.output, r.error) + _steps_line(r.steps),
        )
    out.print_table(table)
    pages = max(1, -(-total // args.limit))
    which = "failed items" if args.failed else "items"
    out.print(f"[dim]page {args.page} of {pages} ({total:,} {which})[/]")
    return EXIT_OK


def _unserved(engine: Engine, st: WorkflowStatus) -> dict[str, list[str]]:
    """Ready tasks of ``st`` no live agent serves, by type (agents read only when some
    task is ready)."""
    from ..unserved import unserved

    if not any(t.state == TaskState.READY for t in st.tasks):
        return {}
    return unserved(st, engine.agents())


def cmd_status(engine: Engine, args: argparse.Namespace) -> int:
    if args.task is not None:
        return cmd_items(engine, args)
    if args.failed or args.page != 1:
        raise DefinitionError("--page and --failed page a map's items: give --task too")
    st = engine.status(args.wid)
    found = _unserved(engine, st)
    progress = {} if st.state.finished else log_cmds.running_progress(engine, st.id)
    if args.json:
        print_json(
            {**st.to_dict(), "unserved": found, **({"progress": progress} if progress else {})}
        )
        return EXIT_OK
    now = engine.server_time()
    upstream = f", {st.upstream_failed} upstream_failed" if st.upstream_failed else ""
    out.print(
        f"[bold]workflow {st.id}[/] {esc(st.name)}  {_styled(st.state.value)}"
        + (f" ({esc(st.reason)})" if st.reason else "")
        + f"  {st.succeeded}/{st.total} succeeded, {st.failed} failed{upstream}, "
        f"{st.skipped} skipped  created {_ago(st.created_at, now)}"
        + (f", finished {_ago(st.finished_at, now)}" if st.finished_at else "")
    )
    out.print("  ".join(f"{k} {v}" for k, v in st.counts.items() if v))
    if st.parent is not None:
        pwid, pidx, _ = st.parent.rsplit(":", 2)
        out.print(f"child run of workflow {pwid} (its task #{pidx}), depth {st.depth}")
    if found:
        from ..unserved import unserved_line

        out.print(f"[yellow]{esc(unserved_line(found))}[/]")
    if st.start_at is not None:
        left = st.start_at - time.time()
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(st.start_at))
        out.print(f"starts {when} (in {_span(max(0.0, left))})")
    if st.deadline is not None and not st.state.finished:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(st.deadline))
        out.print(f"deadline {when} (in {_span(max(0.0, st.deadline - time.time()))})")
    if st.failed:
        unhandled, handled = st.failures()
        if handled:
            out.print(f"failures handled by a failure branch: {esc(', '.join(handled))}")
        if unhandled and st.state.finished:
            out.print(f"failures that fail it: {esc(', '.join(unhandled))}")
    if st.input is not None:
        shown = json.dumps(st.input, separators=(",", ":"), ensure_ascii=False)
        out.print("input " + shown[:300].replace("[", r"\["))
    ruled = any(t.trigger != "all_success" for t in st.tasks)
    columns = ["task", "type", "state", "attempts", "agent", "took", "after", "output / error"]
    if ruled:
        columns.insert(6, "trigger")
    table = _wide_table(*columns)
    for t in st.tasks:
        detail = _detail(t.output, t.error)
        if t.items is not None:  # a map: its items' counts, then its error (if any)
            detail = map_counts(t.items) + (f"  {detail}" if t.error else "")
        elif t.skip_reason and t.state == "skipped":  # its condition, or its handler
            detail = f"[dim]{esc(t.skip_reason[:300])}[/]"
        elif t.wait is not None and (line := wait_line(t.wait, t.signal, t.state, t.started_at)):
            if t.child and t.state in ("ready", "suspended"):
                line += f" (run {t.child})"
            detail = esc(line) if not t.error else f"{detail}  [dim]{esc(line)}[/]"
        elif t.state in ("waiting", "skipped", "upstream_failed") and t.parents:
            detail = f"[dim]{esc(st.why(t))}[/]"
        elif t.throttled_until is not None:
            when = time.strftime("%H:%M:%S", time.localtime(t.throttled_until))
            detail = f"[yellow]throttled, next at {when}{f'{t.throttled_until % 1:.3f}'[1:]}[/]"
        elif t.state == "running" and str(t.index) in progress:
            detail = esc(log_cmds.progress_text(progress[str(t.index)]))
        row = [
            esc(t.name),
            esc(t.type) or "-",
            _styled(t.state.value),
            f"{t.attempts}" + (f" ({t.failures} failed)" if t.failures else ""),
            esc(t.agent) if t.agent else "-",
            _took(t.started_at, t.finished_at),
            esc(",".join(t.parents)) or "-",
            detail,
        ]
        if ruled:
            row.insert(6, esc(t.trigger))
        table.add_row(*row)
    out.print_table(table)
    return EXIT_OK


def parse_assume(values: Sequence[str] | None) -> dict[str, str]:
    """``--assume extract=failed,load=succeeded`` (repeatable) as ``{task: outcome}``."""
    out: dict[str, str] = {}
    for value in values or ():
        for item in value.split(","):
            name, eq, outcome = item.strip().rpartition("=")
            if not eq or not name:
                raise DefinitionError(
                    f"--assume {_arg(item)}: give TASK=OUTCOME (outcome: {', '.join(OUTCOMES)})"
                )
            out[name.strip()] = outcome.strip()
    return out


def parse_outputs(values: Sequence[str] | None) -> dict[str, Any]:
    """``--output check='{"status":"ok"}'`` (repeatable) as ``{task: output}``: the
    outputs ``redisflow plan`` decides conditions (``when``) with."""
    out: dict[str, Any] = {}
    for value in values or ():
        name, eq, text = value.partition("=")
        if not eq or not name.strip():
            raise DefinitionError(f"--output {_arg(value)}: give TASK=JSON")
        try:
            out[name.strip()] = json.loads(text)
        except ValueError as e:
            raise DefinitionError(f"--output {_arg(value)}: not JSON ({e})") from None
    return out


def _plans(args: argparse.Namespace) -> list[Plan]:
    """A plan of every workflow in ``args.file``, each with the assumptions naming its
    tasks; an assumption that names no task of any of them is bad input."""
    workflows = load_file(args.file, args.max_tasks)
    assume = parse_assume(args.assume)
    known = {t.name for wf in workflows for t in wf.tasks}
    for name in assume:
        if name not in known:
            raise DefinitionError(f"--assume: {args.file} has no task {name!r}")
    outputs = parse_outputs(args.output)
    for name in outputs:
        if name not in known:
            raise DefinitionError(f"--output: {args.file} has no task {name!r}")
    given = NOT_GIVEN if args.input is None else read_input(args.input, DEFAULT_MAX_PAYLOAD)
    plans = []
    for wf in workflows:
        own = {t.name for t in wf.tasks}
        plans.append(
            plan_workflow(
                wf,
                {n: o for n, o in assume.items() if n in own},
                {n: o for n, o in outputs.items() if n in own},
                given,
            )
        )
    return plans


def _planned(t: PlannedTask) -> str:
    if not t.runs:
        return _styled(t.state)
    how = " (assumed)" if t.assumed else ""
    return f"runs → {_styled(t.state)}{how}"


def cmd_plan(_: Engine | None, args: argparse.Namespace) -> int:
    """``redisflow plan FILE --assume T=failed``: what would run, before anything runs."""
    plans = _plans(args)
    if args.json:
        print_json([p.to_dict() for p in plans] if len(plans) > 1 else plans[0].to_dict())
        return EXIT_OK
    for p in plans:
        table = _table("task", "trigger", "after", "plan", "why", overflow="fold")
        for col in table.columns[:-1]:
            col.no_wrap = True
        for t in p.tasks:
            table.add_row(
                esc(t.name),
                esc(t.rule),
                esc(",".join(t.parents)) or "-",
                _planned(t),
                f"[dim]{esc(t.why)}[/]",
            )
        out.print(f"[bold]plan of {esc(p.workflow)}[/]")
        out.print_table(table)
        line = f"workflow {esc(p.workflow)}: {_styled(p.state)}"
        handled = [
            t.name
            for t in p.tasks
            if t.state == "failed" and t.rule != "finally" and t.name not in p.unhandled
        ]
        if p.unhandled:
            line += f" (failures that fail it: {esc(', '.join(p.unhandled))})"
        elif handled:
            line += f" (failures handled by a failure branch: {esc(', '.join(handled))})"
        out.print(line)
        if p.ignored:
            out.print(f"[dim]not run, so not assumed: {esc(', '.join(p.ignored))}[/]")
    for note in _join_traps(args):
        out.print(f"[yellow]note: {esc(note)}[/]")
    return EXIT_OK


def _join_traps(args: argparse.Namespace) -> list[str]:
    """Joins after a conditional branch that keep all_success (see engine.conditions)."""
    from ..conditions import join_traps

    notes = []
    for wf in load_file(args.file, args.max_tasks):
        if any(t.when is not None for t in wf.tasks):
            validate(wf)  # adds the edges `before` stands for
            parents, rules = resolve(wf)
            notes += join_traps(wf.tasks, parents, rules)
    return notes


def _viz_graph(
    args: argparse.Namespace,
) -> tuple[str, list[viz.Node], list[list[int]]]:
    """The graph ``redisflow viz`` draws: a file's workflow (coloured by a plan when
    given --assume) or a stored workflow with its tasks' states."""
    target = args.target
    if not Path(target).exists() and (
        target.isascii() and target.isdigit() or target.startswith(KEY_PREFIX)
    ):
        engine = connect(args)
        try:
            st = engine.status(resolve_key(engine, workflow_id(target)))
        finally:
            engine.close()
        index = {t.name: t.index for t in st.tasks}
        nodes = [viz.Node(t.name, t.trigger, t.state.value) for t in st.tasks]
        return f"{st.name} #{st.id}", nodes, [[index[p] for p in t.parents] for t in st.tasks]
    workflows = load_file(target, args.max_tasks)
    if len(workflows) > 1 and args.workflow is None:
        names = ", ".join(wf.name for wf in workflows)
        raise DefinitionError(
            f"{target} holds {len(workflows)} workflows ({names}): give --workflow"
        )
    chosen = [wf for wf in workflows if args.workflow in (None, wf.name)]
    if not chosen:
        raise DefinitionError(f"{target} has no workflow named {args.workflow!r}")
    wf = chosen[0]
    validate(wf, args.max_payload, args.max_tasks)
    parents, rules = resolve(wf)
    index = {t.name: i for i, t in enumerate(wf.tasks)}
    states: list[str | None] = [None] * len(wf.tasks)
    if args.assume is not None:
        planned = plan_workflow(wf, parse_assume(args.assume))
        states = [t.state for t in planned.tasks]
    nodes = [viz.Node(t.name, r, s) for t, r, s in zip(wf.tasks, rules, states, strict=True)]
    return wf.name, nodes, [[index[p] for p in ps] for ps in parents]


def cmd_viz(_: Engine | None, args: argparse.Namespace) -> int:
    """``redisflow viz FILE|WID --format mermaid|dot``."""
    title, nodes, parents = _viz_graph(args)
    sys.stdout.write(viz.render(args.format, title, nodes, parents))
    return EXIT_OK


def cmd_list(engine: Engine, args: argparse.Namespace) -> int:
    offset = (args.page - 1) * args.limit
    now = engine.server_time()
    after = None if args.since is None else now - args.since
    before = None if args.until is None else now - args.until
    if after is not None and before is not None and before <= after:
        raise DefinitionError(
            f"--until {args.until.text} is not later than --since {args.since.text}: "
            "no workflow can be in that window"
        )
    rows = engine.list(
        args.state,
        args.name,
        offset=offset,
        limit=args.limit,
        template=args.template,
        oldest_first=args.oldest,
        created_after=after,
        created_before=before,
    )
    total = engine.count(args.state, args.name, args.template, after, before)
    if args.json:
        print_json({"page": args.page, "total": total, "workflows": [r.to_dict() for r in rows]})
        return EXIT_OK
    table = _table("id", "name", "state", "done", "failed", "created", "finished")
    for r in rows:
        table.add_row(
            r.id,
            esc(r.name),
            _styled(r.state.value),
            f"{r.succeeded}/{r.total}",
            str(r.failed),
            _ago(r.created_at, now),
            _ago(r.finished_at, now),
        )
    out.print_table(table)
    pages = max(1, -(-total // args.limit))
    out.print(f"[dim]page {args.page} of {pages} ({total} workflows)[/]")
    return EXIT_OK


def cmd_agents(engine: Engine, args: argparse.Namespace) -> int:
    if args.action == "drain":
        if not args.agent:
            raise DefinitionError("agents drain needs the agent's id (redisflow agents lists them)")
        engine.drain_agent(args.agent)
        if args.json:
            print_json({"agent": args.agent, "draining": True})
        else:
            print(f"agent {args.agent}: asked to drain (at its next heartbeat it stops claiming, "
                  "finishes what it runs and exits)")  # fmt: skip
        return EXIT_OK
    every = engine.agents()
    agents = every if args.all else agent_ops.current(every)
    if args.json:
        print_json([a.to_dict() for a in agents])
        return EXIT_OK
    table = _table("agent", "types", "state", "heartbeat", "running", "concurrency", "host/pid")
    for a in agents:
        style = {"online": "green", "stale": "yellow", "dead": "red", "draining": "cyan"}.get(
            a.state.value, "dim"
        )
        table.add_row(
            esc(a.id),
            ",".join(_type_label(t) for t in a.types),
            f"[{style}]{a.state.value}[/]",
            "-" if a.heartbeat_age is None else f"{a.heartbeat_age:.1f}s ago",
            str(len(a.running)),
            str(a.concurrency),
            esc(f"{a.host}/{a.pid}"),
        )
    out.print_table(table)
    if agents:
        a = agents[0]
        out.print(
            f"[dim]online: heartbeat within {2 * a.heartbeat_s:.0f}s; stale: later but within "
            f"the {a.lease_s:.0f}s lease; dead: lease expired (tasks handed on)[/]"
        )
    if len(every) > len(agents):
        out.print(
            f"[dim]{len(every) - len(agents)} agents stopped or dead over "
            f"{_span(agent_ops.GONE_AFTER_S)} ago are hidden (--all shows them; Redis "
            "forgets them a day after)[/]"
        )
    return EXIT_OK


def cmd_stats(engine: Engine, args: argparse.Namespace) -> int:
    if args.by:
        return log_cmds.cmd_history(engine, args)
    s = engine.stats()
    if args.json:
        print_json(s.to_dict())
        return EXIT_OK
    out.print("workflows  " + "  ".join(f"{_styled(k)} {v}" for k, v in s.workflows.items()))
    out.print("tasks      " + "  ".join(f"{_styled(k)} {v}" for k, v in s.tasks.items()))
    out.print(f"pushed     {s.workflows_pushed} workflows, {s.tasks_pushed} tasks")
    if s.queued:
        out.print("queued     " + "  ".join(f"{_type_label(t)} {n}" for t, n in s.queued.items()))
    return EXIT_OK


def cmd_events(engine: Engine, args: argparse.Namespace) -> int:
    events = engine.events(args.count)
    if args.json:
        print_json([e.to_dict() for e in events])
        return EXIT_OK
    for e in reversed(events):
        stamp = time.strftime("%H:%M:%S", time.localtime(e.ts))
        task = "" if e.task is None else f" task {e.task_name or e.task}"
        extra = " ".join(f"{k}={v}" for k, v in e.data.items())
        print(f"{stamp} {e.kind:<20} {e.wid}{task} {extra}".rstrip())
    return EXIT_OK


def _control(name: str) -> Any:
    def run(engine: Engine, args: argparse.Namespace) -> int:
        if bulk_cmds.wants_bulk(args) or not args.ids:
            return bulk_cmds.run_bulk(engine, args, name)
        args.wid = resolve_key(engine, args.ids[0])
        method = getattr(engine, name)
        result = method(args.wid, args.task) if name == "retry" else method(args.wid)
        if args.json:
            print_json({"id": args.wid, "op": name, "count": result})
        else:
            print(f"workflow {args.wid}: {name} done" + (f" ({result} tasks)" if result else ""))
        return EXIT_OK

    return run


def confirm_cleanup(engine: Engine, args: argparse.Namespace) -> bool:
    """Ask on the terminal before ``cleanup --finished`` deletes, saying how many."""
    n = engine.count_finished(args.older_than or 0.0)
    if n == 0:
        return True  # nothing to delete: nothing to ask
    when = f" that finished more than {_span(args.older_than)} ago" if args.older_than else ""
    sys.stderr.write(f"delete {n:,} finished workflows{when}? [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def cmd_cleanup(engine: Engine, args: argparse.Namespace) -> int:
    if args.finished and (args.ids or bulk_cmds.has_filter(args)):
        raise DefinitionError("cleanup --finished takes no workflow ids and no filter")
    if not args.finished and bulk_cmds.wants_bulk(args):
        return bulk_cmds.run_bulk(engine, args, "cleanup")
    args.wid = resolve_key(engine, args.ids[0]) if args.ids else None
    if args.finished:
        if not args.yes and sys.stdin.isatty() and not confirm_cleanup(engine, args):
            print("nothing deleted", file=sys.stderr)
            return EXIT_FAILED
        n = engine.cleanup_finished(args.older_than or 0.0)
        if args.json:
            print_json({"cleaned": n})
        else:
            print(f"cleaned up {n} finished workflows")
        return EXIT_OK
    if args.wid is None:
        raise DefinitionError("cleanup needs a workflow id or --finished")
    engine.cleanup(args.wid)
    if args.json:
        print_json({"cleaned": 1, "id": args.wid})
    else:
        print(f"workflow {args.wid}: cleaned up")
    return EXIT_OK


def cmd_expire(engine: Engine, args: argparse.Namespace) -> int:
    due = engine.expire(args.wid, args.ttl)
    if args.json:
        print_json({"id": args.wid, "ttl": args.ttl, "expires_at": due})
    elif args.ttl is None:
        print(f"workflow {args.wid}: kept until cleaned up by hand")
    elif due is None:
        print(f"workflow {args.wid}: kept {_span(args.ttl)} once it ends")
    else:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(due))
        print(f"workflow {args.wid}: kept until {when} ({_span(args.ttl)})")
    return EXIT_OK


def cmd_signal(engine: Engine, args: argparse.Namespace) -> int:
    payload = read_input(args.data, engine.max_payload, "--data", "payload")
    done = engine.signal(
        args.wid, args.name, payload,
        signal_id=args.id, reject=args.reject, comment=args.comment, by=args.by,
    )  # fmt: skip
    if args.json:
        print_json(done.to_dict())
    elif done.outcome == "delivered":
        how = "failed it (rejected)" if args.reject else "ended it"
        print(f"workflow {args.wid}: signal {args.name} reached task {done.task} and {how}")
    elif done.outcome == "kept":
        print(f"workflow {args.wid}: signal {args.name} kept for a wait not reached yet")
    else:
        first = done.outcome.split(":", 1)[1]
        print(f"workflow {args.wid}: signal id {args.id} was applied before ({first}): no change")
    return EXIT_OK


def cmd_server(_: Engine | None, args: argparse.Namespace) -> int:
    from ..embedded import EmbeddedRedis
    from ..local_cluster import LocalCluster

    server: EmbeddedRedis | LocalCluster
    if args.cluster is not None:
        if args.cluster < 1 or args.replicas < 0:
            raise DefinitionError("--cluster needs 1 or more masters, --replicas 0 or more")
        if args.port is not None:
            raise DefinitionError("--port is for a single server: a cluster takes free ports")
        server = LocalCluster(args.cluster, args.replicas).start()
        what = f"private Redis Cluster ({args.cluster} masters, {args.replicas} replicas each)"
    else:
        server = EmbeddedRedis(port=args.port).start()
        what = "private Redis"
    print(f"export REDISFLOW_URL={server.url}", flush=True)
    print(f"redisflow: {what} running; Ctrl+C stops it", file=sys.stderr, flush=True)
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    except KeyboardInterrupt:
        pass
    server.stop()
    return EXIT_OK


def cmd_acl(_: Engine | None, args: argparse.Namespace) -> int:
    from ..acl import setuser_line

    try:
        if args.user:  # one user with every role given (an agent with --scheduler: two)
            lines = [setuser_line(args.roles, args.namespace, args.user, args.cluster, args.db)]
        else:
            lines = [
                setuser_line(role, args.namespace, None, args.cluster, args.db)
                for role in args.roles
            ]
    except ValueError as e:
        raise DefinitionError(str(e)) from None
    for line in lines:
        print(line)
    return EXIT_OK


# -- parser -----------------------------------------------------------------------------


def add_wait_options(p: argparse.ArgumentParser) -> None:
    """``--wait`` and ``--timeout`` (see :func:`report_pushed`)."""
    p.add_argument(
        "--wait", action="store_true", help="wait until they finish; exit 1 if any failed"
    )
    p.add_argument(
        "--timeout",
        type=parse_duration,
        default=None,
        help="give up waiting after this (exit 5)",
    )


def build_parser() -> argparse.ArgumentParser:
    conn = connection_options()
    js = argparse.ArgumentParser(add_help=False)
    js.add_argument("--json", action="store_true", help="machine-readable output")
    parser = Parser(
        prog="redisflow",
        allow_abbrev=False,  # else `push F --wait` would be ambiguous with --wait-replicas
        description="Push, watch and steer redisflow workflows.",
        epilog="exit codes: 0 ok, 1 a waited-for workflow failed, 2 bad input, 3 Redis "
        "unreachable (or refused: nothing written), 4 partly written (the ids written are "
        "printed), 5 --wait gave up (--timeout) before they finished, 141 stdout closed by "
        "its reader (| head). Connection options and --json go before or after the command.",
    )
    # Subcommand parsers are Parsers; their parents are plain ArgumentParsers.
    sub: argparse._SubParsersAction[argparse.ArgumentParser] = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=Parser
    )
    both = [conn, js]

    p = sub.add_parser("push", parents=both, help="push workflow files (YAML or JSON)")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument(
        "--copies",
        type=positive_int,
        default=1,
        metavar="N",
        help="push each workflow N times (they share one stored definition)",
    )
    p.add_argument(
        "--input",
        metavar="JSON|@FILE",
        help="the run's input, any JSON value (or @file.json): every task sees it as task.input",
    )
    later = p.add_mutually_exclusive_group()
    later.add_argument(
        "--at",
        dest="start_at",
        type=parse_time,
        metavar="TIME",
        help="start at TIME (2026-12-01T06:00[+01:00], or 06:00: the next one); scheduled "
        "till then, cancellable, `release` starts it at once",
    )
    later.add_argument(
        "--in",
        dest="start_in",
        type=parse_duration,
        metavar="DURATION",
        help="start this long from now (10m, 1h30m, 2d)",
    )
    p.add_argument(
        "--key",
        metavar="KEY",
        help="idempotency key: while a workflow pushed with KEY exists, pushing again "
        "prints its id and pushes nothing",
    )
    add_wait_options(p)
    p.add_argument(
        "--max-tasks",
        type=max_tasks,
        default=DEFAULT_MAX_TASKS,
        metavar="N",
        help=f"refuse a workflow of more than N tasks (default and most: {DEFAULT_MAX_TASKS:,})",
    )
    p.set_defaults(run=cmd_push, writes=True)

    p = sub.add_parser("status", parents=both, help="one workflow and its tasks")
    p.add_argument("wid", type=workflow_id, metavar="WID|key:KEY")
    p.add_argument("--task", type=name_arg, help="a map: page its items")
    p.add_argument("--page", type=positive_int, default=1, help="with --task: which page")
    p.add_argument("--limit", type=positive_int, default=50, help="with --task: items a page")
    p.add_argument("--failed", action="store_true", help="with --task: failed items only")
    p.set_defaults(run=cmd_status)

    p = sub.add_parser("list", parents=both, help="workflows, newest first, page by page")
    p.add_argument("--state", choices=[s.value for s in WorkflowState])
    p.add_argument("--name", type=name_arg)
    p.add_argument("--template", type=name_arg, help="runs of this template only")
    p.add_argument("--oldest", action="store_true", help="oldest first")
    p.add_argument(
        "--since",
        type=_ago_arg,
        metavar="DURATION|TIME",
        help="created at most this long ago (2h) or at/after TIME (2026-12-01T06:00)",
    )
    p.add_argument(
        "--until",
        type=_ago_arg,
        metavar="DURATION|TIME",
        help="created more than this long ago (30m) or before TIME",
    )
    p.add_argument("--page", type=positive_int, default=1)
    p.add_argument("--limit", type=positive_int, default=50)
    p.set_defaults(run=cmd_list)

    p = sub.add_parser(
        "expire",
        parents=both,
        help="change how long a workflow is kept once finished (7d), or never clean it (never)",
        description="Set a workflow's own retention. A finished workflow is kept that long "
        "from now; one not finished yet keeps it for when it ends. 'never' keeps it until "
        "it is cleaned up by hand (the deployment's retention steps over it).",
    )
    p.add_argument("wid", type=workflow_id, metavar="WID|key:KEY")
    p.add_argument("ttl", type=_retention, metavar="DURATION|never")
    p.set_defaults(run=cmd_expire)

    p = sub.add_parser(
        "signal",
        parents=both,
        help="send a signal to a workflow: ends the wait task waiting for it",
        description="Send signal NAME to a workflow. The first wait task waiting for it "
        "(wait: {signal: NAME}) ends, with --data as its output (--reject fails it "
        "instead). A signal sent before its wait task is reached is kept for it. The same "
        "--id twice is applied once.",
    )
    p.add_argument("wid", type=workflow_id, metavar="WID|key:KEY")
    p.add_argument("name", help="the signal's name (the wait's signal:)")
    p.add_argument("--data", metavar="JSON|@FILE", help="its payload: the wait task's output")
    p.add_argument("--id", metavar="ID", help="a signal id: sent again, it is applied once")
    p.add_argument("--reject", action="store_true", help="fail the wait task (a rejection)")
    p.add_argument("--comment", help="recorded with the signal (who, when, this)")
    p.add_argument("--by", help="who sends it (default: user@host)")
    p.set_defaults(run=cmd_signal, writes=True)

    p = sub.add_parser(
        "agents",
        parents=both,
        help="agents and their liveness; agents drain AGENT: ask one to finish and stop",
    )
    p.add_argument("action", nargs="?", choices=["drain"], help="drain: ask AGENT to drain")
    p.add_argument("agent", nargs="?", metavar="AGENT")
    p.add_argument("--all", action="store_true", help="agents gone a while too")
    p.set_defaults(run=cmd_agents)
    p = sub.add_parser("stats", parents=both, help="totals by state; --by: run-time history")
    p.add_argument("--by", choices=["type", "template"], help="runs and run times, last hour/day")
    p.set_defaults(run=cmd_stats)

    p = sub.add_parser("events", parents=both, help="recent lifecycle events")
    p.add_argument("--count", type=positive_int, default=50)
    p.set_defaults(run=cmd_events)

    for name, text in (
        ("pause", "hold a running workflow"),
        ("release", "resume a paused workflow"),
        ("cancel", "cancel a running or paused workflow"),
        ("retry", "run a failed workflow's failed tasks again"),
    ):
        p = sub.add_parser(name, parents=both, help=text)
        p.add_argument(
            "ids", nargs="*", type=workflow_id, metavar="WID|key:KEY", help="one or several"
        )
        bulk_cmds.add_filter_options(p, _ago_arg, name_arg)
        if name == "retry":
            p.add_argument(
                "--task", action="append", type=name_arg, help="retry only this failed task"
            )
        p.set_defaults(run=_control(name))

    p = sub.add_parser(
        "plan",
        parents=[js],
        help="what would run if some tasks failed: before anything runs",
        description="Print, for a workflow file, which tasks would run, be skipped or "
        "upstream_failed, and the workflow's result, if the tasks named in --assume ended "
        "so and every other task that runs succeeded. Nothing is pushed.",
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument(
        "--assume",
        action="append",
        metavar="TASK=OUTCOME,...",
        help=f"how tasks end: {', '.join(OUTCOMES)} (repeatable; default: succeeded)",
    )
    p.add_argument(
        "--output",
        action="append",
        metavar="TASK=JSON",
        help="a task's assumed output, for the conditions (when:) that read it (repeatable)",
    )
    p.add_argument(
        "--input",
        metavar="JSON|@FILE",
        help="the run's assumed input, for the conditions (when:) that read it",
    )
    p.add_argument("--max-tasks", type=max_tasks, default=DEFAULT_MAX_TASKS, metavar="N")
    p.set_defaults(run=cmd_plan, no_engine=True)

    p = sub.add_parser(
        "viz",
        parents=both,
        help="a workflow's DAG as Mermaid or Graphviz DOT",
        description="Print the DAG of a workflow file, or of a stored workflow (WID) with "
        "its tasks' states as colours. Failure branches are dashed red, tasks that run "
        "whatever happened dotted grey.",
    )
    p.add_argument("target", metavar="FILE|WID")
    p.add_argument("--format", choices=viz.FORMATS, default="mermaid")
    p.add_argument("--workflow", metavar="NAME", help="which workflow of a file of several")
    p.add_argument(
        "--assume",
        action="append",
        metavar="TASK=OUTCOME,...",
        help="a file: colour it by the plan for these outcomes (see plan)",
    )
    p.add_argument("--max-tasks", type=max_tasks, default=DEFAULT_MAX_TASKS, metavar="N")
    p.set_defaults(run=cmd_viz, no_engine=True)

    p = sub.add_parser("cleanup", parents=both, help="delete finished workflows")
    p.add_argument("ids", nargs="*", type=workflow_id, metavar="WID|key:KEY", help="one or several")
    p.add_argument("--finished", action="store_true", help="every finished workflow")
    p.add_argument("--older-than", type=parse_duration, help="with --finished: e.g. 7d")
    bulk_cmds.add_filter_options(p, _ago_arg, name_arg)
    p.set_defaults(run=cmd_cleanup)

    p = sub.add_parser(
        "acl",
        help="print the ACL SETUSER line giving a role exactly what it needs",
        description="Print the Redis ACL SETUSER line for a least-privilege user of a role: "
        "its namespace's keys and channels and only the commands the role runs (scripts "
        "included, each by its SHA: run it again after an upgrade). It keeps the user's "
        "password: set one with ACL SETUSER NAME >secret.",
    )
    p.add_argument(
        "--role",
        dest="roles",
        action="append",
        required=True,
        choices=["agent", "operator", "reader"],
        help="agent: runs tasks; operator: pushes and steers; reader: reads (repeatable)",
    )
    p.add_argument(
        "--namespace",
        default=os.environ.get("REDISFLOW_NAMESPACE", "rf"),
        help="key prefix of the deployment (default: rf)",
    )
    p.add_argument(
        "--user",
        default=None,
        help="user name (default: NAMESPACE-ROLE, a line per role); with several --role, "
        "one user with all of them",
    )
    p.add_argument(
        "--cluster",
        action="store_true",
        default=env_flag("REDISFLOW_CLUSTER"),
        help="for a Redis Cluster: adds sharded pub/sub and the cluster client's commands "
        "(run the line on every node; default: $REDISFLOW_CLUSTER)",
    )
    p.add_argument(
        "--db",
        type=int,
        default=0,
        help="the one database the user may SELECT (its URL's /N; default: 0)",
    )
    p.set_defaults(run=cmd_acl, no_engine=True)

    template_cmds.register(sub, both)
    log_cmds.register(sub, both)
    schedule_cmds.register(sub, both)
    cluster_cmds.register(sub, both)
    rate_limit_cmds.register(sub, both)

    p = sub.add_parser("server", help="run a private redis-server (or cluster) and print its URL")
    p.add_argument("--port", type=int, default=None)
    p.add_argument(
        "--cluster",
        type=int,
        default=None,
        metavar="MASTERS",
        help="run a local Redis Cluster of this many masters instead (redis+cluster:// URL)",
    )
    p.add_argument(
        "--replicas", type=int, default=0, metavar="N", help="with --cluster: replicas per master"
    )
    p.set_defaults(run=cmd_server, no_engine=True)
    add_http_commands(sub, both)
    add_global_options(parser, conn, js)
    mark_leaves(parser)
    return parser


@guarded
def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    apply_global_options(args)
    if getattr(args, "no_engine", False):
        return int(args.run(None, args))
    if args.command == "push":
        # Parse, validate and compile every file once, before connecting, so bad input
        # touches nothing.
        from ..ratelimit import task_types
        from ..store.codec import compile_workflow

        workflows = [wf for path in args.files for wf in load_file(path, args.max_tasks)]
        args.compiled = [compile_workflow(wf, args.max_payload, args.max_tasks) for wf in workflows]
        args.input = read_input(args.input, args.max_payload)
    engine = connect(args)
    try:
        if args.command == "push" and (
            limits := engine.store.rate_limits.of_types(
                t for wf in workflows for t in task_types(wf)
            )
        ):
            # the deployment's rate limits by type (engine.put_rate_limit) apply too
            args.compiled = [
                compile_workflow(wf, args.max_payload, args.max_tasks, type_limits=limits)
                for wf in workflows
            ]
        if isinstance(getattr(args, "wid", None), str):
            args.wid = resolve_key(engine, args.wid)
        return int(args.run(engine, args))
    finally:
        engine.close()


def main() -> None:
    """Entry point of ``redisflow``."""
    try:
        code = run()
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
    except SystemExit as e:  # argparse: usage errors are bad input
        code = EXIT_BAD_INPUT if e.code not in (0, None) else 0
    except BrokenPipeError:
        code = closed_pipe()
    sys.exit(code)
