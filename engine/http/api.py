"""The API's state and its endpoints over one engine (:class:`Api`), and how it answers
(:class:`HttpConfig`): what every route module takes; :mod:`.app` assembles the routes."""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from engine.connect.urls import user_of
from engine.core.model import WorkflowState, WorkflowStatus

from ..errors import (
    DefinitionError,
    NotFoundError,
)
from .auth import Tokens, bearer, require
from .batcher import RunBatcher
from .bodies import (
    check_key,
    check_length,
    check_path_key,
    parse_created,
    parse_cursor,
    parse_json,
    parse_limit,
    parse_wait,
    read_limited,
)
from .errors import HttpError
from .finished import FinishWaiter
from .guard import LOOPBACK_NAMES
from .metrics import registry_for
from .stream import (
    MAX_STREAMS,
    MAX_STREAMS_PER_TOKEN,
    EventFeed,
    StreamSlots,
    deployment_events,
    workflow_events,
)
from .triggers import delivery_key, verify_delivery

if TYPE_CHECKING:
    from ..client import Engine
    from ..store.triggers import Trigger

log = logging.getLogger("redisflow.http")

Endpoint = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class HttpConfig:
    """How the app answers.

    Attributes:
        tokens: bearer tokens by role; none: every caller may read and write.
        max_wait_s: the longest ``?wait=`` accepted.
        max_page: the largest ``limit`` of a workflow list.
        allowed_hosts: the ``Host`` values answered (``NAME`` any port, ``NAME:PORT``,
            ``*`` any); others get 421 (:mod:`.guard`). Default: the loopback names.
        allowed_origins: origins (``https://app.example.com``) whose pages may call the
            API from a browser (CORS); pages of any other origin may not write.
        max_stream_s: the longest an event stream stays open (its client then reconnects
            with ``Last-Event-ID`` and misses nothing).
        max_streams: event streams open at once (each holds a connection): past it a new
            one gets 429; keep it below the server's connection cap, so that writes and
            ``/healthz`` always find a connection.
        max_streams_per_token: event streams one bearer token may hold open (429 past
            it); without tokens only ``max_streams`` applies.
    """

    tokens: Tokens = field(default_factory=Tokens)
    max_wait_s: float = 300.0
    max_page: int = 1000
    allowed_hosts: tuple[str, ...] = LOOPBACK_NAMES
    allowed_origins: tuple[str, ...] = ()
    max_stream_s: float = 3600.0
    max_streams: int = MAX_STREAMS
    max_streams_per_token: int = MAX_STREAMS_PER_TOKEN



