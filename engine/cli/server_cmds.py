"""``redisflow server``: a private redis-server (or cluster) until Ctrl+C."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import TYPE_CHECKING, Any

from ..errors import DefinitionError
from .common import EXIT_OK, Parents, port_number, whole_in

if TYPE_CHECKING:
    from ..client import Engine


def cmd_server(_: Engine | None, args: argparse.Namespace) -> int:
    from engine.connect.embedded import EmbeddedRedis
    from engine.connect.local_cluster import LocalCluster

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


def register(sub: Any, parents: Parents) -> None:
    """``server``."""
    p = sub.add_parser("server", help="run a private redis-server (or cluster) and print its URL")
    p.add_argument("--port", type=port_number, default=None)
    p.add_argument(
        "--cluster",
        type=whole_in(1, 64, "a count of masters"),
        default=None,
        metavar="MASTERS",
        help="run a local Redis Cluster of this many masters instead (redis+cluster:// URL)",
    )
    p.add_argument(
        "--replicas",
        type=whole_in(0, 8, "a count of replicas"),
        default=0,
        metavar="N",
        help="with --cluster: replicas per master",
    )
    p.set_defaults(run=cmd_server, no_engine=True)
