"""Sustained ``POST /v1/templates/{name}/runs`` per second against ``redisflow serve``.

    .venv/bin/python scripts/bench_http.py [--seconds 10] [--connections 64] [--workers 1]

Starts a private redis-server (or uses --url: its namespace is flushed first, so give a
scratch one), stores a three-task template, starts ``redisflow serve`` on a free
loopback port and drives it from a separate load process with keep-alive HTTP/1.1
connections (asyncio over raw sockets: the client must cost less than the server).
Each request carries a small JSON input; runs are only pushed (no agent runs them).
Prints one JSON line: runs/s over the measured window, latency percentiles, status
counts, and the workflows Redis holds afterwards (every 202 must be one workflow).

Traffic goes to 127.0.0.1 only, and both loops end by themselves.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TEMPLATE = """
name: order
tasks:
  - name: fetch
    type: io
  - name: price
    type: cpu
    after: [fetch]
  - name: store
    type: io
    after: [price]
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _connection(
    port: int, path: str, stop_at: float, warm_until: float, out: dict[str, Any]
) -> None:
    """One keep-alive connection sending requests back to back until ``stop_at``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    n = 0
    while True:
        now = time.perf_counter()
        if now >= stop_at:
            break
        body = b'{"order":%d,"customer":"c-%d","lines":[1,2,3]}' % (n, n % 97)
        writer.write(
            b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (path.encode(), len(body), body)
        )
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        if length:
            await reader.readexactly(length)
        done = time.perf_counter()
        n += 1
        if now >= warm_until:
            out["latencies"].append(done - now)
            out["status"][status] = out["status"].get(status, 0) + 1
    writer.close()


def _load(port: int, path: str, connections: int, warm: float, seconds: float, q: Any) -> None:
    """The load process: ``connections`` clients; puts its counts on ``q``."""
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    out: dict[str, Any] = {"latencies": [], "status": {}}

    async def main() -> None:
        start = time.perf_counter()
        stop_at = start + warm + seconds
        await asyncio.gather(
            *(_connection(port, path, stop_at, start + warm, out) for _ in range(connections))
        )

    asyncio.run(main())
    lat = sorted(out["latencies"])
    q.put(
        {
            "ok": out["status"].get(202, 0),
            "status": {str(k): v for k, v in sorted(out["status"].items())},
            "p50_ms": round(lat[len(lat) // 2] * 1000, 2) if lat else None,
            "p99_ms": round(lat[int(len(lat) * 0.99)] * 1000, 2) if lat else None,
        }
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="a scratch Redis (default: a private redis-server)")
    p.add_argument("--seconds", type=float, default=10.0, help="measured window")
    p.add_argument("--warm", type=float, default=2.0, help="seconds of warm-up, not counted")
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--workers", type=int, default=1, help="server processes")
    p.add_argument("--loaders", type=int, default=1, help="load processes")
    args = p.parse_args()

    from engine import EmbeddedRedis, Engine

    server = None
    url = args.url
    if url is None:
        server = EmbeddedRedis().start()
        url = server.url
    engine = Engine.connect(url, namespace="rfbench")
    for key in engine.redis.scan_iter(match="rfbench:*", count=1000):
        engine.redis.delete(key)
    engine.put_template(TEMPLATE)
    port = _free_port()
    env = {**os.environ, "REDISFLOW_URL": url, "REDISFLOW_NAMESPACE": "rfbench"}
    serve = subprocess.Popen(
        [str(BIN / "redisflow"), "serve", "--port", str(port), "--workers", str(args.workers)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or serve.poll() is not None:
                    raise SystemExit("the server did not start") from None
                time.sleep(0.1)
        time.sleep(0.5 * args.workers)  # every worker up
        q: Any = mp.get_context("spawn").Queue()
        per = max(1, args.connections // args.loaders)
        loaders = [
            mp.get_context("spawn").Process(
                target=_load,
                args=(port, "/v1/templates/order/runs", per, args.warm, args.seconds, q),
            )
            for _ in range(args.loaders)
        ]
        for proc in loaders:
            proc.start()
        results = [q.get(timeout=args.warm + args.seconds + 120) for _ in loaders]
        for proc in loaders:
            proc.join(30)
    finally:
        os.kill(serve.pid, signal.SIGTERM)
        serve.wait(30)
    ok = sum(r["ok"] for r in results)
    report = {
        "runs_per_s": round(ok / args.seconds),
        "seconds": args.seconds,
        "connections": per * args.loaders,
        "workers": args.workers,
        "loaders": args.loaders,
        "status": results[0]["status"] if len(results) == 1 else [r["status"] for r in results],
        "p50_ms": results[0]["p50_ms"],
        "p99_ms": results[0]["p99_ms"],
        "workflows_stored": engine.count(),
        "redis_version": engine.redis.info("server")["redis_version"],
    }
    print(json.dumps(report))
    engine.close()
    if server is not None:
        server.stop()


if __name__ == "__main__":
    main()
