"""Fixtures for the console tests: apps on the real test Redis, with a frozen clock."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from redisflow_tui.__main__ import make_engine
from redisflow_tui.app import RedisflowApp
from redisflow_tui.data.clock import FrozenClock


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run ``async def`` tests in a fresh event loop (Textual's pilot is async)."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    asyncio.run(pyfuncitem.obj(**{n: pyfuncitem.funcargs[n] for n in names}))
    return True


@pytest.fixture()
def console(redis_url: str) -> Iterator[Callable[..., RedisflowApp]]:
    """Make console apps on the flushed test Redis (closed after the test)."""
    engines = []

    def make(**kwargs: Any) -> RedisflowApp:
        engine = make_engine(redis_url, "rf")
        engines.append(engine)
        kwargs.setdefault("clock", FrozenClock())
        kwargs.setdefault("label", "redis://test")
        kwargs.setdefault("tick_s", 0.05)
        kwargs.setdefault("keyspace", False)
        return RedisflowApp(engine, **kwargs)

    yield make
    for engine in engines:
        engine.redis.close()
