"""``redisflow-agent``: a headless agent process."""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from collections.abc import Sequence

import redis

from engine.connect.health import server_warnings
from engine.core.outcomes import exit_codes
from engine.core.text_safety import VisibleFormatter, protect_streams
from engine.core.words import plural
from engine.ops.acl import missing_permissions
from engine.runtime.agent import CONDITION_BUDGET_S, Agent
from engine.runtime.child_runs import MAX_DESCENDANTS
from engine.runtime.handlers import (
    EXEC_ENV_VAR,
    exec_env_names,
    exec_environment,
    exec_handler,
    import_handler,
)
from engine.runtime.json_logs import JsonFormatter
from engine.runtime.retrying import patiently
from engine.runtime.side_work import SideWork
from engine.spec.definition import check_name

from ..client import Engine
from ..errors import DefinitionError, UnreachableError
from .common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    Parser,
    connect,
    connection_options,
    fail,
    guarded,
    positive_float,
    positive_int,
    refuse,
    whole_in,
)


def task_type(text: str) -> str:
    """A task type to serve ("" is the default type)."""
    try:
        return check_name(text, "--type", None, empty=True)
    except DefinitionError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="redisflow-agent",
        parents=[connection_options()],
        description="Run tasks of the given types until SIGTERM (in-flight tasks finish first).",
    )
    p.add_argument(
        "--id",
        default=f"{socket.gethostname()}-{os.getpid()}",
        help="agent id, unique per logical worker; a restart with the same id takes back "
        "its own tasks (default: host-pid)",
    )
    p.add_argument(
        "--type",
        action="append",
        dest="types",
        type=task_type,
        metavar="T",
        help='a task type to serve (repeat for several; default: the "" type)',
    )
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--handler", metavar="MODULE:FUNCTION", help="a Python callable per task")
    how.add_argument(
        "--exec",
        dest="command",
        metavar="COMMAND",
        help="a command run per task (no shell): task JSON on stdin, output on stdout",
    )
    p.add_argument(
        "--concurrency",
        type=positive_int,
        default=None,
        help="tasks run at once (default 1, inline; 32 when the handler is async def)",
    )
    p.add_argument("--batch", type=positive_int, default=None, help="tasks claimed per round trip")
    p.add_argument("--lease", type=positive_float, default=15.0, help="lease seconds (default 15)")
    p.add_argument(
        "--condition-budget",
        type=positive_float,
        default=CONDITION_BUDGET_S,
        metavar="SECONDS",
        help="how long a task's when: condition may take to evaluate; past it the task "
        f"fails, not retried (default {CONDITION_BUDGET_S:g})",
    )
    p.add_argument(
        "--connect-timeout",
        type=positive_float,
        default=10.0,
        metavar="SECONDS",
        help="keep trying to reach Redis at start for this long, then exit 3 (default 10)",
    )
    p.add_argument(
        "--exec-timeout",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help="with --exec: the timeout of tasks that set none (a task's own timeout wins)",
    )
    p.add_argument(
        "--exec-env",
        action="append",
        default=[],
        metavar="NAME",
        help="with --exec: an environment variable the command gets besides the default "
        "ones (PATH, HOME, LANG, LC_*, TZ, TMPDIR, PYTHON*...), or a prefix ending in *; "
        "repeat for several, or list them in $REDISFLOW_EXEC_ENV. REDISFLOW_* variables "
        "(the URL, tokens) pass only when named in full",
    )
    p.add_argument(
        "--exit-code",
        action="append",
        default=[],
        metavar="CODE=KIND",
        help="with --exec: an exit code that means KIND: non_retryable (no further "
        "attempt), abort (the run fails now), skip, or retry (a plain failure); "
        "defaults 100=non_retryable 101=abort 102=skip",
    )
    p.add_argument(
        "--scheduler",
        action="store_true",
        help="also fire schedules' ticks (any number of agents may; each tick runs once)",
    )
    p.add_argument(
        "--log-budget-mb",
        type=whole_in(0, 1_048_576, "a size in MiB"),
        default=os.environ.get("REDISFLOW_LOG_BUDGET_MB", "256"),  # argparse converts it
        metavar="MB",
        help="task logs the deployment keeps in Redis, in MiB (0: no limit; give every "
        "agent the same; default: $REDISFLOW_LOG_BUDGET_MB or 256)",
    )
    p.add_argument(
        "--max-descendants",
        type=whole_in(1, 1_000_000_000, "a number of child runs"),
        default=MAX_DESCENDANTS,
        metavar="N",
        help="the most child runs (every level) one run may have under it: its wait keeper "
        f"fails a run: task that would start more (give every agent the same; default "
        f"{MAX_DESCENDANTS:,})",
    )
    p.add_argument("--until-idle", action="store_true", help="exit once nothing it serves can come")
    p.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=os.environ.get("REDISFLOW_LOG_FORMAT", "text"),
        help="the agent's own log lines on stderr: text, or json (one object per line: "
        "time, level, logger, message, and workflow_id, task, key, type, attempt for a "
        "record about a task attempt; default: $REDISFLOW_LOG_FORMAT or text)",
    )
    p.add_argument("--verbose", "-v", action="store_true")
    return p


