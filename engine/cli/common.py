"""What every command-line tool shares: connection options, exit codes, error reporting,
argument types, the console and its tables, and reading and waiting for pushed runs."""

from __future__ import annotations

import argparse
import copy
import functools
import json
import math
import os
import sys
import time
from collections.abc import Callable
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any, NamedTuple, NoReturn

from engine.core import timing
from engine.core.appearance import LOOKS
from engine.core.text_safety import raw_stream, visible
from engine.spec.limits import DEFAULT_MAX_PAYLOAD, DEFAULT_MAX_TASKS

from ..errors import (
    DefinitionError,
    PartialWriteError,
    RedisflowError,
    UnreachableError,
)

# Only what building the parser needs is imported above: `redisflow --help` and argument
# errors answer at once. redis-py, the Engine and the rest load in the command that uses
# them (tests/test_cli_imports.py keeps it so).
if TYPE_CHECKING:
    import redis
    from rich.console import OverflowMethod

    from ..client import Engine

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_UNREACHABLE = 0, 1, 2, 3
EXIT_PARTIAL = 4  # partly written: the ids of what was written are printed
EXIT_TIMED_OUT = 5  # a --wait gave up (--timeout) before every workflow finished
EXIT_CLOSED_PIPE = 141  # stdout closed by its reader (`| head`): as a shell reports SIGPIPE


# The Redis user of this process's connection, for permission errors (one per process).
_user: str | None = None


def connection_options() -> argparse.ArgumentParser:
    """A parent parser with ``--url``, ``--namespace``, ``--max-payload`` and the TLS files."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument(
        "--url",
        default=os.environ.get("REDISFLOW_URL"),
        help="Redis URL, redis:// or rediss:// (TLS), with user and password if any "
        "(default: $REDISFLOW_URL; without either, a private redis-server is started for "
        "this command and stopped on exit)",
    )
    for name, what in (
        ("ca", "CA certificate(s) to verify the server with"),
        ("cert", "client certificate, for servers that require one"),
        ("key", "the client certificate's private key"),
    ):
        p.add_argument(
            f"--tls-{name}",
            default=os.environ.get(f"REDISFLOW_TLS_{name.upper()}") or None,
            metavar="FILE",
            help=f"with a rediss:// URL: {what} (default: $REDISFLOW_TLS_{name.upper()})",
        )
    p.add_argument(
        "--cluster",
        action="store_true",
        default=env_flag("REDISFLOW_CLUSTER"),
        help="the --url names a node of a Redis Cluster (as redis+cluster://host:port does; "
        "default: $REDISFLOW_CLUSTER)",
    )
    p.add_argument(
        "--shards",
        type=shard_count,
        default=os.environ.get("REDISFLOW_SHARDS") or None,  # argparse applies the type
        metavar="N",
        help="the deployment's shard count, stored in Redis the first time and checked "
        "after (default: the stored count; else 1, or one per master on a cluster)",
    )
    p.add_argument(
        "--wait-replicas",
        type=whole_in(0, 100, "a replica count"),
        default=os.environ.get("REDISFLOW_WAIT_REPLICAS") or 0,  # argparse applies the type
        metavar="N",
        help="after every state change, WAIT for N replicas to have it; fewer in time is an "
        "error, exit 3 (the write stands on the master; default: $REDISFLOW_WAIT_REPLICAS, "
        "else 0: replication stays asynchronous)",
    )
    p.add_argument(
        "--wait-timeout",
        type=wait_ms,
        default=os.environ.get("REDISFLOW_WAIT_TIMEOUT") or 1000,
        metavar="MS",
        help="with --wait-replicas: how long each write waits for its replicas "
        "(default: $REDISFLOW_WAIT_TIMEOUT, else 1000 ms)",
    )
    p.add_argument(
        "--namespace",
        default=os.environ.get("REDISFLOW_NAMESPACE", "rf"),
        help="key prefix of the deployment (default: rf)",
    )
    p.add_argument(
        "--max-payload",
        type=whole_in(1, MAX_PAYLOAD_LIMIT, "a size in bytes"),
        default=os.environ.get("REDISFLOW_MAX_PAYLOAD", str(DEFAULT_MAX_PAYLOAD)),
        metavar="BYTES",
        help="largest payload or output accepted (default: 1 MB)",
    )
    return p


GLOBAL = "global_"  # the dest prefix of an option given before the command
_twins: dict[str, argparse.Action] = {}


def add_global_options(parser: argparse.ArgumentParser, *parents: argparse.ArgumentParser) -> None:
    """Let ``parser`` (the top level) take the options of ``parents`` before the command
    too: ``redisflow --url URL list`` as ``redisflow list --url URL`` (see
    :func:`apply_global_options`)."""
    for parent in parents:
        for action in parent._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            twin = copy.copy(action)
            twin.dest = GLOBAL + action.dest
            if action.nargs != 0 and twin.metavar is None:
                twin.metavar = action.dest.upper()  # not GLOBAL_URL
            twin.default = argparse.SUPPRESS
            parser._add_action(twin)
            _twins[action.dest] = twin


def mark_leaves(parser: argparse.ArgumentParser) -> None:
    """Record, on every command's parser, the parser itself (``args.leaf``), so that
    :func:`apply_global_options` knows which options the command takes."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                mark_leaves(sub)
            return
    parser.set_defaults(leaf=parser)


