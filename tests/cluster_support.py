"""A local Redis Cluster for the tests: 3 masters on loopback, one per test session.

``pytest --cluster`` (or ``RF_TEST_CLUSTER=1``) runs the Redis-semantics tests on it: the
``redis_url`` fixture then names the cluster (``redis+cluster://``) and the ``engine``
fixture connects to it. Tests that need a single Redis (its process, its CONFIG, a plain
client on the URL) are marked ``single_redis`` and skipped there.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis

from engine.connect.local_cluster import LocalCluster
from engine.connect.urls import close_client, open_client
from engine.errors import UnreachableError

MASTERS = 3


def cluster_wanted(config: pytest.Config) -> bool:
    """Whether this session runs the suite on a cluster."""
    return bool(config.getoption("--cluster")) or os.environ.get("RF_TEST_CLUSTER") == "1"


def start_cluster(masters: int = MASTERS, replicas: int = 0) -> LocalCluster:
    """A started local cluster, or the test skipped saying why none can run here."""
    try:
        return LocalCluster(masters, replicas).start()
    except UnreachableError as e:
        pytest.skip(f"no usable redis-server for a local Redis Cluster: {e}")


def flush(url: str) -> None:
    """Empty every master of the cluster (or the single server) at ``url``."""
    client = open_client(url)
    try:
        client.flushall()
    finally:
        close_client(client)


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[LocalCluster]:
    """A 3-master local Redis Cluster for the whole session."""
    cluster = start_cluster()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def cluster_flusher(redis_cluster: LocalCluster) -> Iterator[redis.Redis]:
    """One cluster client for the session's flushes: a client made per test costs a slot
    map and a connection per master each time (about 40 ms), twice per test."""
    client = open_client(redis_cluster.url)
    yield client
    close_client(client)


@pytest.fixture()
def cluster_url(redis_cluster: LocalCluster) -> Iterator[str]:
    """The cluster's ``redis+cluster://`` URL, every master flushed before and after."""
    flush(redis_cluster.url)
    yield redis_cluster.url
    try:
        flush(redis_cluster.url)
    except redis.RedisError:
        pass
