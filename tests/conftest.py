"""Shared fixtures: one real redis-server per test session, flushed between tests."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis

from engine import EmbeddedRedis, Engine


@pytest.fixture(scope="session")
def redis_server() -> Iterator[EmbeddedRedis]:
    """A real redis-server on a free loopback port for the whole session."""
    server = EmbeddedRedis().start()
    yield server
    server.stop()


@pytest.fixture()
def redis_url(redis_server: EmbeddedRedis) -> Iterator[str]:
    """The server's URL, with the database flushed before and after the test."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    yield redis_server.url
    client.flushall()
    client.close()


@pytest.fixture()
def engine(redis_url: str) -> Iterator[Engine]:
    """An engine on the flushed test server."""
    eng = Engine.connect(redis_url)
    yield eng
    eng.close()


@pytest.fixture()
def cli_env(redis_url: str) -> dict[str, str]:
    """Environment for running the console scripts against the test server."""
    env = dict(os.environ)
    env["REDISFLOW_URL"] = redis_url
    return env
