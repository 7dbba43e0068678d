"""``redisflow serve``: the app under uvicorn, in one process or several workers.

Without any token configured the server binds loopback addresses only
(:func:`check_bind`): anyone who can reach it could push and cancel runs.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from dataclasses import dataclass
from typing import Any

from ..errors import DefinitionError
from .app import HttpConfig, create_app
from .auth import Tokens, is_loopback

SETTINGS_ENV = "REDISFLOW_HTTP_SETTINGS"  # how workers learn what the parent was told
PUSH_RETRY_S = 5.0  # a request gives up on an unreachable Redis after this (then 503)


@dataclass(frozen=True)
class Settings:
    """Everything a worker process needs to build the app."""

    url: str | None
    namespace: str
    max_payload: int
    read_tokens: tuple[str, ...] = ()
    write_tokens: tuple[str, ...] = ()
    max_wait_s: float = 300.0

    def config(self) -> HttpConfig:
        tokens = Tokens(frozenset(self.read_tokens), frozenset(self.write_tokens))
        return HttpConfig(tokens=tokens, max_wait_s=self.max_wait_s)


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
    raw["read_tokens"] = tuple(raw["read_tokens"])
    raw["write_tokens"] = tuple(raw["write_tokens"])
    settings = Settings(**raw)
    engine = Engine.connect(
        settings.url,
        namespace=settings.namespace,
        max_payload=settings.max_payload,
        push_retry_s=PUSH_RETRY_S,
    )
    return create_app(engine, settings.config())


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

    check_bind(host, settings.config().tokens)
    if threading.current_thread() is threading.main_thread():
        # uvicorn stops gracefully on SIGTERM, then raises it again: end with exit code 0
        signal.signal(signal.SIGTERM, lambda *_: None)
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "access_log": access_log,
        "log_level": "info",
        "server_header": False,
    }
    if workers > 1 or app is None:
        os.environ[SETTINGS_ENV] = json.dumps(settings.__dict__)
        uvicorn.run("engine.http.server:app_from_env", factory=True, workers=workers, **options)
    else:
        uvicorn.run(app, **options)
