"""Exactly once per tick with several scheduler processes: three of them (two
``redisflow scheduler``, one ``redisflow-agent --scheduler`` that also runs the runs) on
an ``every: 1s`` schedule of 24 ticks, one SIGKILLed midway and Redis restarted from its
append-only file: every tick runs once, none twice."""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis
from chaos import RedisProcess
from engine_helpers import spawn_agent, stop_process, wait_for

from engine import Engine
from engine.schedules import parse_schedule

pytestmark = pytest.mark.slow

TICKS = 24


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def _ticks(server: RedisProcess, name: str) -> list[int]:
    """The fired ticks recorded for ``name`` ([] while Redis is away)."""
    try:
        with Engine.connect(server.url) as engine:
            return engine.store.schedules.fired_ticks(name)
    except (redis.RedisError, OSError, Exception):  # noqa: BLE001 - away: try again
        return []


def test_every_tick_once_with_three_schedulers_a_kill_and_a_restart(tmp_path: Path) -> None:
    # a redis-server of its own (restarted midway): the same with --cluster, so not run there
    server = RedisProcess(tmp_path).start()
    env = {**os.environ, "REDISFLOW_URL": server.url}
    procs = []
    try:
        with Engine.connect(server.url) as engine:
            engine.put_template("name: beat\ntasks:\n  - name: t\n", name="beat")
            first = (engine.store.now_ms() // 1000 + 3) * 1000
            last = first + (TICKS - 1) * 1000
            engine.put_schedule(
                parse_schedule({
                    "name": "beat", "template": "beat", "every": "1s", "catchup": "all",
                    "overlap": "allow_all", "start_at": _iso(first), "end_at": _iso(last),
                })
            )  # fmt: skip
        logs = tmp_path / "logs"
        logs.mkdir()
        for k in range(2):
            procs.append(_spawn_cli(env, f"sched-{k}", logs / f"sched-{k}.log"))
        procs.append(
            spawn_agent(
                "--id", "agent-s", "--handler", "demos.handlers:noop", "--scheduler",
                env=env, log=logs / "agent.log",
            )
        )  # fmt: skip
        wait_for(lambda: len(_ticks(server, "beat")) >= 8, timeout=60, what="8 ticks")
        procs[0].send_signal(signal.SIGKILL)  # one scheduler dies mid-run
        wait_for(lambda: len(_ticks(server, "beat")) >= 14, timeout=60, what="14 ticks")
        server.shutdown()  # a restart: what the append-only file holds comes back
        time.sleep(1.5)  # ticks fall due while Redis is away: caught up after
        server.start()
        wait_for(lambda: len(_ticks(server, "beat")) >= TICKS, timeout=90, what="every tick")
        with Engine.connect(server.url) as engine:
            info = engine.schedule("beat")
            fired = engine.store.schedules.fired_ticks("beat")
            runs = engine.list(limit=1000)
            pushed = sorted(engine.status(r.id).input["tick"] for r in runs)
        assert fired == [first + 1000 * k for k in range(TICKS)]
        assert len(runs) == TICKS
        assert pushed == sorted(_iso(t) for t in fired)
        assert len(set(pushed)) == TICKS  # no tick twice
        assert (info.runs, info.skipped, info.missed) == (TICKS, 0, 0)
        assert info.next_due is None  # ended after its last tick
    finally:
        for p in procs:
            stop_process(p, signal.SIGTERM)
        server.stop()


def _spawn_cli(env: dict[str, str], sid: str, log: Path):  # type: ignore[no-untyped-def]
    import subprocess

    from engine_helpers import BIN, ROOT

    out = log.open("a")
    try:
        return subprocess.Popen(
            [str(BIN / "redisflow"), "scheduler", "--id", sid],
            env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )  # fmt: skip
    finally:
        out.close()
