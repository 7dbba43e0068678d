"""Regenerate ``screenshots/task-logs.png`` (a running task's log pane and progress) and
``screenshots/history.png`` (run times per task type), from a real agent on a private
Redis::

    python scripts/screenshot_observability.py
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from engine import Agent, EmbeddedRedis, Engine, Task, TaskFailed, Workflow  # noqa: E402
from redisflow_tui.app import RedisflowApp  # noqa: E402
from screenshots import svg_to_png  # noqa: E402

log = logging.getLogger("etl.load")
release = threading.Event()


def load(task: Task) -> None:
    """Logs as it goes, says how far it is, then waits for the picture to be taken."""
    for k in range(1, 5):
        log.info("batch %d: 1,000 rows written to orders", k)
        task.progress(k / 10, f"rows {k},000/10,000")
    print("waiting for the warehouse lock")
    release.wait(30)


def quick(task: Task) -> None:
    random.seed(task.workflow_id + task.name)
    threading.Event().wait(random.uniform(0.001, 0.05))
    if task.type == "fetch" and random.random() < 0.1:
        raise TaskFailed("HTTP 503")
    print(f"{task.name}: done")


async def main() -> None:
    with EmbeddedRedis() as server:
        engine = Engine.connect(server.url)
        for _ in range(40):  # some history
            wf = Workflow("sync")
            a = wf.task("fetch", type="fetch")
            b = wf.task("parse", type="parse", after=[a])
            wf.task("index", type="index", after=[b])
            engine.push(wf)
        Agent(engine, "agent-1", {t: quick for t in ("fetch", "parse", "index")}).run(
            until_idle=True
        )
        wf = Workflow("nightly-etl")
        ex = wf.task("extract", type="quick")
        wf.task("load", type="load", after=[ex])
        wid = engine.push(wf)
        agent = Agent(engine, "agent-2", {"quick": quick, "load": load}, concurrency=2)
        thread = threading.Thread(target=agent.run, daemon=True)
        app = RedisflowApp(engine)
        async with app.run_test(size=(140, 34)) as pilot:
            thread.start()  # inside the app: the agent routes the stdout Textual set up
            await pilot.pause(2.5)
            app.goto(wid)
            await pilot.pause(1.5)
            await pilot.press("right")  # the graph: select "load"
            await pilot.pause(2.5)
            svg_to_png(app.export_screenshot(), ROOT / "screenshots" / "task-logs.png")
            await pilot.press("escape")
            await pilot.press("H")
            await pilot.pause(1.5)
            svg_to_png(app.export_screenshot(), ROOT / "screenshots" / "history.png")
            release.set()
            agent.stop()
            thread.join(10)


if __name__ == "__main__":
    asyncio.run(main())
