"""Regenerate ``screenshots/timeline.png``: a small workflow with a flaky task, a timed-out
attempt and queueing, run by a real agent on a private Redis, then its timeline::

    python scripts/screenshot_timeline.py
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from engine import Agent, EmbeddedRedis, Engine, Task, TaskFailed, Workflow  # noqa: E402
from redisflow_tui.app import RedisflowApp  # noqa: E402
from screenshots import svg_to_png  # noqa: E402

TAKES = {"extract": 0.2, "transform": 0.15, "load-users": 0.4, "load-orders": 0.2, "report": 0.1}


def run(task: Task) -> Any:
    time.sleep(TAKES[task.name])
    if task.name == "transform" and task.attempt < 3:
        raise TaskFailed("flaky")
    if task.name == "load-orders" and task.attempt == 1:
        task.cancelled.wait(1)  # past its timeout: the engine fails it, then it retries
        raise TaskFailed("slow")


async def main() -> None:
    with EmbeddedRedis() as server:
        engine = Engine.connect(server.url)
        wf = Workflow("etl", retry_backoff=0.1)
        ex = wf.task("extract")
        tr = wf.task("transform", after=[ex], max_attempts=3)
        users = wf.task("load-users", after=[tr])
        orders = wf.task("load-orders", after=[tr], timeout=0.3, max_attempts=2)
        wf.task("report", after=[users, orders])
        wid = engine.push(wf)
        Agent(engine, "agent-1", {"": run}, concurrency=2, maintain_s=0.1).run(until_idle=True)
        app = RedisflowApp(engine)
        async with app.run_test(size=(120, 24)) as pilot:
            app.goto(wid)
            await pilot.pause(1.0)
            await pilot.press("l")
            await pilot.pause(1.5)
            svg_to_png(app.export_screenshot(), ROOT / "screenshots" / "timeline.png")


if __name__ == "__main__":
    asyncio.run(main())
