"""``redisflow template put|list|show|rm`` and ``redisflow run NAME``: stored, versioned
workflows and runs of them."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from engine.core.words import plural

from ..errors import DefinitionError, PartialWriteError
from .common import (
    EXIT_OK,
    Parents,
    add_wait_options,
    ago,
    esc,
    name_arg,
    new_table,
    out,
    parse_duration,
    parse_time,
    positive_int,
    print_json,
    pushed_part,
    read_input,
    report_pushed,
)

if TYPE_CHECKING:
    from ..client import Engine


def cmd_template_put(engine: Engine, args: argparse.Namespace) -> int:
    from engine.spec.loader import read_file

    info = engine.put_template(read_file(args.file), name=args.name, source=args.file)
    new = info.new
    if args.json:
        answer: dict[str, Any] = {"name": info.name, "version": info.version, "new": new}
        if info.warnings:
            answer["warnings"] = info.warnings
        print_json(answer)
    else:
        what = "stored" if new else "unchanged, the latest is"
        print(f"template {info.name}: {what} version {info.version}")
        for warning in info.warnings:
            print(f"redisflow: warning: {warning}", file=sys.stderr)
    return EXIT_OK


def cmd_template_list(engine: Engine, args: argparse.Namespace) -> int:
    rows = engine.templates()
    if args.json:
        print_json({"templates": [t.to_dict() for t in rows]})
        return EXIT_OK
    now = engine.server_time()
    table = new_table("name", "version", "runs", "updated", "source")
    for t in rows:
        table.add_row(esc(t.name), str(t.version), f"{t.runs:,}", ago(t.put_at, now),
                      esc(t.source))  # fmt: skip
    out.print_table(table)
    out.print(f"[dim]{plural(len(rows), 'template')}[/]")
    return EXIT_OK


def cmd_template_show(engine: Engine, args: argparse.Namespace) -> int:
    info = engine.template(args.name, args.version)
    if args.json:
        print_json(info.to_dict())
        return EXIT_OK
    print(
        f"# template {info.name} version {info.version} of {info.latest} "
        f"({info.runs:,} runs), from {info.source}"
    )
    sys.stdout.write(info.text or "")
    if info.text and not info.text.endswith("\n"):
        sys.stdout.write("\n")
    return EXIT_OK


def cmd_template_rm(engine: Engine, args: argparse.Namespace) -> int:
    engine.remove_template(args.name)
    if args.json:
        print_json({"removed": args.name})
    else:
        print(f"template {args.name}: removed (its runs stay)")
    return EXIT_OK


def cmd_run(engine: Engine, args: argparse.Namespace) -> int:
    value: Any = read_input(args.input, engine.max_payload)
    if args.copies > 1:
        return run_copies(engine, args, value)
    result = engine.run(
        args.name,
        value,
        key=args.key,
        version=args.version,
        start_in=args.start_in,
        start_at=args.start_at,
    )
    if result.existing and not args.json:
        print(
            f"redisflow: key {args.key!r} names run {result.id} already: nothing pushed",
            file=sys.stderr,
        )
    return report_pushed(engine, [result.id], args)


def run_copies(engine: Engine, args: argparse.Namespace, value: Any) -> int:
    """``run --copies N``: N runs of the template's one version, pushed together (one
    definition stored), each with the input."""
    from engine.spec.flow import RunRequest

    if args.key is not None:
        raise DefinitionError(f"--key names one run: run without --copies, not {args.copies}")
    compiled, version = engine.compile_template(args.name, args.version)
    runs = [
        RunRequest(compiled, value, template=args.name, version=version)
        for _ in range(args.copies)
    ]
    try:
        pushed = engine.push_runs(runs, start_in=args.start_in, start_at=args.start_at)
    except PartialWriteError as e:
        return pushed_part(e, args)
    return report_pushed(engine, [p.id for p in pushed], args)


def register(sub: Any, parents: Parents) -> None:
    """Add ``template`` and ``run`` to the ``redisflow`` parser."""
    p = sub.add_parser("template", help="stored, versioned workflows: put, list, show, rm")
    ts = p.add_subparsers(dest="template_command", required=True, metavar="ACTION")
    q = ts.add_parser("put", parents=parents, help="store a workflow file as a template")
    q.add_argument("file", metavar="FILE")
    q.add_argument("--name", type=name_arg, help="the template's name (default: the workflow's)")
    q.set_defaults(run=cmd_template_put, writes=True)
    q = ts.add_parser("list", parents=parents, help="templates, their versions and run counts")
    q.set_defaults(run=cmd_template_list)
    q = ts.add_parser("show", parents=parents, help="a template's text")
    q.add_argument("name", type=name_arg)
    q.add_argument("--version", type=positive_int, help="this version (default: the latest)")
    q.set_defaults(run=cmd_template_show)
    q = ts.add_parser("rm", parents=parents, help="delete a template (its runs stay)")
    q.add_argument("name", type=name_arg)
    q.set_defaults(run=cmd_template_rm)

    p = sub.add_parser("run", parents=parents, help="push a run of a template")
    p.add_argument("name", type=name_arg, metavar="TEMPLATE")
    p.add_argument("--input", metavar="JSON|@FILE", help="the run's input (any JSON value)")
    p.add_argument("--key", metavar="KEY", help="idempotency key (see push --key)")
    p.add_argument("--version", type=positive_int, help="run this version (default: latest)")
    p.add_argument("--copies", type=positive_int, default=1, metavar="N",
                   help="push N runs, each with the input")  # fmt: skip
    later = p.add_mutually_exclusive_group()
    later.add_argument("--at", dest="start_at", type=parse_time, metavar="TIME",
                       help="start at TIME (see push --at)")  # fmt: skip
    later.add_argument("--in", dest="start_in", type=parse_duration, metavar="DURATION",
                       help="start this long from now")  # fmt: skip
    add_wait_options(p)
    p.set_defaults(run=cmd_run, writes=True)
