"""The schedule benchmark: N schedules due in the same second, ticked by K schedulers.

``python -m demos.schedule_bench --schedules 10000 --schedulers 2`` stores a one-task
template and N hourly schedules (overlap skip: every tick checks the gate), makes them
all due at the same whole second a few seconds ahead, starts K ``redisflow scheduler``
processes and waits until every schedule has fired. It prints how long after the due
second the last run was pushed (the runs' creation times, Redis's clock), that each
schedule ran once, and how the ticks were shared. Without ``--url`` it runs on a private
redis-server.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from engine import EmbeddedRedis, Engine
from engine.schedules import parse_schedule

BIN = Path(sys.executable).parent


def setup(engine: Engine, n: int) -> int:
    """Store the template and ``n`` schedules, all due at one whole second; returns it."""
    engine.put_template("name: bench\ntasks:\n  - name: t\n", name="bench")
    for k in range(n):
        engine.put_schedule(parse_schedule({"name": f"b{k}", "template": "bench", "every": "1h"}))
    due = (engine.store.now_ms() // 1000 + 4) * 1000
    pipe = engine.redis.pipeline(transaction=False)
    for k in range(n):
        name = f"b{k}"
        shard = engine.keys.shard_of_schedule(name)
        pipe.hset(shard.schedule(name), mapping={"nt": due, "nx": due})
        pipe.zadd(shard.schedules_due, {name: due})
    pipe.execute()
    return due


def _redis_cpu(engine: Engine) -> float:
    info = engine.redis.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _proc_cpu(pid: int) -> float:
    """CPU seconds a process used (Linux /proc; 0 elsewhere), its start included."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(url: str, n: int, schedulers: int) -> dict[str, Any]:
    with Engine.connect(url) as engine:
        engine.redis.flushdb()
        t0 = time.monotonic()
        due = setup(engine, n)
        setup_s = time.monotonic() - t0
        env = {**os.environ, "REDISFLOW_URL": url}
        logs = Path(tempfile.mkdtemp(prefix="rf-sched-bench-"))
        procs = [
            subprocess.Popen(
                [str(BIN / "redisflow"), "scheduler", "--id", f"s{k}"],
                env=env,
                stdout=(logs / f"s{k}.log").open("w"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            for k in range(schedulers)
        ]
        try:
            cpu0 = _redis_cpu(engine)
            while True:
                left = sum(
                    int(engine.redis.zcount(s.schedules_due, "-inf", due))
                    for s in engine.keys.all_shards()
                )
                if left == 0 and engine.store.now_ms() > due:
                    break
                time.sleep(0.05)
            pipe = engine.redis.pipeline(transaction=False)
            ids: list[str] = []
            for s in engine.keys.all_shards():
                ids += engine.redis.zrange(s.all, 0, -1)
            for wid in ids:
                pipe.hmget(engine.keys.shard_of(wid).workflow(wid), ["ct", "sn"])
            rows = pipe.execute()
            created = [int(ct) for ct, _ in rows]
            per_schedule = Counter(sn for _, sn in rows)
            redis_cpu = _redis_cpu(engine) - cpu0
            sched_cpu = sum(_proc_cpu(p.pid) for p in procs)
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(30)
        by, left = {}, {}  # each scheduler says what it did as it stops
        for k in range(schedulers):
            text = (logs / f"s{k}.log").read_text()
            found = re.search(r"(\d+) runs pushed, (\d+) ticks left", text)
            by[f"s{k}"] = int(found.group(1)) if found else None
            left[f"s{k}"] = int(found.group(2)) if found else None
    return {
        "schedules": n,
        "schedulers": schedulers,
        "runs": len(rows),
        "each_once": len(per_schedule) == n and set(per_schedule.values()) == {1},
        "first_run_after_due_s": round((min(created) - due) / 1000, 3),
        "last_run_after_due_s": round((max(created) - due) / 1000, 3),
        "pushed_by": by,
        "refused_calls_by": left,
        "redis_cpu_s": round(redis_cpu, 2),
        "schedulers_cpu_s": round(sched_cpu, 2),
        "load_avg_1m": os.getloadavg()[0],
        "setup_s": round(setup_s, 1),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m demos.schedule_bench", description=__doc__)
    p.add_argument("--schedules", type=int, default=10_000)
    p.add_argument("--schedulers", type=int, default=2)
    p.add_argument("--url", default=os.environ.get("REDISFLOW_URL"))
    args = p.parse_args(argv)
    if args.url:
        print(json.dumps(measure(args.url, args.schedules, args.schedulers)))
        return
    with EmbeddedRedis() as server:
        print(json.dumps(measure(server.url, args.schedules, args.schedulers)))


if __name__ == "__main__":
    main()
