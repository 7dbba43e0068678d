"""The stored things of a deployment over HTTP, as the CLI manages them: templates,
schedules, webhook triggers (their secrets never answered), agents, and workflows pushed
from a workflow file's JSON.

Each endpoint takes the :class:`~engine.http.api.Api` it serves; reads need a read token,
writes a write token (when tokens are configured). A body is checked whole before
anything is written: a bad one gets 400 naming what and where.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from engine.spec.loader import load_text

from ..errors import DefinitionError, NotFoundError
from ..schedules.spec import parse_schedule
from .bodies import check_key, parse_json, parse_wait
from .errors import HttpError
from .triggers import new_trigger

if TYPE_CHECKING:
    from ..schedules import ScheduleInfo
    from .api import Api

BODY = "body.json"  # how a body is named in its errors (body.json:3: task 'x': ...)


def schedule_dict(info: ScheduleInfo) -> dict[str, Any]:
    """A schedule as ``redisflow schedule show --json`` prints it."""
    out = {k: v for k, v in info.__dict__.items() if k != "spec"}
    out["description"] = info.description
    spec = info.spec.__dict__.copy()
    spec.pop("paused", None)
    out["spec"] = spec
    return out


async def _text(api: Api, request: Request) -> str:
    raw = await api.body(request)
    if not raw.strip():
        raise HttpError(400, "the body is empty: send the definition as JSON")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise HttpError(400, f"the body is not UTF-8 (byte {e.start})", "bad_json") from None


async def _object(api: Api, request: Request, what: str) -> dict[str, Any]:
    value = parse_json(await api.body(request))
    if not isinstance(value, dict):
        raise HttpError(400, f"send {what} as a JSON object")
    return value


# -- templates ------------------------------------------------------------------------


async def list_templates(api: Api, request: Request) -> Response:
    """GET /v1/templates"""
    api.auth(request, "read")
    rows = await run_in_threadpool(api.engine.templates)
    return JSONResponse({"templates": [t.to_dict() for t in rows]})


async def get_template(api: Api, request: Request) -> Response:
    """GET /v1/templates/{name}?version="""
    api.auth(request, "read")
    given = request.query_params.get("version")
    version = None
    if given is not None:
        if not given.isascii() or not given.isdigit() or len(given) > 9 or int(given) < 1:
            raise HttpError(400, f"version {given[:40]!r} is not a whole number from 1")
        version = int(given)
    info = await run_in_threadpool(api.engine.template, request.path_params["name"], version)
    return JSONResponse(info.to_dict())


async def put_template(api: Api, request: Request) -> Response:
    """PUT /v1/templates/{name}: the body is the workflow file's JSON."""
    api.auth(request, "write")
    text = await _text(api, request)
    name = request.path_params["name"]
    info = await run_in_threadpool(lambda: api.engine.put_template(text, name=name, source=BODY))
    body: dict[str, Any] = {"name": info.name, "version": info.version, "new": info.new}
    if info.warnings:  # a template that runs itself
        body["warnings"] = info.warnings
    return JSONResponse(body, 201 if info.new else 200)


async def delete_template(api: Api, request: Request) -> Response:
    """DELETE /v1/templates/{name}"""
    api.auth(request, "write")
    name = request.path_params["name"]
    await run_in_threadpool(api.engine.remove_template, name)
    return JSONResponse({"removed": name})


# -- rate limits ----------------------------------------------------------------------


async def list_rate_limits(api: Api, request: Request) -> Response:
    """GET /v1/rate-limits: the deployment's rate limits, by task type."""
    api.auth(request, "read")
    limits = await run_in_threadpool(api.engine.rate_limits)
    return JSONResponse({"rate_limits": {t: r.as_dict() for t, r in limits.items()}})


