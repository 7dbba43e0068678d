"""``redisflow serve``: the app under uvicorn, in one process or several workers.

Without any token configured the server binds loopback addresses only
(:func:`check_bind`): anyone who can reach it could push and cancel runs. It answers the
``Host`` names it is bound to (:func:`.guard.default_hosts`), times out slow requests
(:mod:`.protocol`) and caps its open connections (uvicorn's ``limit_concurrency``: 503
beyond it), and its event streams below that (:class:`.stream.StreamSlots`: 429 beyond).
"""

from __future__ import annotations

import json
import os
import signal
import threading
from dataclasses import dataclass
from typing import Any

from ..errors import DefinitionError
from .api import HttpConfig
from .app import create_app
from .auth import Tokens, is_loopback
from .guard import default_hosts
from .protocol import BODY_TIMEOUT_S, HEADER_TIMEOUT_S, TimedHttpProtocol, timed_protocol
from .stream import MAX_STREAMS_PER_TOKEN

SETTINGS_ENV = "REDISFLOW_HTTP_SETTINGS"  # how workers learn what the parent was told
PUSH_RETRY_S = 5.0  # a request gives up on an unreachable Redis after this (then 503)
MAX_CONNECTIONS = 1000  # open connections per server process; past it new requests get 503


@dataclass(frozen=True)
class Settings:
    """Everything a worker process needs to build the app."""

    url: str | None
    namespace: str
    max_payload: int
    read_tokens: tuple[str, ...] = ()
    write_tokens: tuple[str, ...] = ()
    token_labels: tuple[tuple[str, str], ...] = ()  # (token, label)
    max_wait_s: float = 300.0
    max_stream_s: float = 3600.0
    allowed_hosts: tuple[str, ...] = ()  # () : those of the bound address (default_hosts)
    allowed_origins: tuple[str, ...] = ()
    header_timeout_s: float = HEADER_TIMEOUT_S
    body_timeout_s: float = BODY_TIMEOUT_S
    max_connections: int = MAX_CONNECTIONS
    max_streams: int | None = None  # None: half of max_connections (stream_cap)
    max_streams_per_token: int = MAX_STREAMS_PER_TOKEN

    def stream_cap(self) -> int:
        """Event streams this process keeps open: ``max_streams``, by default half the
        connections (at least 1), so that writes and ``/healthz`` find one."""
        if self.max_streams is not None:
            return self.max_streams
        return max(1, self.max_connections // 2)

    def config(self, host: str = "127.0.0.1") -> HttpConfig:
        """The app's config, for a server bound to ``host``."""
        tokens = Tokens(
            frozenset(self.read_tokens), frozenset(self.write_tokens), frozenset(self.token_labels)
        )
        return HttpConfig(
            tokens=tokens,
            max_wait_s=self.max_wait_s,
            max_stream_s=self.max_stream_s,
            allowed_hosts=self.allowed_hosts or default_hosts(host),
            allowed_origins=self.allowed_origins,
            max_streams=self.stream_cap(),
            max_streams_per_token=self.max_streams_per_token,
        )

    def uvicorn_options(self) -> dict[str, Any]:
        """The timeouts and the connection cap as ``uvicorn.Config`` options (for a
        server in this process: workers build theirs in :func:`app_from_env`)."""
        return {
            "http": timed_protocol(self.header_timeout_s, self.body_timeout_s),
            "limit_concurrency": self.max_connections,
        }


def check_streams(max_connections: int, max_streams: int | None) -> None:
    """Refuse (:class:`DefinitionError`) a stream cap that would let streams take every
    connection: it must be below ``max_connections``."""
    if max_streams is not None and max_streams >= max_connections:
        raise DefinitionError(
            f"--max-streams {max_streams} must be below --max-connections {max_connections}: "
            "streams at the connection cap leave no connection for writes and /healthz"
        )


def check_bind(host: str, tokens: Tokens) -> None:
    """Refuse (:class:`DefinitionError`) a non-loopback ``host`` when no token is set."""
    if not tokens.configured and not is_loopback(host):
        raise DefinitionError(
            f"refusing to serve on {host} without tokens: anyone who reaches it could push "
            "and cancel runs; give --token-file FILE (lines 'read TOKEN' / 'write TOKEN') "
            "or REDISFLOW_HTTP_WRITE_TOKEN, or serve on 127.0.0.1"
        )


def app_from_env() -> Any:
    """The app, built from :data:`SETTINGS_ENV` (uvicorn's factory in each worker)."""
    from ..client import Engine

    raw = json.loads(os.environ[SETTINGS_ENV])
    host = raw.pop("host")
    for name in ("read_tokens", "write_tokens", "allowed_hosts", "allowed_origins"):
        raw[name] = tuple(raw[name])
    raw["token_labels"] = tuple((t, label) for t, label in raw.get("token_labels", ()))
    settings = Settings(**raw)
    # this worker process serves this one app: its protocol class takes the timeouts
    TimedHttpProtocol.header_timeout = settings.header_timeout_s
    TimedHttpProtocol.body_timeout = settings.body_timeout_s
    engine = Engine.connect(
        settings.url,
        namespace=settings.namespace,
        max_payload=settings.max_payload,
        push_retry_s=PUSH_RETRY_S,
    )
    return create_app(engine, settings.config(host))


def serve(
    settings: Settings,
    host: str,
    port: int,
    workers: int = 1,
    access_log: bool = False,
    app: Any = None,
) -> None:
    """Run uvicorn until interrupted: ``app`` in this process, or with ``workers`` > 1
    that many processes, each building its own app from ``settings``."""
    import uvicorn

    check_bind(host, settings.config(host).tokens)
    if threading.current_thread() is threading.main_thread():
        # uvicorn stops gracefully on SIGTERM, then raises it again: end with exit code 0
        signal.signal(signal.SIGTERM, lambda *_: None)
    raise_open_files(settings.max_connections)
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "access_log": access_log,
        "log_level": "info",
        "server_header": False,
        **settings.uvicorn_options(),
    }
    if workers > 1 or app is None:
        os.environ[SETTINGS_ENV] = json.dumps({**settings.__dict__, "host": host})
        options["http"] = "engine.http.protocol:TimedHttpProtocol"  # set in app_from_env
        uvicorn.run("engine.http.server:app_from_env", factory=True, workers=workers, **options)
    else:
        uvicorn.run(app, **options)


def raise_open_files(connections: int) -> None:
    """Raise this process's soft limit of open files (up to the hard one) so that
    ``connections`` sockets, plus Redis connections and the rest, fit: past the limit
    uvicorn cannot accept, and the cap's 503 is never sent."""
    try:
        import resource
    except ImportError:  # not on this platform
        return
    want = connections + 256
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        if new > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
