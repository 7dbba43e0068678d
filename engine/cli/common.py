"""What every command-line tool shares: connection options, exit codes, error reporting."""

from __future__ import annotations

import argparse
import copy
import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import redis

from ..acl import denied_command, permission_message
from ..client import Engine
from ..definition import DEFAULT_MAX_PAYLOAD
from ..errors import (
    DefinitionError,
    PartialWriteError,
    RedisflowError,
    UnreachableError,
    is_out_of_memory,
)
from ..urls import as_cluster_url, parse_url, read_timeout, with_tls

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_UNREACHABLE = 0, 1, 2, 3
EXIT_PARTIAL = 4  # partly written: the ids of what was written are printed
EXIT_TIMED_OUT = 5  # a --wait gave up (--timeout) before every workflow finished
EXIT_CLOSED_PIPE = 141  # stdout closed by its reader (`| head`): as a shell reports SIGPIPE


NO_MEMORY = "Redis is out of memory (maxmemory reached, policy noeviction)"
FREE_MEMORY = "free memory (e.g. `redisflow cleanup --finished`) or raise maxmemory"
OUT_OF_MEMORY = f"{NO_MEMORY}: nothing was written; {FREE_MEMORY}"

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
        type=int,
        default=os.environ.get("REDISFLOW_SHARDS") or None,  # argparse applies type=int
        metavar="N",
        help="the deployment's shard count, stored in Redis the first time and checked "
        "after (default: the stored count; else 1, or one per master on a cluster)",
    )
    p.add_argument(
        "--wait-replicas",
        type=int,
        default=os.environ.get("REDISFLOW_WAIT_REPLICAS") or 0,  # argparse applies type=int
        metavar="N",
        help="after every state change, WAIT for N replicas to have it; fewer in time is an "
        "error, exit 3 (the write stands on the master; default: $REDISFLOW_WAIT_REPLICAS, "
        "else 0: replication stays asynchronous)",
    )
    p.add_argument(
        "--wait-timeout",
        type=int,
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
        type=int,
        default=int(os.environ.get("REDISFLOW_MAX_PAYLOAD", DEFAULT_MAX_PAYLOAD)),
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
        except redis.TimeoutError as e:
            return fail(
                f"Redis did not answer within {read_timeout():g} s (REDISFLOW_TIMEOUT): {e}",
                EXIT_UNREACHABLE,
            )
        except redis.ConnectionError as e:
            return fail(f"Redis unreachable: {e}", EXIT_UNREACHABLE)
        except redis.exceptions.InvalidResponse as e:  # another protocol on that port
            return fail(f"Redis unreachable: not the Redis protocol ({e})", EXIT_UNREACHABLE)
        except redis.ResponseError as e:
            message = server_refusal(e)
            if message is None:
                raise
            return fail(message, EXIT_UNREACHABLE)
        except RedisflowError as e:
            return fail(str(e), e.exit_code)
        except KeyboardInterrupt:
            return 130

    return wrapper


def refuse(command: str) -> int:
    """Report that this process's Redis user may not run ``command``; exit code 3."""
    return fail(permission_message(command, _user), EXIT_UNREACHABLE)


def server_refusal(error: redis.ResponseError) -> str | None:
    """One line for an error the server's configuration causes (a missing ACL
    permission, memory full), or None for any other error."""
    text = str(error)
    # "can't run this command": a script stopped by an ACL where no guard runs (6.2)
    if isinstance(error, redis.exceptions.NoPermissionError) or "can't run this" in text:
        if "to access a" in text:  # a key or channel outside the user's patterns
            what = "channel" if "channel" in text else "key"
            return (
                f"Redis user {_user or 'default'!r} may not access a {what} of this namespace "
                "(NOPERM): check --namespace, or see `redisflow acl`"
            )
        return permission_message(denied_command(error), _user)
    if is_out_of_memory(error):
        return OUT_OF_MEMORY
    return None


def cause_of(error: BaseException) -> str:
    """Why a write stopped, in one line that says nothing of what was written."""
    if is_out_of_memory(error):
        return f"{NO_MEMORY}; {FREE_MEMORY}"
    if isinstance(error, (redis.ConnectionError, redis.TimeoutError)):
        return f"Redis unreachable: {error}"
    if isinstance(error, redis.ResponseError):
        return server_refusal(error) or str(error)
    return str(error)


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
