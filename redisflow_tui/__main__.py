"""``redisflow-tui``: the operator console.

Without ``--url`` or ``REDISFLOW_URL`` a private Redis is started for the session (and
with ``--demo`` filled with moving workflows). ``--serve`` serves the same console to a
browser on 127.0.0.1 with textual-serve.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from engine import (
    DEFAULT_MAX_PAYLOAD,
    DefinitionError,
    EmbeddedRedis,
    Engine,
    NoDatabaseError,
    UnreachableError,
    close_client,
    connection_options,
    connection_url,
    missing_database,
    open_client,
    redact,
)

from .data import WORKFLOW_ID

EXIT_BAD_INPUT = 2  # a bad option or value, as redisflow's
EXIT_UNREACHABLE = 3
EXIT_NO_CONSOLE = 2  # the console extra is not installed
CONSOLE_MODULES = ("textual", "networkx")  # what the 'console' extra brings
SERVE_MODULES = ("textual_serve",)


def workflow_id(text: str) -> str:
    """A workflow id as given to ``--open`` (a whole number)."""
    if not WORKFLOW_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(f"not a workflow id (a whole number): {text!r}")
    return text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="redisflow-tui",
        parents=[connection_options()],
        description="Watch and steer redisflow workflows live. Keys: ? for help, "
        "Ctrl+P for every action, Ctrl+Q to quit.",
    )
    p.add_argument(
        "--demo",
        action="store_true",
        help="start agents and a stream of demo workflows (some fail and retry)",
    )
    p.add_argument("--demo-rate", type=float, default=1.0, help="demo workflows per second")
    p.add_argument("--read-only", action="store_true", help="hide every action")
    p.add_argument(
        "--no-keyspace",
        action="store_true",
        help="do not enable keyspace notifications (CONFIG SET); use the event channel only",
    )
    p.add_argument("--theme", default=None, help="colour theme (e.g. nord, gruvbox)")
    p.add_argument(
        "--open",
        metavar="ID",
        type=workflow_id,
        default=None,
        help="open on workflow ID (with --serve: the address printed opens it; any address "
        "of the served console takes ?workflow=ID)",
    )
    p.add_argument(
        "--serve", action="store_true", help="serve the console in a browser (textual-serve)"
    )
    p.add_argument("--port", type=int, default=8000, help="port for --serve (default 8000)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address --serve listens on (default 127.0.0.1; 0.0.0.0: every interface)",
    )
    p.add_argument(
        "--token-file",
        default=None,
        help="the token a browser needs for --serve (its first line; or REDISFLOW_TUI_TOKEN; "
        "default: a new random one, printed in the address)",
    )
    return p


def make_engine(
    url: str,
    namespace: str,
    max_payload: int = DEFAULT_MAX_PAYLOAD,
    shards: int | None = None,
    **options: Any,
) -> Engine:
    """An engine for the console: calls time out and retry briefly, so a hung or gone
    server shows as lost within a second or two instead of freezing a read. ``options``:
    :class:`Engine`'s (``wait_replicas``, ``wait_timeout_ms``)."""
    try:
        client = open_client(
            url,
            decode_responses=True,
            socket_connect_timeout=3,
            health_check_interval=15,
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 2),
        )
    except (redis.ConnectionError, redis.exceptions.RedisClusterException) as e:
        raise UnreachableError(f"cannot reach Redis at {redact(url)}: {e}") from None
    try:
        return Engine(
            client, namespace=namespace, max_payload=max_payload, shards=shards, **options
        )
    except redis.ResponseError as e:  # SELECT refused: a database the server does not have
        close_client(client)
        message = missing_database(url, e)
        if message is None:
            raise
        raise NoDatabaseError(message) from None


def missing_module(names: Sequence[str]) -> str | None:
    """The first of ``names`` (or a module they need) that cannot be imported, if any."""
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as e:
            return e.name or name
    return None


