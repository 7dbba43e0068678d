"""Measure the console's keypress-to-screen latency, idle and under load.

Runs ``redisflow-tui`` in a pseudo-terminal (160x45) against a private redis-server,
presses keys that change the screen in a recognisable way (switch screens, cycle the
state filter, open help) and times each key from the write to the pty until the
terminal output holds the expected text. Then starts ``redisflow-demo`` at full speed
on the same Redis and measures again::

    python tests/tui/measure_latency.py [--rounds 30] [--workflows 200000]

Not a test (no ``test_`` prefix): it prints a small report.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine import EmbeddedRedis  # noqa: E402

ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]|\x1b[=>]|\x1b\][^\x07]*\x07")
# key, text that shows the key took effect
STEPS = [
    ("2", "Heartbeat"),
    ("1", "Done/Total"),
    ("s", "running workflows"),
    ("s", "paused workflows"),
    ("escape", "all workflows"),
    ("3", "space freezes"),
    ("1", "Done/Total"),
    ("?", "console — keys"),
    ("escape", "Done/Total"),
]
KEYS = {"escape": b"\x1b", "?": b"?"}


class Terminal:
    """The console in a pty, with a reader thread collecting its output."""

    def __init__(self, argv: list[str], env: dict[str, str], size: tuple[int, int]) -> None:
        pid, fd = pty.fork()
        if pid == 0:
            os.execvpe(argv[0], argv, env)
        self.pid, self.fd = pid, fd
        cols, rows = size
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self._lock = threading.Lock()
        self._chunks: list[tuple[float, bytes]] = []
        self._alive = True
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while self._alive:
            r, _, _ = select.select([self.fd], [], [], 0.2)
            if not r:
                continue
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self._chunks.append((time.perf_counter(), data))

    def mark(self) -> int:
        with self._lock:
            return len(self._chunks)

    def wait_text(self, since: int, text: str, timeout: float) -> float | None:
        """When ``text`` first appeared in the output after chunk ``since``."""
        want = text.encode()
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            with self._lock:
                chunks = self._chunks[since:]
            plain = b""
            for ts, data in chunks:
                plain += ANSI.sub(b"", data)
                if want in plain:
                    return ts
            time.sleep(0.002)
        return None

    def press(self, key: str) -> float:
        os.write(self.fd, KEYS.get(key, key.encode()))
        return time.perf_counter()

    def close(self) -> None:
        self._alive = False
        try:
            os.write(self.fd, b"\x11")  # ctrl+q
            time.sleep(0.5)
            os.kill(self.pid, signal.SIGTERM)
        except OSError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def measure(
    term: Terminal, rounds: int, per_key: dict[str, list[float]] | None = None
) -> list[float]:
    out: list[float] = []
    for r in range(rounds):
        for key, text in STEPS:
            since = term.mark()
            time.sleep(0.05)  # let any frame in flight finish first
            since = term.mark()
            t0 = term.press(key)
            seen = term.wait_text(since, text, timeout=10)
            if seen is None:
                print(f"  round {r}: {key!r} never showed {text!r}")
                continue
            out.append((seen - t0) * 1000)
            if per_key is not None:
                per_key.setdefault(f"{key}->{text}", []).append(out[-1])
            time.sleep(0.15)
    return out


def report(label: str, ms: list[float]) -> None:
    if not ms:
        print(f"{label}: no samples")
        return
    ms = sorted(ms)
    p = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]  # noqa: E731
    print(
        f"{label}: n={len(ms)} median {statistics.median(ms):.0f} ms · p90 {p(0.9):.0f} ms"
        f" · p99 {p(0.99):.0f} ms · max {ms[-1]:.0f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--workflows", type=int, default=200_000)
    ap.add_argument("--agents", type=int, default=2)
    args = ap.parse_args()
    py = sys.executable
    server = EmbeddedRedis().start()
    env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor", PYTHONUNBUFFERED="1")
    env.pop("TEXTUAL", None)
    term = Terminal([py, "-m", "redisflow_tui", "--url", server.url], env, (160, 45))
    load = None
    try:
        if term.wait_text(0, "live", timeout=20) is None:
            sys.exit("the console did not start")
        time.sleep(1.0)
        keys: dict[str, list[float]] = {}
        report("idle", measure(term, max(3, args.rounds // 4), keys))
        for k, v in keys.items():
            report(f"  {k}", v)
        demo = shutil.which("redisflow-demo", path=str(Path(py).parent)) or "redisflow-demo"
        load = subprocess.Popen(
            [
                demo,
                "--url",
                server.url,
                "--workflows",
                str(args.workflows),
                "--shape",
                "fan10",
                "--agents",
                str(args.agents),
                "--json",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(5.0)
        keys = {}
        report(
            f"under redisflow-demo ({args.workflows:,} fan10 workflows, {args.agents} agents)",
            measure(term, args.rounds, keys),
        )
        for k, v in keys.items():
            report(f"  {k}", v)
        done = _processed(server.url)
        print(f"tasks finished meanwhile: {done:,}")
    finally:
        if load is not None:
            load.terminate()
            load.wait(10)
        term.close()
        server.stop()


def _processed(url: str) -> int:
    import redis

    from engine import Engine

    e = Engine(redis.Redis.from_url(url, decode_responses=True))
    st = e.stats()
    return st.tasks.get("succeeded", 0) + st.tasks.get("failed", 0)


if __name__ == "__main__":
    main()
