"""``redisflow``: the operator CLI. This module assembles the parser from the command
modules (each adds its commands with ``register``) and dispatches to the command chosen."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from engine.core.text_safety import protect_streams

from . import (
    acl_cmds,
    agents_cmds,
    cleanup_cmds,
    cluster_cmds,
    expire_cmds,
    http_cmds,
    log_cmds,
    plan_cmds,
    push_cmds,
    rate_limit_cmds,
    schedule_cmds,
    server_cmds,
    signal_cmds,
    stats_cmds,
    status_cmds,
    steer_cmds,
    template_cmds,
)
from .common import (
    EXIT_BAD_INPUT,
    Parents,
    Parser,
    add_global_options,
    apply_global_options,
    closed_pipe,
    connect,
    connection_options,
    guarded,
    json_option,
    mark_leaves,
    resolve_key,
)

# In this order in `redisflow --help`.
COMMANDS = (
    push_cmds,  # push
    status_cmds,  # status, list
    expire_cmds,  # expire
    signal_cmds,  # signal
    agents_cmds,  # agents
    stats_cmds,  # stats, events
    steer_cmds,  # pause, release, cancel, retry
    plan_cmds,  # plan, viz
    cleanup_cmds,  # cleanup
    acl_cmds,  # acl
    template_cmds,  # template, run
    log_cmds,  # logs
    schedule_cmds,  # schedule, scheduler
    cluster_cmds,  # cluster
    rate_limit_cmds,  # rate-limit
    server_cmds,  # server
    http_cmds,  # serve, trigger
)


def build_parser() -> argparse.ArgumentParser:
    parents = Parents(connection_options(), json_option())
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
    for module in COMMANDS:
        module.register(sub, parents)
    add_global_options(parser, *parents)
    mark_leaves(parser)
    return parser


@guarded
def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    apply_global_options(args)
    if getattr(args, "no_engine", False):
        return int(args.run(None, args))
    if (prepare := getattr(args, "prepare", None)) is not None:
        prepare(args)  # before connecting (push compiles its files): bad input writes nothing
    engine = connect(args)
    try:
        if isinstance(getattr(args, "wid", None), str):
            args.wid = resolve_key(engine, args.wid)
        return int(args.run(engine, args))
    finally:
        engine.close()


def main() -> None:
    """Entry point of ``redisflow``."""
    protect_streams()  # what it prints shows control characters, never obeys them
    try:
        code = run()
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
    except SystemExit as e:  # argparse: usage errors are bad input
        code = EXIT_BAD_INPUT if e.code not in (0, None) else 0
    except BrokenPipeError:
        code = closed_pipe()
    sys.exit(code)