async def put_rate_limit(api: Api, request: Request) -> Response:
    """PUT /v1/rate-limits/{type}: the body is ``{key, limit, per, burst}``; checked whole
    first (400 naming what), for runs pushed from then on."""
    from engine.spec.rate_limits import rate_limit_from

    api.auth(request, "write")
    data = await _object(api, request, "the rate limit {key, limit, per, burst}")
    typ = request.path_params["type"]
    r = rate_limit_from(data, f"{BODY}: rate limit of type {typ!r}")
    assert r is not None
    await run_in_threadpool(
        lambda: api.engine.put_rate_limit(typ, key=r.key, limit=r.limit, per=r.per, burst=r.burst)
    )
    return JSONResponse({"type": typ, **r.as_dict()})


async def delete_rate_limit(api: Api, request: Request) -> Response:
    """DELETE /v1/rate-limits/{type} (404 when it has none)."""
    api.auth(request, "write")
    typ = request.path_params["type"]
    await run_in_threadpool(api.engine.delete_rate_limit, typ)
    return JSONResponse({"removed": typ})


# -- workflows pushed from a definition -----------------------------------------------


async def push_workflow(api: Api, request: Request) -> Response:
    """POST /v1/workflows: the body is one workflow in the native file format, as JSON;
    validated as ``redisflow push`` validates a file (400 naming what and where)."""
    from engine.spec.flow import RunRequest

    api.auth(request, "write")
    wait = parse_wait(request.query_params.get("wait"), api.config.max_wait_s)
    key = check_key(request.headers.get("idempotency-key"), "Idempotency-Key")
    text = await _text(api, request)
    engine = api.engine

    def push() -> tuple[str, bool]:
        workflows = load_text(text, BODY)
        if len(workflows) != 1:
            raise DefinitionError(
                f"{BODY}: one workflow per request; this body has {len(workflows)}"
            )
        pushed = engine.push_runs([RunRequest(engine.compile(workflows[0]), None, key=key)])[0]
        return pushed.id, pushed.existing

    wid, existing = await run_in_threadpool(push)
    return await api.answer(request, wid, existing, wait)


# -- schedules ------------------------------------------------------------------------


async def list_schedules(api: Api, request: Request) -> Response:
    """GET /v1/schedules"""
    api.auth(request, "read")
    rows = await run_in_threadpool(api.engine.schedules)
    return JSONResponse({"schedules": [schedule_dict(i) for i in rows]})


async def get_schedule(api: Api, request: Request) -> Response:
    """GET /v1/schedules/{name}"""
    api.auth(request, "read")
    info = await run_in_threadpool(api.engine.schedule, request.path_params["name"])
    return JSONResponse(schedule_dict(info))


async def put_schedule(api: Api, request: Request) -> Response:
    """PUT /v1/schedules/{name}: the body is the schedule's settings as in a schedule
    file (``template``, ``cron`` or ``every``, ...); ``name`` is the path's."""
    api.auth(request, "write")
    data = await _object(api, request, "the schedule's settings")
    name = request.path_params["name"]
    if "name" in data and data["name"] != name:
        raise HttpError(400, f"{BODY}: name {str(data['name'])[:100]!r} is not the path's {name!r}")
    spec = parse_schedule({**data, "name": name}, BODY)
    engine = api.engine

    def put() -> bool:
        try:
            engine.template(spec.template)
        except NotFoundError:
            raise DefinitionError(
                f"{BODY}: schedule {name!r}: template: {spec.template!r} does not exist"
            ) from None
        return engine.put_schedule(spec)

    new = await run_in_threadpool(put)
    return JSONResponse({"name": name, "new": new}, 201 if new else 200)


async def delete_schedule(api: Api, request: Request) -> Response:
    """DELETE /v1/schedules/{name}"""
    api.auth(request, "write")
    name = request.path_params["name"]
    await run_in_threadpool(api.engine.schedule, name)  # 404 when there is none
    await run_in_threadpool(api.engine.remove_schedule, name)
    return JSONResponse({"removed": name})


