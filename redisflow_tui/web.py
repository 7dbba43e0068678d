"""``redisflow-tui --serve``: the console in a browser (textual-serve), behind a token,
loading nothing from another host.

textual-serve's page asks Google Fonts for Roboto Mono; the fonts ship in its own static
folder, so the page is served with an ``@font-face`` pointing there instead. Every
request needs the token: ``/?token=T`` once (it is then kept in a cookie for this host,
``HttpOnly``, ``SameSite=Strict``, and the address bar is cleared of it), or
``Authorization: Bearer T``; anything else gets 401. The websocket that drives the
console is also refused to pages of another origin. The access log names each request by
its path alone (:class:`PathAccessLogger`): the token in ``/?token=T`` never reaches it.
"""

from __future__ import annotations

import asyncio
import copy
import hmac
import os
import re
import secrets
import shlex
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp_jinja2
import jinja2
from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.web_request import BaseRequest
from textual_serve.server import Server

from .data import WORKFLOW_ID

TOKEN_ENV = "REDISFLOW_TUI_TOKEN"
COOKIE = "redisflow_console"
MIN_TOKEN = 16
_FONT_LINK = re.compile(r"<link[^>]*href=\"https?://[^\"]*\"[^>]*/?>", re.S)
_LOCAL_FONT = """<style>
      @font-face { font-family: "Roboto Mono"; font-style: normal;
        src: url("{{ config.static.url }}fonts/RobotoMono-VariableFont_wght.ttf"); }
      @font-face { font-family: "Roboto Mono"; font-style: italic;
        src: url("{{ config.static.url }}fonts/RobotoMono-Italic-VariableFont_wght.ttf"); }
    </style>"""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def read_token(path: str | None, env: dict[str, str] | None = None) -> str | None:
    """The console's token: from ``path`` (its first line), else ``REDISFLOW_TUI_TOKEN``;
    None when neither gives one. Raises :class:`ValueError` naming the file or variable
    for one shorter than 16 characters or not printable ASCII."""
    env = dict(os.environ) if env is None else env
    where, value = TOKEN_ENV, env.get(TOKEN_ENV, "").strip()
    if path is not None:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"{path}: cannot read the token file ({e})") from None
        where, value = path, (lines[0].strip() if lines else "")
    if not value:
        if path is not None:
            raise ValueError(f"{path}: the token file is empty")
        return None
    if len(value) < MIN_TOKEN or not value.isascii() or not value.isprintable() or " " in value:
        raise ValueError(
            f"{where}: a token is at least {MIN_TOKEN} printable ASCII characters, no spaces"
        )
    return value


def new_token() -> str:
    """A random token for a server started without one."""
    return secrets.token_urlsafe(24)


def local_page(template: str) -> str:
    """textual-serve's page with its links to other hosts (Google Fonts) replaced by the
    fonts it ships."""
    return _FONT_LINK.sub(_LOCAL_FONT, template, count=1)


def _same(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def token_guard(token: str) -> Any:
    """An aiohttp middleware letting through only requests that carry ``token``."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if _same(request.query.get("token"), token):
            if request.path == "/" and request.method == "GET":  # keep it out of the URL
                kept = [(k, v) for k, v in request.query.items() if k != "token"]
                page = web.HTTPFound(str(request.rel_url.with_query(kept)) if kept else "/")
                page.set_cookie(COOKIE, token, httponly=True, samesite="Strict", path="/")
                raise page
            return await handler(request)
        header = request.headers.get("Authorization", "")
        scheme, _, given = header.partition(" ")
        ok = _same(request.cookies.get(COOKIE), token) or (
            scheme.lower() == "bearer" and _same(given.strip(), token)
        )
        if not ok:
            return web.Response(
                status=401,
                text="redisflow console: open the address printed at start "
                "(http://HOST:PORT/?token=...)\n",
            )
        origin = request.headers.get("Origin")
        if _is_socket(request.path) and origin is not None:
            own = {f"http://{request.host}", f"https://{request.host}"}
            if origin.lower().rstrip("/") not in own:
                return web.Response(status=403, text="a page of another origin\n")
        return await handler(request)

    return guard


def _is_socket(path: str) -> bool:
    """Whether ``path`` is a websocket that drives a console (``/ws``, ``/ws/<id>``)."""
    return path == "/ws" or path.startswith("/ws/")


def linked_workflow(query: Any) -> str | None:
    """The workflow a page's address links to (``?workflow=ID``), if it is an id."""
    wid = str(query.get("workflow", "")).strip()
    return wid if WORKFLOW_ID.fullmatch(wid) else None


class PathAccessLogger(AbstractAccessLogger):
    """aiohttp's access log with each request named by its path alone: its query (where
    the console's ``?token=`` is) stays out of the log."""

    def log(self, request: BaseRequest, response: web.StreamResponse, time: float) -> None:
        self.logger.info(
            '%s "%s %s" %d %.3fs',
            request.remote,
            request.method,
            request.path,
            response.status,
            time,
        )


class ConsoleServer(Server):
    """textual-serve's server with the token guard and a page that loads nothing from
    elsewhere; its links follow the address the browser used (any ``--host``)."""

    def __init__(self, command: str, host: str, port: int, token: str) -> None:
        super().__init__(command, host=host, port=port, title="redisflow")
        self.token = token

    async def _make_app(self) -> web.Application:
        app: web.Application = await super()._make_app()
        # a page linked to a workflow drives a console opened on it: textual-serve hands
        # the app nothing of the page's address, so the websocket's path carries the id
        app.router.add_get("/ws/{wid}", self.handle_linked_websocket, name="linked-websocket")
        page = (Path(self.templates_path) / "app_index.html").read_text(encoding="utf-8")
        loader = jinja2.DictLoader({"app_index.html": local_page(page)})
        aiohttp_jinja2.setup(app, loader=loader)
        app.middlewares.append(token_guard(self.token))
        return app

    def serve(self, debug: bool = False) -> None:
        """Serve until interrupted, as textual-serve does, with :class:`PathAccessLogger`
        as the access log (aiohttp's own logs each request's query, the token with it)."""
        self.debug = debug
        self.initialize_logging()
        loop = asyncio.new_event_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, self.request_exit)
            loop.add_signal_handler(signal.SIGTERM, self.request_exit)
        except NotImplementedError:  # not on this platform
            pass
        web.run_app(
            self._make_app(),
            host=self.host,
            port=self.port,
            handle_signals=False,
            loop=loop,
            print=lambda *_: None,
            access_log_class=PathAccessLogger,
        )

    async def handle_index(self, request: web.Request) -> Any:
        # the links in the page (static files, the websocket) as the browser reached us,
        # not the bound address (0.0.0.0 is no address a browser can open)
        self.public_url = f"{request.scheme}://{request.host}"
        # textual-serve's page context (its handler is wrapped to render it), then the page
        context = await Server.handle_index.__wrapped__(self, request)  # type: ignore[attr-defined]
        wid = linked_workflow(request.query)
        if wid is not None:  # ?workflow=ID: its console opens on that workflow
            context["app_websocket_url"] += f"/{wid}"
        return aiohttp_jinja2.render_template("app_index.html", request, context)

    async def handle_linked_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """The websocket of a page linked to a workflow: a console run with ``--open``."""
        wid = linked_workflow({"workflow": request.match_info["wid"]})
        if wid is None:
            raise web.HTTPNotFound(text="not a workflow id\n")
        linked = copy.copy(self)  # this connection's command only, the rest shared
        linked.command = f"{self.command} --open {shlex.quote(wid)}"
        return await Server.handle_websocket(linked, request)
