"""``redisflow acl``: the ACL SETUSER line of a least-privilege user of a role."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from ..errors import DefinitionError
from .common import EXIT_OK, Parents, env_flag, whole_in

if TYPE_CHECKING:
    from ..client import Engine


def cmd_acl(_: Engine | None, args: argparse.Namespace) -> int:
    from engine.ops.acl import setuser_line

    try:
        if args.user:  # one user with every role given (an agent with --scheduler: two)
            lines = [setuser_line(args.roles, args.namespace, args.user, args.cluster, args.db)]
        else:
            lines = [
                setuser_line(role, args.namespace, None, args.cluster, args.db)
                for role in args.roles
            ]
    except ValueError as e:
        raise DefinitionError(str(e)) from None
    for line in lines:
        print(line)
    return EXIT_OK


def register(sub: Any, parents: Parents) -> None:
    """``acl``."""
    p = sub.add_parser(
        "acl",
        help="print the ACL SETUSER line giving a role exactly what it needs",
        description="Print the Redis ACL SETUSER line for a least-privilege user of a role: "
        "its namespace's keys and channels and only the commands the role runs (scripts "
        "included, each by its SHA: run it again after an upgrade). It keeps the user's "
        "password: set one with ACL SETUSER NAME >secret.",
    )
    p.add_argument(
        "--role",
        dest="roles",
        action="append",
        required=True,
        choices=["agent", "operator", "reader", "keeper"],
        help="agent: runs tasks; operator: pushes and steers; reader: reads; keeper: "
        "starts and cancels child runs (an agent whose workflows have run: tasks: "
        "--role agent --role keeper --user NAME) (repeatable)",
    )
    p.add_argument(
        "--namespace",
        default=os.environ.get("REDISFLOW_NAMESPACE", "rf"),
        help="key prefix of the deployment (default: rf)",
    )
    p.add_argument(
        "--user",
        default=None,
        help="user name (default: NAMESPACE-ROLE, a line per role); with several --role, "
        "one user with all of them",
    )
    p.add_argument(
        "--cluster",
        action="store_true",
        default=env_flag("REDISFLOW_CLUSTER"),
        help="for a Redis Cluster: adds sharded pub/sub and the cluster client's commands "
        "(run the line on every node; default: $REDISFLOW_CLUSTER)",
    )
    p.add_argument(
        "--db",
        type=whole_in(0, 1_000_000, "a database number"),
        default=0,
        help="the one database the user may SELECT (its URL's /N; default: 0)",
    )
    p.set_defaults(run=cmd_acl, no_engine=True)