def apply_global_options(args: argparse.Namespace) -> None:
    """Options given before the command take effect unless given after it too; one the
    command does not take is bad input (:class:`DefinitionError`)."""
    leaf: argparse.ArgumentParser = args.leaf
    for key in [k for k in vars(args) if k.startswith(GLOBAL)]:
        value = vars(args).pop(key)
        dest = key[len(GLOBAL) :]
        own = next((a for a in leaf._actions if a.dest == dest and a.option_strings), None)
        flag = "--" + dest.replace("_", "-")
        twin = _twins[dest]
        if own is None or type(own) is not type(twin) or flag not in own.option_strings:
            raise DefinitionError(f"{flag} does not apply to `{leaf.prog}`")
        if getattr(args, dest) == own.default:
            setattr(args, dest, value)


def env_flag(name: str) -> bool:
    """Whether environment variable ``name`` is set to something other than "" or "0"."""
    return os.environ.get(name, "") not in ("", "0")


def connection_url(args: argparse.Namespace) -> str | None:
    """The URL the options name, TLS files included; None for a private Redis.

    Raises :class:`DefinitionError` when TLS files are given without a rediss:// URL.
    """
    tls = (args.tls_ca, args.tls_cert, args.tls_key)
    if not args.url:
        if any(tls):
            raise DefinitionError("--tls-ca/--tls-cert/--tls-key need a rediss:// --url")
        if getattr(args, "cluster", False):
            raise DefinitionError("--cluster needs a --url naming a node of the cluster")
        return None
    from engine.connect.urls import as_cluster_url, parse_url, with_tls

    try:
        url = as_cluster_url(args.url) if getattr(args, "cluster", False) else args.url
        url = with_tls(url, *tls)
        parse_url(url)  # a malformed URL: one line naming what is wrong, exit 2
        return url
    except ValueError as e:
        raise DefinitionError(str(e)) from None


