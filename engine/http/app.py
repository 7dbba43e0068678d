"""The ASGI app: run templates, deliver webhooks, read and steer workflows, metrics.

``create_app(engine, config)`` returns a Starlette app; serve it with uvicorn
(``redisflow serve``) or mount it in an ASGI app of your own::

    from starlette.routing import Mount
    app = Starlette(routes=[Mount("/flows", create_app(Engine.connect(url)))])

Endpoints are async; each Redis call runs in the threadpool (the engine is synchronous)
and a ``?wait=`` holds no thread while it waits (:mod:`.finished`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import redis
from starlette.applications import Starlette
from starlette.convertors import PathConvertor, register_url_convertor
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..errors import (
    DefinitionError,
    NotFoundError,
    NotReplicatedError,
    StateError,
    UnreachableError,
)
from ..ops.refusals import server_refusal
from . import resources, signals
from .agents import drain_agent
from .api import Api
from .api import HttpConfig as HttpConfig  # its home before: still named here
from .api import outcome as outcome
from .bulk import bulk_action
from .errors import HttpError
from .guard import Guard, GuardConfig
from .logs import task_logs
from .openapi import docs, openapi_document, schema_for

if TYPE_CHECKING:
    from ..client import Engine

log = logging.getLogger("redisflow.http")



class Anything(PathConvertor):
    """The rest of the path, line breaks and slashes too: an idempotency key is any text
    (``path`` stops at a line break, and the request then met another route's 405)."""

    regex = "(?s:.+)"


register_url_convertor("anything", Anything())

def create_app(engine: Engine, config: HttpConfig | None = None) -> Starlette:
    """The redisflow HTTP API over ``engine`` as a Starlette app (see the module doc)."""
    config = config or HttpConfig()
    api = Api(engine, config, schema_for(config.tokens.configured))
    r = resources
    routes = [
        Route("/", api.root, methods=["GET"]),
        Route("/v1/templates", api.on(r.list_templates), methods=["GET"]),
        Route(
            "/v1/templates/{name}",
            api.by_method(
                GET=api.on(r.get_template),
                PUT=api.on(r.put_template),
                DELETE=api.on(r.delete_template),
            ),
            methods=["GET", "PUT", "DELETE"],
        ),
        Route(
            "/v1/templates/{name}/runs",
            api.pushing(api.run_template, "unknown_template"),
            methods=["POST"],
        ),
        Route("/v1/rate-limits", api.on(r.list_rate_limits), methods=["GET"]),
        Route(
            "/v1/rate-limits/{type}",
            api.by_method(PUT=api.on(r.put_rate_limit), DELETE=api.on(r.delete_rate_limit)),
            methods=["PUT", "DELETE"],
        ),
        Route("/v1/schedules", api.on(r.list_schedules), methods=["GET"]),
        Route(
            "/v1/schedules/{name}",
            api.by_method(
                GET=api.on(r.get_schedule),
                PUT=api.on(r.put_schedule),
                DELETE=api.on(r.delete_schedule),
            ),
            methods=["GET", "PUT", "DELETE"],
        ),
        Route("/v1/schedules/{name}/pause", api.on(r.pause_schedule), methods=["POST"]),
        Route("/v1/schedules/{name}/unpause", api.on(r.unpause_schedule), methods=["POST"]),
        Route("/v1/schedules/{name}/trigger", api.on(r.trigger_schedule), methods=["POST"]),
        Route("/v1/triggers", api.on(r.list_triggers), methods=["GET"]),
        Route(
            "/v1/triggers/{name}",
            api.by_method(
                GET=api.on(r.get_trigger),
                PUT=api.on(r.put_trigger),
                DELETE=api.on(r.delete_trigger),
                POST=api.pushing(api.deliver, "unknown_trigger"),
            ),
            methods=["GET", "PUT", "DELETE", "POST"],
        ),
        Route("/v1/agents", api.on(r.list_agents), methods=["GET"]),
        Route("/v1/agents/{id}/drain", api.on(drain_agent), methods=["POST"]),
        Route("/v1/events", api.events, methods=["GET"]),
        Route(
            "/v1/workflows",
            api.by_method(GET=api.list_workflows, POST=api.on(r.push_workflow)),
            methods=["GET", "POST"],
        ),
        Route("/v1/workflows/by-key/{key:anything}", api.workflow_by_key, methods=["GET"]),
        Route("/v1/workflows/{id}", api.workflow, methods=["GET"], name="workflow"),
        Route("/v1/workflows/{id}/events", api.workflow_events, methods=["GET"]),
        Route("/v1/workflows/{id}/tasks/{name}/logs", api.on(task_logs), methods=["GET"]),
        Route(
            "/v1/workflows/{id}/signals/{name}", api.on(signals.signal_workflow), methods=["POST"]
        ),
        Route("/v1/signals/{name}", api.on(signals.signal_by_key), methods=["POST"]),
        Route("/v1/workflows/{id}/{op}", api.control, methods=["POST"]),
        Route("/v1/bulk", api.on(bulk_action), methods=["POST"]),
        Route("/metrics", api.metrics, methods=["GET"]),
        Route("/healthz", api.health, methods=["GET"]),
        Route("/openapi.json", api.on(openapi_document), methods=["GET"]),
        Route("/docs", api.on(docs), methods=["GET"]),
    ]
    config = api.config
    middleware = []
    if config.allowed_origins:  # their pages may call the API: answer CORS preflights
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(config.allowed_origins),
                allow_methods=["GET", "POST", "PUT", "DELETE"],
                allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID"],
            )
        )
    guard = GuardConfig(config.allowed_hosts, config.allowed_origins)
    middleware.append(Middleware(Guard, config=guard))
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers=_HANDLERS,
        lifespan=api.lifespan,
    )
    app.state.redisflow = api
    return app


