"""What every command-line tool shares: connection options, exit codes, error reporting."""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import redis

from ..client import Engine
from ..definition import DEFAULT_MAX_PAYLOAD
from ..errors import RedisflowError, UnreachableError

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_UNREACHABLE = 0, 1, 2, 3


def connection_options() -> argparse.ArgumentParser:
    """A parent parser with ``--url`` and ``--namespace``."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument(
        "--url",
        default=os.environ.get("REDISFLOW_URL"),
        help="Redis URL (default: $REDISFLOW_URL; without either, a private redis-server "
        "is started for this command and stopped on exit)",
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


def connect(args: argparse.Namespace, **options: Any) -> Engine:
    """Connect as the options say; say so on stderr when falling back to a private Redis."""
    engine = Engine.connect(
        args.url, namespace=args.namespace, max_payload=args.max_payload, **options
    )
    if engine.embedded is not None:
        print(
            f"redisflow: no --url or REDISFLOW_URL: using a private Redis at {engine.url} "
            "for this command only",
            file=sys.stderr,
        )
    return engine


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
        except (redis.ConnectionError, redis.TimeoutError) as e:
            return fail(f"Redis unreachable: {e}", EXIT_UNREACHABLE)
        except redis.exceptions.NoPermissionError as e:
            return fail(f"Redis refused a command (check the user's ACL): {e}", EXIT_BAD_INPUT)
        except RedisflowError as e:
            return fail(str(e), e.exit_code)
        except KeyboardInterrupt:
            return 130

    return wrapper


def print_json(value: Any) -> None:
    print(json.dumps(value, default=str, separators=(",", ":")))