def connect(args: argparse.Namespace, **options: Any) -> Engine:
    """Connect as the options say; say so on stderr when falling back to a private Redis."""
    global _user
    options.setdefault("shards", getattr(args, "shards", None))
    for flag in ("wait_replicas", "wait_timeout"):
        if getattr(args, flag, 0) < 0:
            raise DefinitionError(f"--{flag.replace('_', '-')} must be 0 or more")
    options.setdefault("wait_replicas", getattr(args, "wait_replicas", 0))
    options.setdefault("wait_timeout_ms", getattr(args, "wait_timeout", 1000))
    url = connection_url(args)
    if url is None and getattr(args, "writes", False) and not getattr(args, "wait", False):
        raise DefinitionError(
            f"`{args.leaf.prog}` writes to Redis, and neither --url nor REDISFLOW_URL names "
            "one (it would go to a private Redis deleted on exit): give --url "
            "redis://HOST:6379/0 or export REDISFLOW_URL (`redisflow server` starts one)"
        )
    from engine.connect.urls import parse_url

    from ..client import Engine

    # the URL's user, named in permission errors (a refusal can come while connecting)
    _user = parse_url(url).username if url else None
    engine = Engine.connect(url, namespace=args.namespace, max_payload=args.max_payload, **options)
    if engine.embedded is not None:
        print(
            f"redisflow: no --url or REDISFLOW_URL: using a private Redis at {engine.url} "
            "for this command only",
            file=sys.stderr,
        )
    return engine


def closed_pipe() -> int:
    """Stdout's reader went away (``| head``): end quietly, as Unix tools do. Stdout is
    pointed at /dev/null so that flushing it at exit raises nothing more."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_CLOSED_PIPE


def fail(message: str, code: int) -> int:
    print(f"redisflow: {message}", file=sys.stderr)
    return code


def guarded(fn: Callable[..., int]) -> Callable[..., int]:
    """Turn engine and Redis errors into a one-line message and the documented exit code."""

    @functools.wraps(fn)
    def wrapper(*a: Any, **kw: Any) -> int:
        try:
            return fn(*a, **kw)
        except UnreachableError as e:
            return fail(str(e), EXIT_UNREACHABLE)
        except RedisflowError as e:
            return fail(str(e), e.exit_code)
        except KeyboardInterrupt:
            return 130
        except Exception as e:  # redis-py's errors: imported only once one was raised
            code = redis_failure(e)
            if code is None:
                raise
            return code

    return wrapper


def redis_failure(error: Exception) -> int | None:
    """Say what a Redis error means (unreachable, too slow, not Redis, refused) and
    return its exit code; None for any other error. redis-py is imported here, not with
    the CLI: a command that never reaches Redis does not load it."""
    import redis

    from engine.connect.urls import read_timeout

    if isinstance(error, redis.TimeoutError):
        return fail(
            f"Redis did not answer within {read_timeout():g} s (REDISFLOW_TIMEOUT): {error}",
            EXIT_UNREACHABLE,
        )
    if isinstance(error, redis.ConnectionError):
        return fail(f"Redis unreachable: {error}", EXIT_UNREACHABLE)
    if isinstance(error, redis.exceptions.InvalidResponse):  # another protocol on that port
        return fail(f"Redis unreachable: not the Redis protocol ({error})", EXIT_UNREACHABLE)
    if isinstance(error, redis.ResponseError):
        message = server_refusal(error)
        return None if message is None else fail(message, EXIT_UNREACHABLE)
    return None


def refuse(command: str) -> int:
    """Report that this process's Redis user may not run ``command``; exit code 3."""
    from engine.ops.acl import permission_message

    return fail(permission_message(command, _user), EXIT_UNREACHABLE)


def server_refusal(error: redis.ResponseError) -> str | None:
    """:func:`engine.ops.refusals.server_refusal` for this process's Redis user."""
    from engine.ops import refusals

    return refusals.server_refusal(error, _user)


def cause_of(error: BaseException) -> str:
    """:func:`engine.ops.refusals.cause_of` for this process's Redis user."""
    from engine.ops import refusals

    return refusals.cause_of(error, _user)