class Api:
    """The endpoints of one app, over one engine."""

    def __init__(self, engine: Engine, config: HttpConfig, schema: dict[str, Any]) -> None:
        self.engine = engine
        self.config = config
        self.redis_user = user_of(engine.redis)  # named when Redis refuses a permission
        self.waiter = FinishWaiter(engine)
        self.registry = registry_for(engine)
        self._as_trigger: dict[str, Engine] = {}
        self._batchers: dict[int, RunBatcher] = {}
        slots = StreamSlots(config.max_streams, config.max_streams_per_token)
        self.feed = EventFeed(engine, config.max_stream_s, slots)
        self.schema = schema  # its OpenAPI document (openapi.schema_for)

    @asynccontextmanager
    async def lifespan(self, _: Starlette) -> AsyncIterator[None]:
        yield
        self.waiter.close()
        self.feed.close()

    # -- helpers --------------------------------------------------------------------------

    def auth(self, request: Request, role: str) -> str:
        """Who calls (``token <label>``, or ``anonymous`` with no token configured);
        401/403 unless they may act in ``role``."""
        return require(self.config.tokens, request.headers.get("authorization"), role)

    def caller(self, request: Request) -> str | None:
        """The bearer token of an authorized request, whose event streams are counted
        (None when no token is configured: every caller is then the same)."""
        if not self.config.tokens.configured:
            return None
        return bearer(request.headers.get("authorization"))

    async def body(self, request: Request) -> bytes:
        """The raw body, refused (413) past the engine's payload limit."""
        limit = self.engine.max_payload
        check_length(request.headers.get("content-length"), limit)
        return await read_limited(request.stream(), limit)

    def on(self, endpoint: Callable[[Api, Request], Awaitable[Response]]) -> Endpoint:
        """``endpoint`` (a function of :mod:`.resources`) bound to this API."""

        async def bound(request: Request) -> Response:
            return await endpoint(self, request)

        return bound

    @staticmethod
    def by_method(**endpoints: Endpoint) -> Endpoint:
        """One endpoint answering each method with its own (list the same methods on its
        route: anything else gets 405 naming them)."""
        if "GET" in endpoints:
            endpoints["HEAD"] = endpoints["GET"]

        async def dispatch(request: Request) -> Response:
            return await endpoints[request.method](request)

        return dispatch

    def pushing(self, endpoint: Endpoint, not_found: str) -> Endpoint:
        """``endpoint`` with its refusals counted in ``redisflow_http_rejected_total``
        (``not_found``: the reason of a 404)."""

        async def counted(request: Request) -> Response:
            try:
                return await endpoint(request)
            except HttpError as e:
                if e.reason:
                    await self._count(f"rejected:{e.reason}")
                raise
            except NotFoundError:
                await self._count(f"rejected:{not_found}")
                raise
            except DefinitionError:
                await self._count("rejected:bad_input")
                raise

        return counted

    async def _count(self, name: str) -> None:
        try:
            await run_in_threadpool(self.engine.count_http, name)
        except (redis.RedisError, OSError) as e:  # a count lost is no reason to fail
            log.warning("could not count %s: %s", name, e)

    def batcher(self, engine: Engine) -> RunBatcher:
        """The batcher pushing runs through ``engine`` (one per actor)."""
        batcher = self._batchers.get(id(engine))
        if batcher is None:
            batcher = RunBatcher(engine, redis_user=self.redis_user)
            self._batchers[id(engine)] = batcher
        return batcher

    def engine_as_trigger(self, trigger: Trigger) -> Engine:
        """The engine, recording ``trigger:<name>`` as who pushed (in the pushed events)."""
        eng = self._as_trigger.get(trigger.name)
        if eng is None:
            eng = copy.copy(self.engine)
            eng.actor = f"trigger:{trigger.name}"
            self._as_trigger[trigger.name] = eng
        return eng

    @staticmethod
    def status_url(request: Request, wid: str) -> str:
        return f"{request.scope.get('root_path', '')}/v1/workflows/{wid}"

    async def answer(
        self, request: Request, wid: str, replayed: bool, wait: float | None
    ) -> Response:
        """202 with the new run's id; 200 for a replay; with ``wait``, the run's outcome
        (200 succeeded, 422 failed or cancelled) or 202 when the wait expires."""
        body: dict[str, Any] = {"id": wid, "status_url": self.status_url(request, wid)}
        if replayed:
            body["replayed"] = True
        if wait is None:
            return JSONResponse(body, 200 if replayed else 202)
        state = await self.waiter.wait(wid, wait)
        if not state.finished:
            body["state"] = state.value
            return JSONResponse(body, 202)
        status = await run_in_threadpool(self.engine.status, wid)
        body.update(outcome(status))
        return JSONResponse(body, 200 if status.state == WorkflowState.SUCCEEDED else 422)

    # -- runs -----------------------------------------------------------------------------

    async def run_template(self, request: Request) -> Response:
        """POST /v1/templates/{name}/runs"""
        self.auth(request, "write")
        wait = parse_wait(request.query_params.get("wait"), self.config.max_wait_s)
        key = check_key(request.headers.get("idempotency-key"), "Idempotency-Key")
        value = parse_json(await self.body(request))
        pushed = await self.batcher(self.engine).run(request.path_params["name"], value, key)
        return await self.answer(request, pushed.id, pushed.existing, wait)

    async def deliver(self, request: Request) -> Response:
        """POST /v1/triggers/{name}: verified by the trigger's own scheme."""
        wait = parse_wait(request.query_params.get("wait"), self.config.max_wait_s)
        check_length(request.headers.get("content-length"), self.engine.max_payload)
        trigger = await run_in_threadpool(self.engine.trigger, request.path_params["name"])
        raw = await self.body(request)
        verify_delivery(trigger, request.headers, raw, time.time())
        key = delivery_key(trigger, request.headers)
        value = parse_json(raw)
        try:
            pushed = await self.batcher(self.engine_as_trigger(trigger)).run(
                trigger.template, value, key, trigger.name
            )
        except NotFoundError:
            raise NotFoundError(
                f"trigger {trigger.name} runs template {trigger.template!r}, which does not exist"
            ) from None
        outcome = "duplicate" if pushed.existing else "accepted"
        await self._count(f"{outcome}:{trigger.name}")
        return await self.answer(request, pushed.id, pushed.existing, wait)

    # -- workflows ------------------------------------------------------------------------

    async def workflow(self, request: Request) -> Response:
        """GET /v1/workflows/{id}"""
        self.auth(request, "read")
        status = await run_in_threadpool(self.engine.status, request.path_params["id"])
        return JSONResponse(status.to_dict())

    async def workflow_by_key(self, request: Request) -> Response:
        """GET /v1/workflows/by-key/{key}: the workflow pushed with that idempotency key"""
        self.auth(request, "read")
        key = check_path_key(request.path_params["key"])
        status = await run_in_threadpool(lambda: self.engine.status(key=key))
        return JSONResponse(status.to_dict())

    async def list_workflows(self, request: Request) -> Response:
        """GET /v1/workflows?state=&template=&name=&limit=&cursor=&created_after=&created_before="""
        self.auth(request, "read")
        q = request.query_params
        state = q.get("state")
        if state is not None and state not in {s.value for s in WorkflowState}:
            raise HttpError(
                400, f"state {state!r} is not one of {', '.join(s.value for s in WorkflowState)}"
            )
        limit = parse_limit(q.get("limit"), 50, self.config.max_page)
        offset = parse_cursor(q.get("cursor"))
        name, template = q.get("name") or None, q.get("template") or None
        after = parse_created(q.get("created_after"), "created_after")
        before = parse_created(q.get("created_before"), "created_before")
        rows = await run_in_threadpool(
            lambda: self.engine.list(
                state, name, offset, limit, template,
                created_after=after, created_before=before,
            )
        )  # fmt: skip
        return JSONResponse(
            {
                "workflows": [r.to_dict() for r in rows],
                "next_cursor": str(offset + len(rows)) if len(rows) == limit else None,
            }
        )

    async def control(self, request: Request) -> Response:
        """POST /v1/workflows/{id}/pause|release|cancel|retry"""
        op = request.path_params["op"]
        if op == "events":
            raise HTTPException(405, headers={"Allow": "GET, HEAD"})
        if op not in ("pause", "release", "cancel", "retry"):
            raise HttpError(404, f"no operation {op[:40]!r}: pause, release, cancel or retry")
        self.auth(request, "write")
        wid = request.path_params["id"]
        tasks = None
        if op == "retry":
            given = parse_json(await self.body(request))
            tasks = _task_names(given)
        if op == "retry":
            count = await run_in_threadpool(self.engine.retry, wid, tasks)
        else:
            count = await run_in_threadpool(getattr(self.engine, op), wid)
        return JSONResponse({"id": wid, "op": op, "count": count})

    # -- operations -----------------------------------------------------------------------

    async def events(self, request: Request) -> Response:
        """GET /v1/events (Server-Sent Events)"""
        self.auth(request, "read")
        return await deployment_events(self.feed, request, self.caller(request))

    async def workflow_events(self, request: Request) -> Response:
        """GET /v1/workflows/{id}/events (Server-Sent Events)"""
        self.auth(request, "read")
        return await workflow_events(self.feed, request, self.caller(request))

    async def root(self, request: Request) -> Response:
        """GET /: the API's page"""
        return RedirectResponse(f"{request.scope.get('root_path', '')}/docs", 307)

    async def metrics(self, request: Request) -> Response:
        """GET /metrics"""
        self.auth(request, "read")
        data = await run_in_threadpool(generate_latest, self.registry)
        return Response(data, media_type=CONTENT_TYPE_LATEST)

    async def health(self, _: Request) -> Response:
        """GET /healthz"""
        await run_in_threadpool(self.engine.redis.ping)
        return JSONResponse({"ok": True})



