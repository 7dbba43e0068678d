"""``redisflow serve`` (the HTTP server) and ``redisflow trigger put|list|show|rm``.

Registered from :func:`engine.cli.main.build_parser` by :func:`add_http_commands`. The
server's packages (the ``http`` extra) are imported only when ``serve`` runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import DefinitionError
from .common import (
    EXIT_OK,
    Parents,
    connect,
    esc,
    new_table,
    out,
    port_number,
    print_json,
    whole_in,
)

if TYPE_CHECKING:
    from ..client import Engine
    from ..store.triggers import Trigger

HTTP_EXTRA = (
    "redisflow serve needs the http extra: pip install -e '.[http]' in a checkout "
    "(pip install 'redisflow[http]' from a package index)"
)


worker_count = whole_in(1, 64, "a worker count")
connection_cap = whole_in(1, 1_000_000, "a connection count")
stream_cap = whole_in(1, 1_000_000, "a count of event streams")


def wait_limit(text: str) -> float:
    from engine.core.timing import parse_duration

    try:
        return parse_duration(text, "--max-wait")
    except DefinitionError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def timeout(text: str) -> float:
    """A timeout: a duration over 0 and at most a day."""
    from engine.core.timing import parse_duration

    try:
        seconds = parse_duration(text, "timeout")
    except DefinitionError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if not 0 < seconds <= 86400:
        raise argparse.ArgumentTypeError(f"a timeout from 1ms to 1d, not {text!r}")
    return seconds


def allowed_host(text: str) -> str:
    from ..http.guard import host_entry

    try:
        return host_entry(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def allowed_origin(text: str) -> str:
    from ..http.guard import origin_entry

    try:
        return origin_entry(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _env_list(name: str) -> list[str]:
    """The comma-separated entries of environment variable ``name``."""
    return [part.strip() for part in os.environ.get(name, "").split(",") if part.strip()]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], parents: Parents) -> None:
    """Add ``serve`` and ``trigger`` to the ``redisflow`` parser."""
    p = sub.add_parser(
        "serve",
        parents=parents,
        help="the HTTP API: run templates, webhook triggers, workflows, /metrics",
        description="Serve the HTTP API (see docs/http.md; /docs lists the endpoints). "
        "Without a token (--token-file, REDISFLOW_HTTP_READ_TOKEN, "
        "REDISFLOW_HTTP_WRITE_TOKEN) it serves loopback addresses only.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=port_number, default=8080, help="TCP port (default: 8080)")
    p.add_argument(
        "--token-file",
        metavar="FILE",
        help="bearer tokens, one a line: 'read TOKEN' or 'write TOKEN' (write implies read), "
        "optionally 'label=NAME' after it (who it stands for, as signals record it)",
    )
    p.add_argument(
        "--workers",
        type=worker_count,
        default=1,
        metavar="N",
        help="server processes (default 1; more need --url)",
    )
    p.add_argument(
        "--max-wait",
        type=wait_limit,
        default=300.0,
        metavar="DURATION",
        help="the longest a ?wait= waits; a longer one waits this long (default 5m)",
    )
    p.add_argument(
        "--max-stream",
        type=timeout,
        default=3600.0,
        metavar="DURATION",
        help="the longest an event stream (/v1/events) stays open; its client then "
        "reconnects with Last-Event-ID (default 1h)",
    )
    p.add_argument("--access-log", action="store_true", help="log every request")
    p.add_argument(
        "--allowed-host",
        action="append",
        type=allowed_host,
        metavar="NAME[:PORT]",
        help="answer requests whose Host is NAME (any port) or NAME:PORT, repeatable; '*' "
        "any (default: $REDISFLOW_HTTP_ALLOWED_HOSTS, comma-separated; else the --host "
        "address, and on loopback 127.0.0.1, localhost, [::1]; on 0.0.0.0 or :: any); "
        "others get 421",
    )
    p.add_argument(
        "--allowed-origin",
        action="append",
        type=allowed_origin,
        metavar="ORIGIN",
        help="a site whose pages may call the API from a browser (CORS), like "
        "https://app.example.com, repeatable (default: $REDISFLOW_HTTP_ALLOWED_ORIGINS; "
        "else none: pages of other origins may not write)",
    )
    p.add_argument(
        "--header-timeout",
        type=timeout,
        default=os.environ.get("REDISFLOW_HTTP_HEADER_TIMEOUT") or "60s",
        metavar="DURATION",
        help="a request's line and headers must arrive within this, else 408 and the "
        "connection closed (default: $REDISFLOW_HTTP_HEADER_TIMEOUT, else 60s)",
    )
    p.add_argument(
        "--body-timeout",
        type=timeout,
        default=os.environ.get("REDISFLOW_HTTP_BODY_TIMEOUT") or "60s",
        metavar="DURATION",
        help="a request's whole body must arrive within this after its headers, else 408 "
        "(default: $REDISFLOW_HTTP_BODY_TIMEOUT, else 60s)",
    )
    p.add_argument(
        "--max-connections",
        type=connection_cap,
        default=os.environ.get("REDISFLOW_HTTP_MAX_CONNECTIONS") or "1000",
        metavar="N",
        help="open connections per server process; past it new requests get 503 "
        "(default: $REDISFLOW_HTTP_MAX_CONNECTIONS, else 1000)",
    )
    p.add_argument(
        "--max-streams",
        type=stream_cap,
        default=os.environ.get("REDISFLOW_HTTP_MAX_STREAMS") or None,
        metavar="N",
        help="event streams open at once per server process, below --max-connections; "
        "past it a new stream gets 429 (default: $REDISFLOW_HTTP_MAX_STREAMS, else half "
        "of --max-connections)",
    )
    p.add_argument(
        "--max-streams-per-token",
        type=stream_cap,
        default=os.environ.get("REDISFLOW_HTTP_MAX_STREAMS_PER_TOKEN") or "100",
        metavar="N",
        help="event streams one bearer token may hold open per server process; past it "
        "429 (default: $REDISFLOW_HTTP_MAX_STREAMS_PER_TOKEN, else 100)",
    )
    p.set_defaults(run=cmd_serve, no_engine=True)

    p = sub.add_parser(
        "trigger",
        help="webhook triggers: put, list, show, rm",
        description="A trigger runs a template for each delivery to POST /v1/triggers/NAME "
        "that passes its auth. Every scheme but 'none' needs a secret: a trigger without "
        "one is refused.",
    )
    tsub = p.add_subparsers(
        dest="trigger_command", required=True, metavar="COMMAND", parser_class=type(p)
    )
    t = tsub.add_parser("put", parents=parents, help="create or replace a trigger")
    t.add_argument("name")
    t.add_argument("--template", required=True, help="the template each delivery runs")
    t.add_argument(
        "--auth",
        required=True,
        choices=["github", "standard-webhooks", "bearer", "none"],
        help="github: X-Hub-Signature-256; standard-webhooks: webhook-signature (secret "
        "whsec_...); bearer: Authorization: Bearer SECRET; none: anyone (say so explicitly)",
    )
    secret = t.add_mutually_exclusive_group()
    secret.add_argument("--secret-env", metavar="VAR", help="read the secret from $VAR")
    secret.add_argument("--secret-file", metavar="FILE", help="read the secret from FILE")
    t.add_argument(
        "--idempotency-header",
        metavar="HEADER",
        default="",
        help="run each value of this header once (X-GitHub-Delivery, webhook-id); "
        "default: every delivery runs",
    )
    t.set_defaults(run=cmd_trigger_put, no_engine=True, writes=True)
    t = tsub.add_parser("list", parents=parents, help="every trigger")
    t.set_defaults(run=cmd_trigger_list)
    t = tsub.add_parser("show", parents=parents, help="one trigger (not its secret)")
    t.add_argument("name")
    t.set_defaults(run=cmd_trigger_show)
    t = tsub.add_parser("rm", parents=parents, help="delete a trigger")
    t.add_argument("name")
    t.set_defaults(run=cmd_trigger_rm)


def cmd_serve(_: Engine | None, args: argparse.Namespace) -> int:
    try:
        from ..http.auth import load_tokens
        from ..http.server import PUSH_RETRY_S, Settings, check_bind, check_streams, serve
    except ImportError:
        raise DefinitionError(HTTP_EXTRA) from None
    from .common import connection_url

    tokens = load_tokens(args.token_file)
    check_bind(args.host, tokens)  # before connecting: bad input touches nothing
    check_streams(args.max_connections, args.max_streams)
    hosts = args.allowed_host or _checked_env("REDISFLOW_HTTP_ALLOWED_HOSTS", allowed_host)
    origins = args.allowed_origin or _checked_env("REDISFLOW_HTTP_ALLOWED_ORIGINS", allowed_origin)
    url = connection_url(args)
    if args.workers > 1 and url is None:
        raise DefinitionError("--workers above 1 needs --url (a Redis every worker reaches)")
    settings = Settings(
        url=url,
        namespace=args.namespace,
        max_payload=args.max_payload,
        read_tokens=tuple(sorted(tokens.read)),
        write_tokens=tuple(sorted(tokens.write)),
        token_labels=tuple(sorted(tokens.labels)),
        max_wait_s=args.max_wait,
        max_stream_s=args.max_stream,
        allowed_hosts=tuple(hosts),
        allowed_origins=tuple(origins),
        header_timeout_s=args.header_timeout,
        body_timeout_s=args.body_timeout,
        max_connections=args.max_connections,
        max_streams=args.max_streams,
        max_streams_per_token=args.max_streams_per_token,
    )
    if args.workers > 1:
        # each worker connects by itself: find out here, once, that Redis is there and has
        # the URL's database (exit 3 with one line, not a traceback per worker)
        connect(args, push_retry_s=PUSH_RETRY_S).close()
        serve(settings, args.host, args.port, args.workers, args.access_log)
        return EXIT_OK
    from ..http import create_app

    engine = connect(args, push_retry_s=PUSH_RETRY_S)
    try:
        app = create_app(engine, settings.config(args.host))
        auth = "bearer tokens" if tokens.configured else "no tokens (loopback only)"
        print(
            f"redisflow: serving http://{args.host}:{args.port} for {engine.url} with {auth}; "
            f"API at /docs",
            file=sys.stderr,
            flush=True,
        )
        serve(settings, args.host, args.port, 1, args.access_log, app=app)
    finally:
        engine.close()
    return EXIT_OK


def _checked_env(name: str, check: Any) -> list[str]:
    try:
        return [check(entry) for entry in _env_list(name)]
    except argparse.ArgumentTypeError as e:
        raise DefinitionError(f"${name}: {e}") from None


def cmd_trigger_put(_: Engine | None, args: argparse.Namespace) -> int:
    """Checked before connecting: a bad trigger touches nothing."""
    from ..http.triggers import new_trigger, read_secret

    secret = read_secret(args.secret_env, args.secret_file)
    trigger = new_trigger(args.name, args.template, args.auth, secret, args.idempotency_header)
    engine = connect(args)
    try:
        return _put(engine, replace(trigger, created_by=engine.actor), args)
    finally:
        engine.close()


def _put(engine: Engine, trigger: Trigger, args: argparse.Namespace) -> int:
    engine.put_trigger(trigger)
    if args.json:
        print_json(engine.trigger(args.name).to_dict())
    else:
        dedup = (
            f"each {trigger.idempotency_header} once"
            if trigger.idempotency_header
            else "every delivery runs"
        )
        print(
            f"trigger {trigger.name}: POST /v1/triggers/{trigger.name} runs template "
            f"{trigger.template} (auth {trigger.auth}; {dedup})"
        )
    return EXIT_OK


def _row(d: dict[str, Any]) -> list[str]:
    created = d["created_at"]
    when = "-" if created is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(created))
    return [
        str(d["name"]),
        str(d["template"]),
        str(d["auth"]) + (" (legacy: refused until put again)" if d.get("legacy") else ""),
        str(d["idempotency_header"] or "-"),
        when,
    ]


def cmd_trigger_list(engine: Engine, args: argparse.Namespace) -> int:
    triggers = [t.to_dict() for t in engine.triggers()]
    if args.json:
        print_json(triggers)
        return EXIT_OK
    table = new_table("trigger", "template", "auth", "idempotency", "created")
    for d in triggers:
        table.add_row(*(esc(cell) for cell in _row(d)))
    out.print(table)
    return EXIT_OK


def cmd_trigger_show(engine: Engine, args: argparse.Namespace) -> int:
    d = engine.trigger(args.name).to_dict()
    if args.json:
        print_json(d)
        return EXIT_OK
    for key, value in d.items():
        print(f"{key:<20} {'-' if value in (None, '') else value}")
    return EXIT_OK


def cmd_trigger_rm(engine: Engine, args: argparse.Namespace) -> int:
    engine.remove_trigger(args.name)
    if args.json:
        print_json({"removed": args.name})
    else:
        print(f"trigger {args.name}: removed")
    return EXIT_OK