def partly_written(e: PartialWriteError, what: str = "workflows", shown: str = "ids") -> int:
    """Say on stderr that ``e``'s write stopped part-way (what was written is printed
    above, as ``shown``); exit code 4."""
    rest = "the rest were not"
    if e.unknown:
        rest = f"{len(e.failed)} were not and {len(e.unknown)} may have been (Redis did not answer)"
    short = ""
    if e.unconfirmed:
        short = f"; {len(e.unconfirmed)} of them not yet acknowledged by enough replicas"
    return fail(
        f"partly written: {e.written} of {e.total} {what} stored ({shown} above){short}; "
        f"{rest}: {cause_of(e.cause)}",
        EXIT_PARTIAL,
    )


def print_json(value: Any) -> None:
    print(json.dumps(value, default=str, separators=(",", ":")))


def pushed_part(e: PartialWriteError, args: argparse.Namespace) -> int:
    """A push of runs stopped part-way: the ids of those written (as ``--json`` asks),
    then on stderr why the rest not; exit code 4."""
    if args.json:
        print_json({"ids": e.stored_ids, "written": e.written, "total": e.total})
    else:
        for wid in e.stored_ids:
            print(wid, flush=True)
    return partly_written(e)


class Parents(NamedTuple):
    """The parent parsers of a command: its connection options and ``--json``. A command
    that connects takes both (``parents=parents``), one that does not ``[parents.js]``."""

    conn: argparse.ArgumentParser
    js: argparse.ArgumentParser


def json_option() -> argparse.ArgumentParser:
    """A parent parser with ``--json``."""
    js = argparse.ArgumentParser(add_help=False)
    js.add_argument("--json", action="store_true", help="machine-readable output")
    return js


# -- argument types ---------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """Reports a usage error as one line (bad input, exit code 2), not the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: {message} (see {self.prog} --help)\n")


def positive_int(text: str) -> int:
    """An integer of at least 1 (page numbers, page sizes, counts)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {quoted(text)}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


MAX_WAIT_MS = 86_400_000  # --wait-timeout: a write waits for its replicas at most a day


def whole(text: str) -> int | None:
    """``text`` as a whole number of at most 9 ASCII digits (``²``, ``٣`` and 5,000 digits
    are not), else None."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else None


def whole_in(low: int, high: int, what: str) -> Callable[[str], int]:
    """An argparse type: a whole number from ``low`` to ``high``, else refused naming
    ``what`` it should be ("a port", "a shard count"...) and the range."""

    def parse(text: str) -> int:
        value = whole(text.strip())
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"not {what} ({low:,} to {high:,}): {quoted(text)}")
        return value

    parse.__name__ = what.replace(" ", "_")
    return parse


port_number = whole_in(1, 65535, "a port")


def shard_count(text: str) -> int:
    """``--shards``: a whole number from 1 to the most shards a deployment may have."""
    from ..store.layout import MAX_SHARDS  # the store loads when the option is given

    return whole_in(1, MAX_SHARDS, "a shard count")(text)


MAX_PAYLOAD_LIMIT = 512 * 1024 * 1024  # Redis's largest string


def wait_ms(text: str) -> int:
    """``--wait-timeout``: whole milliseconds, 0 to :data:`MAX_WAIT_MS`."""
    value = whole(text.strip())
    if value is None or value > MAX_WAIT_MS:
        raise argparse.ArgumentTypeError(
            f"not a number of milliseconds from 0 to {MAX_WAIT_MS} (a day): {quoted(text)}"
        )
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
        from engine.spec.flow import check_key

        try:
            check_key(text[len(KEY_PREFIX) :])
        except DefinitionError as e:
            raise argparse.ArgumentTypeError(f"{quoted(text)}: {e}") from None
        return text
    if not (text.isascii() and text.isdigit()) or len(text) > 19:
        raise argparse.ArgumentTypeError(
            f"not a workflow id (a whole number, or key:<idempotency key>): {quoted(text)}"
        )
    return str(int(text))


def resolve_key(engine: Engine, wid: str) -> str:
    """A workflow id as given: ``key:<K>`` becomes the id of the workflow K names."""
    if wid.startswith(KEY_PREFIX):
        return engine.id_for_key(wid[len(KEY_PREFIX) :])
    return wid