def _task_names(given: Any) -> list[str] | None:
    """``{"tasks": [...]}`` of a retry (None: every failed task)."""
    if given is None:
        return None
    tasks = given.get("tasks") if isinstance(given, dict) else given
    if tasks is None:
        return None
    if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
        raise HttpError(400, 'give the tasks to retry as {"tasks": ["name", ...]}')
    return tasks


def outcome(status: WorkflowStatus) -> dict[str, Any]:
    """A finished run as the waiting caller gets it: its state and its final tasks'
    outputs (the tasks no other task depends on), or its error."""
    out: dict[str, Any] = {"state": status.state.value}
    if status.state == WorkflowState.SUCCEEDED:
        out["outputs"] = {
            t.name: t.output for t in status.tasks if not t.children and t.state == "succeeded"
        }
        return out
    errors = {t.name: t.error for t in status.tasks if t.state == "failed"}
    if status.state == WorkflowState.CANCELLED:
        out["error"] = f"workflow {status.id} was cancelled"
    else:
        unhandled, _ = status.failures()
        first = next((n for n in unhandled if errors.get(n)), None)
        why = f" ({status.reason})" if status.reason else ""
        out["error"] = f"workflow {status.id} failed{why}" + (
            f": task {first}: {_last_line(errors[first])}" if first else ""
        )
    out["errors"] = errors
    return out


def _last_line(error: str | None) -> str:
    return ((error or "").strip().splitlines() or [""])[-1][:500]
