"""``redisflow``: the operator CLI. This module assembles the parser from the command
modules (each adds its commands with ``register``) and dispatches to the command chosen."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from engine.core.text_safety import protect_streams

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

# Each command and the module that adds it (``register``), in the order of
# `redisflow --help`; tests/test_cli_imports.py checks that each module adds exactly these.
COMMANDS: dict[str, str] = {
    "push": "push_cmds",
    "status": "status_cmds",
    "list": "status_cmds",
    "expire": "expire_cmds",
    "signal": "signal_cmds",
    "agents": "agents_cmds",
    "stats": "stats_cmds",
    "events": "stats_cmds",
    "pause": "steer_cmds",
    "release": "steer_cmds",
    "cancel": "steer_cmds",
    "retry": "steer_cmds",
    "plan": "plan_cmds",
    "viz": "plan_cmds",
    "cleanup": "cleanup_cmds",
    "acl": "acl_cmds",
    "template": "template_cmds",
    "run": "template_cmds",
    "logs": "log_cmds",
    "schedule": "schedule_cmds",
    "scheduler": "schedule_cmds",
    "cluster": "cluster_cmds",
    "rate-limit": "rate_limit_cmds",
    "server": "server_cmds",
    "serve": "http_cmds",
    "trigger": "http_cmds",
}


def command_modules(argv: Sequence[str] | None, parents: Parents) -> list[ModuleType]:
    """The command modules a parser for ``argv`` needs: the one adding the command
    ``argv`` names (its first word that is neither an option nor the value of a global
    option, as ``--namespace NAME``), or every one (``--help``, no command)."""
    valued = {
        flag
        for p in parents
        for action in p._actions
        if action.nargs != 0
        for flag in action.option_strings
    }
    named, words = None, iter(argv or ())
    for word in words:
        if word in valued:
            next(words, None)  # its value
        elif not word.startswith("-"):
            named = COMMANDS.get(word)
            break
    names = [named] if named is not None else list(dict.fromkeys(COMMANDS.values()))
    return [importlib.import_module(f"{__package__}.{name}") for name in names]


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of ``redisflow``; given ``argv``, with only the commands it can take
    (a command's module and what it imports are loaded when it is used)."""
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
    for module in command_modules(argv, parents):
        module.register(sub, parents)
    add_global_options(parser, *parents)
    mark_leaves(parser)
    return parser


@guarded
def run(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    args = build_parser(argv).parse_args(argv)
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