def name_arg(text: str) -> str:
    """A workflow name or task type given on the command line."""
    from engine.spec.definition import check_name

    try:
        return check_name(text, "the name", None)
    except DefinitionError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def quoted(text: str) -> str:
    """An argument as typed, escaped for a one-line message."""
    return repr(text) if text.isprintable() else ascii(text)


# A type function given to argparse raises ArgumentTypeError with a message that says
# what is wrong: on a ValueError or TypeError argparse says "invalid <function name>
# value", and on anything else the command ends in a traceback.


MAX_SECONDS = timing.MAX_DELAY_S  # a number of seconds (a lease, a timeout): at most 366d


def positive_float(text: str) -> float:
    """A number of seconds above zero, at most :data:`MAX_SECONDS`."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {quoted(text)}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, not {quoted(text)}")
    if value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"{quoted(text)} is too long: at most {MAX_SECONDS:.0f} seconds ({span(MAX_SECONDS)})"
        )
    return value


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``1h30m``, ``7d`` or ``2w`` in seconds."""
    try:
        return timing.parse_duration(text)
    except timing.TooLong:
        raise argparse.ArgumentTypeError(
            f"{quoted(text)} is too long (not a finite number of seconds)"
        ) from None
    except DefinitionError:
        raise argparse.ArgumentTypeError(
            f"not a duration: {quoted(text)} (e.g. 90s, 15m, 1h30m, 7d)"
        ) from None


def age(text: str) -> float:
    """A duration back from now (``--older-than 7d``): at most back to 1970-01-01."""
    seconds = parse_duration(text)
    now = time.time()
    if seconds > now:
        raise argparse.ArgumentTypeError(_too_far_back(text, now))
    return seconds


def _too_far_back(text: str, now: float | None = None) -> str:
    most = "" if now is None else f"at most {int(now // 86400):,}d: "
    return f"{quoted(text)} is too far back ({most}{TOO_FAR_BACK})"


def _in_future(text: str) -> str:
    return f"{quoted(text)} is in the future (give a time before now)"


class Ago(float):
    """Seconds before now, remembering the text given (for messages)."""

    text: str


FUTURE_SLACK_S = 60.0  # --since/--until a time later than now: refused past this (clocks)
TOO_FAR_BACK = "no workflow is older than 1970-01-01"


def _ago_arg(text: str) -> Ago:
    """``--since`` / ``--until``: a duration before now (``2h``) or a time
    (``2026-12-01T06:00``, ``06:00``: the last one), as seconds before now; one before
    1970-01-01 (no workflow is older) or later than now is refused, in words."""
    now = time.time()
    try:
        seconds = timing.parse_duration(text)
    except timing.TooLong:
        seconds = math.inf
    except DefinitionError:
        try:
            when = timing.parse_time(text)
        except DefinitionError:
            raise argparse.ArgumentTypeError(_not_ago(text)) from None
        seconds = now - when.timestamp()
        if seconds < 0 and "-" not in text:  # a time of day: the last one, not the next
            seconds += 86400
        if seconds < -FUTURE_SLACK_S:
            raise argparse.ArgumentTypeError(_in_future(text)) from None
        if seconds > now:
            raise argparse.ArgumentTypeError(_too_far_back(text)) from None
    if not seconds <= now:  # a duration, infinite too
        raise argparse.ArgumentTypeError(_too_far_back(text, now))
    value = Ago(max(0.0, seconds))
    value.text = text
    return value


def _not_ago(text: str) -> str:
    """Why ``text`` is neither a duration nor a time, for :func:`_ago_arg`."""
    s = text.strip()
    if s.startswith("-"):
        return f"{quoted(text)} is negative: give how long ago (e.g. 2h) or a time"
    try:
        year = datetime.fromisoformat(s).year
    except ValueError:
        return f"not a duration or a time: {quoted(text)} (e.g. 2h, 30m, 2026-12-01T06:00)"
    # a date the local time zone cannot place: next to year 1 or year 9999
    return _too_far_back(text) if year < 1970 else _in_future(text)