def _serve(args: argparse.Namespace, url: str, token: str, given: str | None) -> None:
    """Serve the console to browsers; ``given``: where the token came from (None: made
    here, so printed in the address; a token from a file or the environment is not)."""
    from .web import ConsoleServer

    # the URL (credentials and all) by environment: a command line shows in ps
    os.environ["REDISFLOW_URL"] = url
    cmd = [sys.executable, "-m", "redisflow_tui", "--namespace", args.namespace]
    cmd += ["--max-payload", str(args.max_payload)]
    if args.read_only:
        cmd.append("--read-only")
    if args.no_keyspace:
        cmd.append("--no-keyspace")
    if args.theme:
        cmd += ["--theme", args.theme]
    host = args.host if ":" not in args.host else f"[{args.host}]"
    shown = "127.0.0.1" if host in ("0.0.0.0", "[::]") else host
    address = f"http://{shown}:{args.port}/"
    linked = f"&workflow={args.open}" if args.open else ""
    if given is None:
        print(f"redisflow-tui: serving on {address}?token={token}{linked}", flush=True)
    else:
        print(
            f"redisflow-tui: serving on {address} (open {address}?token=TOKEN{linked} once, "
            f"TOKEN the one in {given})",
            flush=True,
        )
    print(
        f"redisflow-tui: add ?workflow=ID (or &workflow=ID) to the address to open on a "
        f"workflow, e.g. {address}?workflow=42",
        flush=True,
    )
    # stop cleanly on SIGTERM too, so the private Redis and the demo go with us
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        ConsoleServer(shlex.join(cmd), args.host, args.port, token).serve()
    except KeyboardInterrupt:
        pass


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # before anything starts: without the extra, one line instead of a traceback
    missing = missing_module(CONSOLE_MODULES + (SERVE_MODULES if args.serve else ()))
    if missing:
        print(
            f"redisflow-tui: the console needs its extra ({missing} is missing): "
            "pip install 'redisflow[console]'",
            file=sys.stderr,
        )
        return EXIT_NO_CONSOLE
    embedded: EmbeddedRedis | None = None
    demo = None
    token, given = "", None
    try:
        url = connection_url(args)
        if args.serve:
            from .web import TOKEN_ENV, new_token, read_token

            read = read_token(args.token_file)
            if read is not None:
                given = args.token_file or f"${TOKEN_ENV}"
            token = read or new_token()
    except (DefinitionError, ValueError) as e:
        print(f"redisflow-tui: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        if not url:
            embedded = EmbeddedRedis().start()
            url = embedded.url
            if not args.demo:
                print(
                    f"redisflow-tui: no --url or REDISFLOW_URL: using a private, empty Redis at "
                    f"{redact(url)} (try --demo)",
                    file=sys.stderr,
                )
        if args.demo:
            from demos.console_demo import Demo

            demo = Demo(url, rate=args.demo_rate, namespace=args.namespace).start()
        if args.serve:
            _serve(args, url, token, given)
            return 0
        from .app import RedisflowApp

        engine = make_engine(
            url,
            args.namespace,
            args.max_payload,
            args.shards,
            wait_replicas=args.wait_replicas,
            wait_timeout_ms=args.wait_timeout,
        )
        shown = redact(url)
        label = f"{shown} (private)" if embedded and not args.demo else shown
        if args.demo:
            label = f"{shown} (demo)"
        app = RedisflowApp(
            engine,
            read_only=args.read_only,
            label=label,
            keyspace=not args.no_keyspace,
            theme=args.theme,
            open_wid=args.open,
        )
        app.run()
        close_client(engine.redis)
        return app.return_code or 0
    except (UnreachableError, NoDatabaseError) as e:
        print(f"redisflow-tui: {e}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except DefinitionError as e:  # e.g. --shards other than the deployment's
        print(f"redisflow-tui: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        if demo is not None:
            demo.stop()
        if embedded is not None:
            embedded.stop()


def main() -> None:
    """Entry point of ``redisflow-tui``."""
    sys.exit(run())


if __name__ == "__main__":
    main()
