"""Regenerate ``screenshots/*.png`` from a real demo run of the console.

Starts a private redis-server, the demo's agents and workflow stream, drives the
console headless, and saves each screen as SVG, then PNG (the SVG's "Fira Code" is
swapped for "DejaVu Sans Mono", which cairosvg finds offline; install it with
``apt-get install fonts-dejavu-core`` if missing)::

    python scripts/screenshots.py [--out screenshots] [--keep-svg]
    python scripts/screenshots.py --only rules   # workflow-rules.png alone, in seconds
    python scripts/screenshots.py --only schedules   # schedules.png alone
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cairosvg  # noqa: E402

from demos.console_demo import Demo  # noqa: E402
from engine import Agent, EmbeddedRedis, Engine, Task, WorkflowStatus, load_file  # noqa: E402
from redisflow_tui.__main__ import make_engine  # noqa: E402
from redisflow_tui.app import RedisflowApp  # noqa: E402
from redisflow_tui.screens.workflow import WorkflowScreen  # noqa: E402
from redisflow_tui.widgets.dag_view import DagView  # noqa: E402
from redisflow_tui.widgets.task_table import TaskTable  # noqa: E402

SIZE = (160, 45)
# Rich lays SVG text out on a 12.2 px grid (0.61 em at 20 px). Rendered 1:1, cairo hints
# DejaVu Sans Mono's advance to 12 px; 0.2 px of letter spacing puts long runs of text
# back on the grid (scaling the output would change the hinting: keep it 1:1).
SPACING = "letter-spacing: 0.2px;"


def svg_to_png(svg: str, png: Path) -> None:
    """Write ``svg`` as PNG using DejaVu Sans Mono."""
    svg = re.sub(r"@font-face \{.*?\}", "", svg, flags=re.S)
    svg = svg.replace(
        "font-family: Fira Code, monospace;",
        f"font-family: DejaVu Sans Mono, monospace;\n        {SPACING}",
    )
    svg = svg.replace("Fira Code", "DejaVu Sans Mono")
    cairosvg.svg2png(bytestring=svg.encode(), write_to=str(png))


def find(engine: Engine, state: str, test: object, names: tuple[str, ...]) -> str | None:
    """A workflow in ``state`` whose status passes ``test``, preferring ``names``' order."""
    candidates: list[tuple[int, str]] = []
    for wf in engine.list(state=state, limit=200):
        if names and wf.name not in names:
            continue
        st = engine.status(wf.id)
        if test(st):  # type: ignore[operator]
            rank = names.index(wf.name) if wf.name in names else len(names)
            candidates.append((rank, wf.id))
    return min(candidates)[1] if candidates else None


def mid_run(st: WorkflowStatus) -> bool:
    running = st.counts.get("running", 0)
    active = running + st.counts.get("ready", 0)
    return running >= 1 and active >= 2 and st.succeeded >= 2 and st.counts.get("waiting", 0) >= 1


def failed_with_error(st: WorkflowStatus) -> bool:
    return any(t.state == "failed" and t.error for t in st.tasks) and st.succeeded >= 2


async def shoot(out: Path, keep_svg: bool, warmup: float) -> list[Path]:
    server = EmbeddedRedis().start()
    # slower tasks than the interactive demo, so graphs are caught half done
    demo = Demo(server.url, rate=1.0, flaky=False, task_ms=(300, 2000)).start()
    engine = make_engine(server.url, "rf")
    saved: list[Path] = []
    try:
        app = RedisflowApp(engine, label=f"{server.url} (demo)")
        async with app.run_test(size=SIZE) as pilot:

            async def save(name: str, svg: str | None = None) -> None:
                if svg is None:
                    await pilot.pause(0.6)
                    svg = app.export_screenshot(title="redisflow")
                if keep_svg:
                    (out / f"{name}.svg").write_text(svg)
                png = out / f"{name}.png"
                svg_to_png(svg, png)
                saved.append(png)
                print(f"saved {png}")

            async def open_workflow(wid: str) -> WorkflowScreen:
                app.goto(wid)
                while not (isinstance(app.screen, WorkflowScreen) and app.screen.wid == wid):
                    await pilot.pause(0.1)
                screen = app.screen
                while screen.query_one(DagView).layout_ is None:
                    await pilot.pause(0.1)
                return screen

            async def back_home() -> None:
                while isinstance(app.screen, WorkflowScreen):
                    app.pop_screen()
                    await pilot.pause(0.1)

            print(f"letting the demo run for {warmup:.0f}s…")
            await pilot.pause(warmup)
            await save("home")

            # a pipeline caught mid-run: some tasks done, some running, some waiting
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                wid = find(engine, "running", mid_run, ("ml-train",))
                if wid is None:
                    await pilot.pause(0.2)
                    continue
                screen = await open_workflow(wid)
                await pilot.pause(0.6)
                svg = app.export_screenshot(title="redisflow")
                if screen.view.status is not None and mid_run(screen.view.status):
                    await save("workflow-dag", svg)
                    await back_home()
                    break
                await back_home()

            wid = find(engine, "failed", failed_with_error, ("ml-train", "fanout-report"))
            wid = wid or find(engine, "failed", failed_with_error, ())
            if wid:
                screen = await open_workflow(wid)
                failed = next(t.index for t in screen.view.tasks if t.state == "failed")
                table = screen.query_one(TaskTable)
                table.focus()
                table.select_task(failed)
                await pilot.pause(0.3)
                await save("workflow-failed")
                await back_home()

            # the big fan-out, grouped, once a good part of it has run
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                big = next(iter(engine.list(name="shard-scan", limit=1)), None)
                if big is not None and 60 <= big.succeeded <= 260:
                    await open_workflow(big.id)
                    await save("workflow-groups")
                    await back_home()
                    break
                await pilot.pause(0.5)

            await pilot.press("3")
            await save("events")

            # an agent vanishes: stale after two missed heartbeats, dead when its lease ends
            victim = demo.processes.get("agent-c")
            if victim is not None:
                victim.kill()
            await pilot.press("2")
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                states = {a.id: str(a.state) for a in engine.agents()}
                if states.get("agent-c") == "stale":
                    break
                await pilot.pause(0.2)
            await pilot.pause(1.5)
            await save("agents")
    finally:
        demo.stop()
        engine.redis.close()
        server.stop()
    return saved