# -- errors: every one is JSON {"error": ...} -------------------------------------------


def _json_error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status)


async def _http_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, HttpError)
    return _json_error(exc.status, exc.message)


async def _starlette_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    # its headers too: a 405 names the methods allowed (Allow, RFC 9110)
    return JSONResponse({"error": str(exc.detail)}, exc.status_code, headers=exc.headers)


async def _not_found(_: Request, exc: Exception) -> Response:
    return _json_error(404, str(exc))


async def _conflict(_: Request, exc: Exception) -> Response:
    return _json_error(409, str(exc))


async def _bad_input(_: Request, exc: Exception) -> Response:
    return _json_error(400, str(exc))


async def _unreachable(_: Request, exc: Exception) -> Response:
    return _json_error(503, f"Redis unreachable: {exc}")


async def _not_replicated(_: Request, exc: Exception) -> Response:
    return _json_error(503, str(exc))


async def _redis_refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, redis.ResponseError)
    api = getattr(request.app.state, "redisflow", None)
    message = server_refusal(exc, api.redis_user if api is not None else None)
    if message is None:
        return await _internal(request, exc)
    return _json_error(503, message)


async def _gone(_: Request, exc: Exception) -> Response:
    """The client went away mid-request (its body cut short): nobody reads an answer,
    and it is no error of the server's: nothing logged."""
    return Response(status_code=400)


async def _internal(_: Request, exc: Exception) -> Response:
    log.error("internal error: %r", exc)
    return _json_error(500, "internal error (see the server's log)")


_HANDLERS: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
    HttpError: _http_error,
    HTTPException: _starlette_error,
    NotFoundError: _not_found,
    StateError: _conflict,
    DefinitionError: _bad_input,
    UnreachableError: _unreachable,
    NotReplicatedError: _not_replicated,
    redis.ConnectionError: _unreachable,
    redis.TimeoutError: _unreachable,
    redis.ResponseError: _redis_refused,
    ClientDisconnect: _gone,
    Exception: _internal,
}