async def pause_schedule(api: Api, request: Request) -> Response:
    """POST /v1/schedules/{name}/pause"""
    api.auth(request, "write")
    name = request.path_params["name"]
    await run_in_threadpool(api.engine.schedule, name)
    changed = await run_in_threadpool(api.engine.pause_schedule, name)
    return JSONResponse({"name": name, "paused": True, "changed": changed})


async def unpause_schedule(api: Api, request: Request) -> Response:
    """POST /v1/schedules/{name}/unpause?catchup=true"""
    api.auth(request, "write")
    name = request.path_params["name"]
    given = request.query_params.get("catchup", "false")
    if given not in ("true", "false"):
        raise HttpError(400, f"catchup {given[:40]!r} is not true or false")
    await run_in_threadpool(api.engine.schedule, name)
    changed = await run_in_threadpool(api.engine.unpause_schedule, name, given == "true")
    return JSONResponse({"name": name, "paused": False, "changed": changed})


async def trigger_schedule(api: Api, request: Request) -> Response:
    """POST /v1/schedules/{name}/trigger: one tick now, under its overlap policy."""
    api.auth(request, "write")
    name = request.path_params["name"]
    tick = await run_in_threadpool(api.engine.trigger_schedule, name)
    return JSONResponse({"name": name, "tick": tick.tick, "what": tick.what, "run": tick.run})


# -- webhook triggers (their secrets are written, never read back) -------------------


async def list_triggers(api: Api, request: Request) -> Response:
    """GET /v1/triggers"""
    api.auth(request, "read")
    rows = await run_in_threadpool(api.engine.triggers)
    return JSONResponse({"triggers": [t.to_dict() for t in rows]})


async def get_trigger(api: Api, request: Request) -> Response:
    """GET /v1/triggers/{name}"""
    api.auth(request, "read")
    trigger = await run_in_threadpool(api.engine.trigger, request.path_params["name"])
    return JSONResponse(trigger.to_dict())


_TRIGGER_FIELDS = ("template", "auth", "secret", "idempotency_header")


async def put_trigger(api: Api, request: Request) -> Response:
    """PUT /v1/triggers/{name}: ``{"template", "auth", "secret", "idempotency_header"}``."""
    api.auth(request, "write")
    data = await _object(api, request, "the trigger")
    name = request.path_params["name"]
    unknown = [k for k in data if k not in _TRIGGER_FIELDS]
    if unknown:
        raise HttpError(
            400,
            f"{BODY}: trigger {name}: unknown field {unknown[0][:60]!r} "
            f"(known: {', '.join(_TRIGGER_FIELDS)})",
        )
    for k in _TRIGGER_FIELDS:
        if not isinstance(data.get(k, ""), str):
            raise HttpError(400, f"{BODY}: trigger {name}: {k} must be a string")
    trigger = new_trigger(
        name,
        data.get("template", ""),
        data.get("auth", ""),
        data.get("secret", ""),
        data.get("idempotency_header", ""),
        created_by=api.engine.actor,
    )

    def put() -> None:
        try:
            api.engine.put_trigger(trigger)
        except NotFoundError:
            raise DefinitionError(
                f"{BODY}: trigger {name}: template {trigger.template!r} does not exist"
            ) from None

    await run_in_threadpool(put)
    stored = await run_in_threadpool(api.engine.trigger, name)
    return JSONResponse(stored.to_dict())


async def delete_trigger(api: Api, request: Request) -> Response:
    """DELETE /v1/triggers/{name}"""
    api.auth(request, "write")
    name = request.path_params["name"]
    await run_in_threadpool(api.engine.remove_trigger, name)
    return JSONResponse({"removed": name})


# -- agents ---------------------------------------------------------------------------


async def list_agents(api: Api, request: Request) -> Response:
    """GET /v1/agents"""
    api.auth(request, "read")
    rows = await run_in_threadpool(api.engine.agents)
    return JSONResponse({"agents": [a.to_dict() for a in rows]})