async def shoot_rules(out: Path, keep_svg: bool) -> Path:
    """A failure branch: demos/branch.yaml run with its deploy step failing, the
    upstream_failed task selected (its "why" line in the detail)."""
    server = EmbeddedRedis().start()
    engine = make_engine(server.url, "rf")

    def handler(task: Task) -> str:
        if task.name == "deploy":
            raise RuntimeError("deploy: the new version did not start (health check 503)")
        return f"{task.name} done"

    try:
        [wf] = load_file(ROOT / "demos" / "branch.yaml")
        wid = engine.push(wf)
        Agent(engine, "agent-a", {"": handler}, idle_check_s=0.2).run(until_idle=True)
        app = RedisflowApp(engine, label=f"{server.url}")
        async with app.run_test(size=SIZE) as pilot:
            app.goto(wid)
            while not isinstance(app.screen, WorkflowScreen) or not app.screen.query(DagView):
                await pilot.pause(0.1)
            screen = app.screen
            while screen.query_one(DagView).layout_ is None or screen.view.status is None:
                await pilot.pause(0.1)
            table = screen.query_one(TaskTable)
            table.focus()
            table.select_task(2)  # announce: upstream_failed
            await pilot.pause(0.6)
            svg = app.export_screenshot(title="redisflow")
        if keep_svg:
            (out / "workflow-rules.svg").write_text(svg)
        png = out / "workflow-rules.png"
        svg_to_png(svg, png)
        print(f"saved {png}")
        return png
    finally:
        engine.redis.close()
        server.stop()


SCHEDULES = (
    {"name": "nightly-report", "template": "nightly-report", "cron": "0 2 * * *",
     "timezone": "Europe/Paris"},
    {"name": "deploy-eu", "template": "deploy", "every": "15m", "offset": "5m",
     "input": {"scope": "eu-west"}, "overlap": "buffer_one"},
    {"name": "release-train", "template": "release", "cron": "30 9 * * 1-5",
     "timezone": "America/New_York", "overlap": "cancel_other"},
    {"name": "hourly-sync", "template": "nightly-report", "every": "1h", "jitter": "2m"},
    {"name": "q1-audit", "template": "nightly-report", "cron": "0 6 * * 1",
     "end_at": "2024-03-31T00:00"},
)  # fmt: skip


async def shoot_schedules(out: Path, keep_svg: bool) -> Path:
    """Templates & Schedules: the demo's templates, schedules whose last runs succeeded,
    failed, run, wait queued (buffer_one) or were skipped, one paused, one ended."""
    from engine.schedules import parse_schedule

    server = EmbeddedRedis().start()
    engine = make_engine(server.url, "rf")

    def handler(task: Task) -> str:
        scheduled = isinstance(task.input, dict) and task.input.get("schedule")
        if task.name == "gen-report" and scheduled == "nightly-report":
            raise RuntimeError("gen-report: the orders table is locked (timeout after 30 s)")
        return f"{task.name} done"

    try:
        for name in ("report.yaml", "deploy.yaml", "branch.yaml"):
            engine.put_template((ROOT / "demos" / name).read_text(), source=f"demos/{name}")
        for spec in SCHEDULES:
            engine.put_schedule(parse_schedule(spec))
        engine.run("release", None)
        engine.trigger_schedule("nightly-report")
        engine.trigger_schedule("release-train")
        agent = Agent(engine, "agent-a", {"": handler, "io": handler}, idle_check_s=0.2)
        agent.run(until_idle=True)
        engine.pause_schedule("release-train")
        engine.run("deploy", {"scope": "us-east", "version": "1.4.2"})
        for name in ("deploy-eu", "deploy-eu", "hourly-sync", "hourly-sync"):
            engine.trigger_schedule(name)
        app = RedisflowApp(engine, label=f"{server.url}")
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("4")
            while not app.screen.query("#schedules") or (
                app.screen.query_one("#schedules").row_count < len(SCHEDULES)  # type: ignore[attr-defined]
            ):
                await pilot.pause(0.1)
            await pilot.press("tab", "down")
            await pilot.pause(0.6)
            svg = app.export_screenshot(title="redisflow")
        if keep_svg:
            (out / "schedules.svg").write_text(svg)
        png = out / "schedules.png"
        svg_to_png(svg, png)
        print(f"saved {png}")
        return png
    finally:
        engine.redis.close()
        server.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "screenshots"), help="output directory")
    p.add_argument("--keep-svg", action="store_true", help="keep the SVGs next to the PNGs")
    p.add_argument("--warmup", type=float, default=25.0, help="seconds of demo before shooting")
    p.add_argument("--only", choices=["rules", "schedules"], help="take this screenshot alone")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.only is None:
        asyncio.run(shoot(out, args.keep_svg, args.warmup))
    if args.only in (None, "rules"):
        asyncio.run(shoot_rules(out, args.keep_svg))
    if args.only in (None, "schedules"):
        asyncio.run(shoot_schedules(out, args.keep_svg))


if __name__ == "__main__":
    main()
