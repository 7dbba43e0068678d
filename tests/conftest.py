"""Shared fixtures: one real redis-server per test session, flushed between tests.

Two passes (``make test``, ``make test-cluster``):

- ``pytest`` runs every test on one redis-server per session (per xdist worker). Tests
  marked ``slow`` (multi-process, real waits of seconds) run first, so that under
  ``-n 4`` they overlap the many short ones instead of ending the run alone.
- ``pytest --cluster`` runs again, on a local 3-master Redis Cluster, the tests whose
  outcome can differ there: those on the session's Redis (fixtures ``redis_url``,
  ``session_url``, or what builds on them: ``engine``, ``cli_env``, the console's), which
  touch routing, sharding, scripts over shards, pub/sub or reads merged over shards. A
  new test on those fixtures is in the cluster pass by default.

  Opting out: mark a test (or a module, ``pytestmark``) ``same_on_cluster`` when what it
  checks cannot differ on a cluster: argument parsing and exit codes, output formatting,
  console layout and keys, HTTP guards and schemas. It then runs in the first pass only.
  A test that cannot run on a cluster at all (a proxy in front of the server, CONFIG, a
  plain client on the URL) is marked ``single_redis`` and skipped there. Tests on a
  server of their own, pure-logic tests, and those on the ``redis_cluster`` fixture
  directly (the same cluster either way) run in the first pass only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis
from cluster_support import cluster_flusher, cluster_url, cluster_wanted, redis_cluster

from engine import EmbeddedRedis, Engine

# fixtures of tests/cluster_support.py
__all__ = ["cluster_flusher", "cluster_url", "redis_cluster"]

# fixtures that name the session's Redis: the single server, or with --cluster the cluster
ON_SESSION_REDIS = {"redis_url", "session_url"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cluster",
        action="store_true",
        help="run the Redis-semantics tests on a local 3-master Redis Cluster",
    )


def on_cluster(item: pytest.Item) -> bool:
    """Whether ``item`` runs again in the ``--cluster`` pass (see the module's docstring)."""
    uses = set(getattr(item, "fixturenames", ()))
    return bool(ON_SESSION_REDIS & uses) and item.get_closest_marker("same_on_cluster") is None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # the slow tests first (a stable sort: the rest keep their order)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    if not cluster_wanted(config):
        return
    # On the cluster run only the tests whose outcome can differ there: the rest (pure
    # logic, a redis-server of their own, same_on_cluster) ran the same in the first pass
    kept = [item for item in items if on_cluster(item)]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept
    skip = pytest.mark.skip(reason="needs a single Redis (a proxy in front of it, CONFIG, ...)")
    for item in items:
        if "single_redis" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[EmbeddedRedis]:
    """A real redis-server on a free loopback port for the whole session."""
    server = EmbeddedRedis().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def session_url(request: pytest.FixtureRequest) -> str:
    """The session's Redis, not flushed: the single server's URL, or with ``--cluster``
    the local cluster's (for module fixtures that flush it themselves)."""
    if cluster_wanted(request.config):
        return str(request.getfixturevalue("redis_cluster").url)
    return str(request.getfixturevalue("redis_server").url)


@pytest.fixture()
def redis_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """The server's URL, with the database flushed before and after the test (with
    ``--cluster``: the local cluster's, every master flushed)."""
    if cluster_wanted(request.config):
        url = request.getfixturevalue("redis_cluster").url
        flusher = request.getfixturevalue("cluster_flusher")
        flusher.flushall()  # every master
        yield url
        flusher.flushall()
        return
    redis_server: EmbeddedRedis = request.getfixturevalue("redis_server")
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    yield redis_server.url
    client.flushall()
    client.close()


@pytest.fixture()
def engine(redis_url: str) -> Iterator[Engine]:
    """An engine on the flushed test server."""
    # The deployment's default layout (on a cluster: one shard per master);
    # RF_TEST_SHARDS gives another shard count
    shards = int(os.environ["RF_TEST_SHARDS"]) if os.environ.get("RF_TEST_SHARDS") else None
    eng = Engine.connect(redis_url, shards=shards)
    yield eng
    eng.close()


@pytest.fixture()
def cli_env(redis_url: str) -> dict[str, str]:
    """Environment for running the console scripts against the test server."""
    env = dict(os.environ)
    env["REDISFLOW_URL"] = redis_url
    return env
