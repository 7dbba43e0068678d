"""Losing Redis shows a banner; the console recovers by itself when Redis returns."""

from __future__ import annotations

from support import wait_for

from demos import shapes
from engine import EmbeddedRedis
from redisflow_tui.__main__ import make_engine
from redisflow_tui.app import RedisflowApp
from redisflow_tui.data.clock import FrozenClock
from redisflow_tui.widgets.app_bar import Banner
from redisflow_tui.widgets.workflow_table import WorkflowTable


async def test_redis_restart_is_survived() -> None:
    server = EmbeddedRedis().start()
    port = server.port
    engine = make_engine(server.url, "rf")
    try:
        first = engine.push(shapes.diamond4())
        app = RedisflowApp(engine, clock=FrozenClock(), label="redis://test", tick_s=0.05)
        async with app.run_test(size=(160, 45)) as pilot:
            table = app.screen.query_one(WorkflowTable)
            await wait_for(pilot, lambda: table.wids == [first])
            assert app.link[0] is True
            server.stop()
            await wait_for(pilot, lambda: app.link[0] is False, what="loss noticed")
            banner = app.screen.query_one(Banner)
            await wait_for(pilot, lambda: banner.has_class("-lost"), what="banner")
            assert "unreachable" in str(banner.content).lower()
            # the same port again, with other data: what is shown is read again
            server = EmbeddedRedis(port=port).start()
            again = engine.push_many([shapes.chain9(), shapes.chain9()])
            await wait_for(pilot, lambda: app.link[0] is True, timeout=15, what="reconnect")
            await wait_for(pilot, lambda: table.wids == list(reversed(again)), what="resync")
            await wait_for(pilot, lambda: not banner.has_class("-lost"))
            assert any("Redis is back" in n.message for n in app._notifications)
            # and live again
            third = engine.push(shapes.diamond4())
            await wait_for(pilot, lambda: table.wids[:1] == [third], what="live after")
    finally:
        engine.redis.close()
        server.stop()
