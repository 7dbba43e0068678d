"""ShardedPubSub's own decisions, with redis-py's cluster pub/sub replaced by a stand-in
(pure logic: the cluster behaviour itself is in test_cluster_moves.py)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from engine.store.channels import ShardedPubSub

pytestmark = pytest.mark.same_on_cluster


class _Nodes:
    def __init__(self) -> None:
        self.initialized = 0

    def initialize(self) -> None:
        self.initialized += 1


class _PubSub:
    """Raises ``error`` on the first read, then has nothing."""

    def __init__(self, error: Exception | None) -> None:
        self.error = error
        self.node_pubsub_mapping = {"n1": object()}
        self.subscribed: list[str] = []

    def ssubscribe(self, *channels: str) -> None:
        self.subscribed += channels

    def get_sharded_message(self, timeout: float = 0.0) -> Any:
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        return None

    def close(self) -> None:
        pass


class _Client:
    def __init__(self, error: Exception | None) -> None:
        self.nodes_manager = _Nodes()
        self.error = error
        self.made: list[_PubSub] = []

    def pubsub(self) -> _PubSub:
        ps = _PubSub(self.error if not self.made else None)
        self.made.append(ps)
        return ps


def test_a_leaked_setinfo_reply_resubscribes() -> None:
    """redis-py opens a connection again under a subscription and the server's refusal of
    its CLIENT SETINFO (Redis 7.0) comes back as a read: subscribe again, wake the reader."""
    client = _Client(redis.exceptions.ResponseError("unknown subcommand 'SETINFO'."))
    ps = ShardedPubSub(client)
    ps.subscribe("rf:{rf:0}:ev")
    msg = ps.get_message(timeout=0.01)
    assert msg is not None and msg["type"] == "resubscribed"
    assert client.nodes_manager.initialized == 1
    assert client.made[-1].subscribed == ["rf:{rf:0}:ev"]


def test_other_error_replies_are_raised() -> None:
    client = _Client(redis.exceptions.ResponseError("NOPERM this user has no permissions"))
    ps = ShardedPubSub(client)
    ps.subscribe("c")
    with pytest.raises(redis.exceptions.ResponseError, match="NOPERM"):
        ps.get_message(timeout=0.01)
