"""Regenerate ``screenshots/bulk.png`` (every failed run of a template retried from the
home list: the confirmation that states the count) and ``screenshots/agents-drain.png`` (an agent
draining: it finishes its task, then stops), from a real agent on a private Redis::

    python scripts/screenshot_bulk.py
"""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from engine import Agent, EmbeddedRedis, Engine, Task, TaskFailed  # noqa: E402
from redisflow_tui.app import RedisflowApp  # noqa: E402
from redisflow_tui.screens.confirm import ConfirmScreen  # noqa: E402
from screenshots import svg_to_png  # noqa: E402

NIGHTLY = """
name: nightly-import
tasks:
  - name: fetch
    type: io
  - name: load
    type: io
    after: [fetch]
"""
SIZE = (160, 32)


def flaky(task: Task) -> str:
    if task.name == "load" and int(task.workflow_id) % 3 == 0:
        raise TaskFailed("upstream API answered 503")
    return "ok"


async def main() -> None:
    with EmbeddedRedis() as server:
        engine = Engine.connect(server.url)
        engine.put_template(NIGHTLY)
        for _ in range(9):
            engine.run("nightly-import")
        Agent(engine, "agent-1", {"io": flaky}).run(until_idle=True)
        app = RedisflowApp(engine)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause(1.0)
            await pilot.press(*"ssssss")  # the state filter: failed
            await pilot.pause(0.6)
            await pilot.press("A", "t")
            while not isinstance(app.screen, ConfirmScreen):
                await pilot.pause(0.1)
            await pilot.pause(0.3)
            svg_to_png(app.export_screenshot(), ROOT / "screenshots" / "bulk.png")

        go = threading.Event()

        def slow(_: Task) -> str:
            go.wait(30)
            return "ok"

        engine.run("nightly-import")
        agent = Agent(engine, "agent-2", {"io": slow}, heartbeat_s=0.2)
        thread = threading.Thread(target=agent.run, daemon=True)
        thread.start()
        app = RedisflowApp(engine)
        async with app.run_test(size=(160, 16)) as pilot:
            await pilot.press("2")
            await pilot.pause(1.5)
            await pilot.press("d", "y")  # agent-2, listed first (online)
            await pilot.pause(1.5)
            svg_to_png(app.export_screenshot(), ROOT / "screenshots" / "agents-drain.png")
        go.set()
        thread.join(30)


if __name__ == "__main__":
    asyncio.run(main())
