"""redisflow over HTTP (the optional extra ``redisflow[http]``: Starlette, uvicorn,
prometheus-client).

* :func:`create_app` — the ASGI app (:mod:`.app`), mountable in an app of your own;
* :mod:`.auth` — bearer tokens per role, webhook signature checks (pure functions);
* :mod:`.triggers` — webhook triggers checked at creation and per delivery;
* :mod:`.bodies` — body size limit, JSON errors with line and column, ``?wait=``;
* :mod:`.metrics` — ``GET /metrics``, read from Redis on each scrape;
* :mod:`.server` — ``redisflow serve``: uvicorn, loopback-only without tokens.
"""

from __future__ import annotations

from .api import HttpConfig
from .app import create_app
from .auth import Tokens, load_tokens

__all__ = ["HttpConfig", "Tokens", "create_app", "load_tokens"]