def time_window(now: float, args: argparse.Namespace) -> tuple[float | None, float | None]:
    """``--since`` / ``--until`` as epoch seconds before ``now`` (Redis's clock; None: not
    given); a window that cannot hold a workflow is refused."""
    after = None if args.since is None else now - args.since
    before = None if args.until is None else now - args.until
    if after is not None and before is not None and before <= after:
        raise DefinitionError(
            f"--until {args.until.text} is not later than --since {args.since.text}: "
            "no workflow can be in that window"
        )
    return after, before


def parse_time(text: str) -> datetime:
    """An ISO 8601 time or a time of day (see :func:`engine.core.timing.parse_time`)."""
    try:
        return timing.parse_time(text)
    except DefinitionError as e:
        why = str(e).removeprefix(f"--at {text!r} ")
        raise argparse.ArgumentTypeError(f"{quoted(text)} {why}") from None


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


# -- output -----------------------------------------------------------------------------


STATE_STYLE = {s: look.style for s, look in LOOKS.items() if look.style}  # rich styles


class _LazyConsole:
    """rich's Console, imported on first use: commands that print JSON start faster."""

    _console: Any = None

    def console(self) -> Any:
        """The console, made on first use (as wide as a terminal, else unbounded)."""
        if self._console is None:
            from rich.console import Console
            from rich.text import Text

            class _Console(Console):
                def on_broken_pipe(self) -> None:
                    raise BrokenPipeError  # main() ends quietly (rich would exit 1)

                # Text shows its control characters (text_safety); the colours rich adds
                # go past the stream that would show theirs too.
                def render_str(self, text: str, **options: Any) -> Text:
                    return super().render_str(visible(text, multiline=True), **options)

                @property
                def file(self) -> IO[str]:
                    return raw_stream(super().file)  # type: ignore[no-any-return]

                @file.setter
                def file(self, new_file: IO[str]) -> None:
                    self._file = new_file

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


def new_table(*columns: str, overflow: OverflowMethod = "ellipsis") -> Any:
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for col in columns:
        table.add_column(col, overflow=overflow)
    return table


def wide_table(*columns: str) -> Any:
    """A table whose last column alone gives way on narrow terminals; output that is not
    a terminal is never cut (see :class:`_LazyConsole`)."""
    table = new_table(*columns)
    for col in table.columns:
        col.no_wrap = True
    table.columns[-1].ratio = 1
    table.expand = terminal()  # else as wide as its cells: nothing cut, no padding
    return table


def esc(value: object) -> str:
    """``value`` as text that rich prints as is (names may hold ``[...]``)."""
    from rich.markup import escape

    return escape(str(value))


def span(s: float) -> str:
    """A length of time, roughly: ``3d``, ``5h``, ``12m``, ``40s``."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s / size:.0f}{unit}"
    return f"{s:.0f}s"


def ago(ts: float | None, now: float) -> str:
    if ts is None:
        return "-"
    s = max(0.0, now - ts)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s / size:.0f}{unit} ago"
    return f"{s:.0f}s ago"


def type_label(task_type: str) -> str:
    return esc(task_type) if task_type else '""'


def styled(state: str) -> str:
    style = STATE_STYLE.get(state)
    return f"[{style}]{state}[/]" if style else esc(state)


# -- pushed runs ------------------------------------------------------------------------


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
    from ..store.codec import encode_input

    encode_input(value, max_bytes)  # every other check a stored input passes
    return value


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
        from engine.core.unserved import unserved, unserved_line

        line = unserved_line(unserved(self.engine.status(wid), self.engine.agents()))
        now = time.monotonic()
        if line and (line != self.last or now - self.said_at >= RESAY_S):
            print(f"redisflow: workflow {wid}: {line}", file=sys.stderr, flush=True)
            self.said_at = now
        self.last = line
