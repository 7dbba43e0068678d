"""A frozen Redis (SIGSTOP: connections open, nothing answers) ends calls within the read
timeout (REDISFLOW_TIMEOUT) instead of hanging them; blocking reads longer than that
timeout still work. Time is only checked as an upper bound, against hangs."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis
from engine_helpers import cli, one_line_error

from engine import EmbeddedRedis, Engine, Workflow

HANG = 30.0  # seconds: past this, a call is taken to hang
# A read timeout past redis-py 8's own default (5 s): the wait is ours, not the library's.
# (A timeout never fires early: a lower bound holds on a loaded machine.)
OURS = 6


@pytest.fixture()
def own() -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis() as server:
        yield server


def one_task(name: str) -> Workflow:
    wf = Workflow(name)
    wf.task("a")
    return wf


@contextmanager
def frozen(server: EmbeddedRedis) -> Iterator[None]:
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.process.pid, signal.SIGCONT)


def outcome_within(fn: Callable[[], Any], limit: float = HANG) -> tuple[Any, float]:
    """``fn()``'s result or exception, and how long it took; ("hung", limit) past ``limit``
    (the thread is left to finish once the server runs again)."""
    box: list[Any] = []

    def target() -> None:
        try:
            box.append(fn())
        except Exception as e:  # noqa: BLE001 - the outcome under test
            box.append(e)

    start = time.monotonic()
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(limit)
    return (box[0] if box else "hung"), time.monotonic() - start


@pytest.mark.parametrize("command", [["list"], ["status", "1"], ["stats"]])
def test_cli_gives_up_on_a_frozen_redis(own: EmbeddedRedis, command: list[str]) -> None:
    env = {**os.environ, "REDISFLOW_TIMEOUT": "2"}
    assert cli("stats", "--url", own.url, env=env).returncode == 0
    with frozen(own):
        start = time.monotonic()
        out = cli(*command, "--url", own.url, env=env, timeout=HANG + 30)
        took = time.monotonic() - start
    assert out.returncode == 3, out.stderr
    err = one_line_error(out)
    assert "did not answer within 2 s (REDISFLOW_TIMEOUT)" in err, err
    assert took < HANG


@pytest.mark.slow
def test_a_connected_engine_times_out(own: EmbeddedRedis, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDISFLOW_TIMEOUT", str(OURS))
    with Engine.connect(own.url) as engine:
        engine.push(one_task("w"))
        with frozen(own):
            got, took = outcome_within(engine.list)
            assert isinstance(got, redis.TimeoutError), got
            assert OURS - 0.5 <= took < HANG
        assert len(engine.list()) == 1  # the same engine, once Redis answers again


def test_healthz_answers_503_on_a_frozen_redis(
    own: EmbeddedRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    httpx = pytest.importorskip("httpx")
    from engine.http import create_app

    monkeypatch.setenv("REDISFLOW_TIMEOUT", str(OURS))

    def healthz(app: Any) -> int:
        async def get() -> int:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
                return int((await http.get("/healthz")).status_code)

        return asyncio.run(get())

    with Engine.connect(own.url) as engine:
        app = create_app(engine)
        assert healthz(app) == 200
        with frozen(own):
            got, took = outcome_within(lambda: healthz(app))
        assert got == 503, got
        assert OURS - 0.5 <= took < HANG
        assert healthz(app) == 200


@pytest.mark.slow
def test_blocking_reads_outlast_the_read_timeout(
    own: EmbeddedRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """XREAD BLOCK longer than the read timeout blocks in slices; pub/sub waits too."""
    monkeypatch.setenv("REDISFLOW_TIMEOUT", "1")
    with Engine.connect(own.url) as engine:
        last: dict[int, str] = {}
        start = time.monotonic()
        # past redis-py 8's default read timeout too (5 s)
        assert engine.events_after(last, block_ms=6000) == []
        assert 5.5 < time.monotonic() - start < HANG
        pusher = threading.Timer(1.5, lambda: engine.push(one_task("w")))
        pusher.start()
        got = engine.events_after(last, block_ms=5000)  # the "$" of the first call kept
        pusher.join()
        assert got, "the event that came between two slices was missed"
        heard: list[Any] = []
        with engine.listen(heard.append):
            time.sleep(2.5)  # idle past the read timeout
            engine.push(one_task("w2"))
            deadline = time.monotonic() + HANG
            while not heard and time.monotonic() < deadline:
                time.sleep(0.05)
        assert heard
