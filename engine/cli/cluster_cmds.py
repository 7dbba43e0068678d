"""``redisflow cluster shards|move``: where each shard lives on a Redis Cluster, and moving
one to another master while agents and pushers run (``engine/store/shard_moves.py``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from engine.core.words import plural

from ..errors import DefinitionError
from .common import EXIT_OK, Parents, connect, connection_url, esc, new_table, out, print_json

if TYPE_CHECKING:
    from ..store.shard_moves import ShardMoves

NOT_A_CLUSTER = "the cluster commands need a Redis Cluster: --url redis+cluster://HOST:PORT"


def address(text: str) -> str:
    """``HOST:PORT`` of a node, as the cluster names it."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT of a master, not {text!r}")
    return text


def _with_moves(args: argparse.Namespace, action: Any) -> int:
    if connection_url(args) is None:  # no private Redis: it could never be a cluster
        raise DefinitionError(NOT_A_CLUSTER)
    from ..store.shard_moves import ShardMoves

    engine = connect(args)
    try:
        moves = ShardMoves(engine.redis, engine.keys)
        try:
            return int(action(moves))
        finally:
            moves.close()
    finally:
        engine.close()


def cmd_cluster_shards(_: Any, args: argparse.Namespace) -> int:
    def show(moves: ShardMoves) -> int:
        places = moves.places()
        if args.json:
            print_json({"shards": [p.to_dict() for p in places]})
            return EXIT_OK
        table = new_table("shard", "tag", "slot", "master", "keys")
        for p in places:
            table.add_row(str(p.shard), esc(p.tag), str(p.slot), p.master, f"{p.keys:,}")
        out.print_table(table)
        per_master: dict[str, int] = {}
        for p in places:
            per_master[p.master] = per_master.get(p.master, 0) + 1
        spread = ", ".join(f"{m}: {n}" for m, n in sorted(per_master.items()))
        shards, masters = plural(len(places), "shard"), plural(len(per_master), "master")
        out.print(f"[dim]{shards} on {masters} ({spread})[/]")
        return EXIT_OK

    return _with_moves(args, show)


def cmd_cluster_move(_: Any, args: argparse.Namespace) -> int:
    def move(moves: ShardMoves) -> int:
        report = moves.move(args.shard, args.to)
        if args.json:
            print_json(report.to_dict())
        else:
            print(
                f"shard {report.shard} (slot {report.slot}) moved from {report.source} to "
                f"{report.target}: {report.keys:,} keys; {report.source} served nothing else "
                f"for {report.blocked_s * 1000:.1f} ms"
            )
        return EXIT_OK

    return _with_moves(args, move)


def register(sub: Any, parents: Parents) -> None:
    """Add ``cluster shards`` and ``cluster move`` to the ``redisflow`` parser."""
    p = sub.add_parser("cluster", help="a Redis Cluster's shards: where they are, move one")
    cs = p.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")
    q = cs.add_parser("shards", parents=parents, help="each shard's slot, master and key count")
    q.set_defaults(run=cmd_cluster_shards, no_engine=True)
    q = cs.add_parser(
        "move",
        parents=parents,
        help="move a shard to another master, while agents and pushers run",
        description="Move one shard (its slot, every key) to another master in one step: "
        "the source serves nothing else meanwhile (some 12-24 µs a key), and clients follow "
        "the ASK and MOVED replies after. Use this, not `redis-cli --cluster reshard`, "
        "which moves a slot's keys a few at a time under running scripts.",
    )
    q.add_argument("shard", type=int, metavar="SHARD", help="the shard's number")
    q.add_argument(
        "--to",
        required=True,
        type=address,
        metavar="HOST:PORT",
        help="the master to move it to (as `redisflow cluster shards` names them)",
    )
    q.set_defaults(run=cmd_cluster_move, no_engine=True)