def _start_patiently(args: argparse.Namespace) -> tuple[Engine, list[str], list[str]]:
    """Connect, check the permissions of the agent's roles (with --scheduler it pushes
    runs too: both roles) and read the server's warnings, trying again for
    ``--connect-timeout`` seconds: an agent started while Redis restarts, or whose
    connection drops meanwhile, waits for it instead of exiting. Returns the engine, the
    permissions missing and the warnings."""
    roles = ["agent", "operator"] if args.scheduler else ["agent"]
    unreachable = (UnreachableError, redis.ConnectionError, redis.TimeoutError)

    def start() -> tuple[Engine, list[str], list[str]]:
        engine = connect(args, max_descendants=args.max_descendants)
        try:
            missing = missing_permissions(engine, roles)
            warnings = [] if missing else server_warnings(engine.redis)
        except unreachable:
            engine.close()
            raise
        return engine, missing, warnings

    return patiently(start, args.connect_timeout, errors=unreachable, first_s=0.2)


def _say(
    shown: logging.Handler, args: argparse.Namespace, level: int, text: str, plain: str = ""
) -> None:
    """A line the agent always shows on stderr (a server warning, its last words): as
    text, ``plain`` (or ``redisflow-agent: LEVEL: text``); with ``--log-format json``, a
    record of logger ``redisflow.agent`` handed to the shown handler whatever the level."""
    if args.log_format != "json":
        name = logging.getLevelName(level)
        print(plain or f"redisflow-agent: {name}: {text}", file=sys.stderr)
        return
    record = logging.LogRecord("redisflow.agent", level, __file__, 0, "%s", (text,), None)
    shown.handle(record)


@guarded
def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    shown = logging.StreamHandler()  # sys.stderr
    if args.log_format == "json":
        shown.setFormatter(JsonFormatter())
    else:
        shown.setFormatter(VisibleFormatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, handlers=[shown])
    if args.handler:
        if args.exec_env:
            return fail("--exec-env goes with --exec", EXIT_BAD_INPUT)
        if args.exit_code:
            return fail("--exit-code goes with --exec", EXIT_BAD_INPUT)
        handler = import_handler(args.handler)
    else:
        listed = [os.environ.get(EXEC_ENV_VAR, ""), *args.exec_env]
        env = exec_environment(exec_env_names(" ".join(listed)))
        codes = exit_codes(args.exit_code)
        handler = exec_handler(
            args.command,
            timeout=args.exec_timeout,
            env=env,
            exit_codes=codes,
            max_output=args.max_payload,
        )
    types = args.types or [""]
    if not args.id.strip():
        return fail("--id must not be empty: give each logical worker its own id", EXIT_BAD_INPUT)
    try:
        check_name(args.id, "--id", None)
    except DefinitionError as e:
        return fail(str(e), EXIT_BAD_INPUT)
    engine, missing, warnings = _start_patiently(args)
    try:
        if missing:
            # Before registering: an agent that cannot work must not half-start.
            return refuse(missing[0])
        for warning in warnings:
            _say(shown, args, logging.WARNING, warning)
        side: list[SideWork] = []
        if args.scheduler:  # imported only then: an agent without one never loads it
            from ..schedules.scheduler import SchedulerThread

            side.append(SchedulerThread(engine, args.id))
        try:
            agent = Agent(
                engine,
                args.id,
                {t: handler for t in types},
                concurrency=args.concurrency,
                batch=args.batch,
                lease_s=args.lease,
                condition_budget_s=args.condition_budget,
                side=side,
                log_budget=args.log_budget_mb * 1024 * 1024,
            )
        except ValueError as e:
            return fail(str(e), EXIT_BAD_INPUT)
        agent.run(until_idle=args.until_idle)
        done = f"{plural(agent.processed, 'task')} done, {agent.rejected:,} rejected"
        _say(shown, args, logging.INFO, done, f"redisflow-agent {args.id}: {done}")
    finally:
        engine.close()
    return EXIT_OK


def main() -> None:
    """Entry point of ``redisflow-agent``."""
    protect_streams()  # what it prints shows control characters, never obeys them
    try:
        code = run()
    except SystemExit as e:
        code = EXIT_BAD_INPUT if e.code not in (0, None) else 0
    sys.exit(code)
