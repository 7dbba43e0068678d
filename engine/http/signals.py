"""Signals over HTTP: ``POST /v1/workflows/{id}/signals/{name}`` and, for systems that
know their own key but not the run's id, ``POST /v1/signals/{name}?key=<key>`` (the
run's idempotency key). Write token. The body (optional) is a JSON object:
``{"payload": <any JSON>, "reject": false, "comment": "...", "by": "..."}``; the
``Idempotency-Key`` header is the signal's id (a repeat is applied once). ``by`` is who
sends it as the caller says (default: the token's label); the token's label is recorded
beside it as its ``identity`` (``anonymous`` on a server with no token).

Answers 200 ``{"workflow_id", "name", "outcome", "task"}`` when the signal ended a wait
task (``delivered``) or repeated an id (``duplicate:<first outcome>``), 202 when it was
kept for a wait task not reached yet; 404 an unknown run or key, 409 a finished run, a
signal no task waits for, or one whose waits all ended; 400 a bad body.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from engine.spec.wait_tasks import MAX_SIGNAL_NAME

from .bodies import KEY_PATTERN, check_key, check_path_key, parse_json
from .errors import HttpError

if TYPE_CHECKING:
    from .api import Api

FIELDS = {"payload", "reject", "comment", "by"}


async def _send(api: Api, request: Request, wid: str | None, key: str | None) -> Response:
    identity = api.auth(request, "write")
    body = parse_json(await api.body(request))
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise HttpError(400, 'send the signal as a JSON object: {"payload": ...}')
    extra = sorted(set(body) - FIELDS)
    if extra:
        raise HttpError(400, f"unknown field {extra[0]!r} (known: {', '.join(sorted(FIELDS))})")
    reject = body.get("reject", False)
    if not isinstance(reject, bool):
        raise HttpError(400, "reject must be true or false")
    for text in ("comment", "by"):
        if body.get(text) is not None and not isinstance(body[text], str):
            raise HttpError(400, f"{text} must be a string")
    sid = check_key(request.headers.get("idempotency-key"), "Idempotency-Key")
    name = request.path_params["name"]
    done = await run_in_threadpool(
        lambda: api.engine.signal(
            wid, name, body.get("payload"), key=key, signal_id=sid, reject=reject,
            comment=body.get("comment"), by=body.get("by"), identity=identity,
        )
    )  # fmt: skip
    return JSONResponse(done.to_dict(), status_code=202 if done.outcome == "kept" else 200)


async def signal_workflow(api: Api, request: Request) -> Response:
    """POST /v1/workflows/{id}/signals/{name}"""
    return await _send(api, request, request.path_params["id"], None)


async def signal_by_key(api: Api, request: Request) -> Response:
    """POST /v1/signals/{name}?key=<idempotency key>"""
    key = request.query_params.get("key")
    if key is None:
        raise HttpError(400, "give the run's idempotency key: ?key=<key>")
    return await _send(api, request, None, check_path_key(key))


# -- OpenAPI ------------------------------------------------------------------------------

_NAME = {
    "name": "name",
    "in": "path",
    "required": True,
    "description": "the signal's name (a wait task's wait: {signal: NAME}); printable, no ':'",
    "schema": {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_SIGNAL_NAME,
        "pattern": r"^[\x20-\x39\x3b-\x7e]*[\x21-\x39\x3b-\x7e][\x20-\x39\x3b-\x7e]*$",
    },
}
_ID = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "the signal's id: sent again, it is applied once",
    "schema": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": KEY_PATTERN},
}
_BODY = {
    "type": "object",
    "properties": {
        "payload": {"description": "any JSON: the wait task's output"},
        "reject": {"type": "boolean", "description": "fail the wait task instead"},
        "comment": {"type": "string"},
        "by": {
            "type": "string",
            "maxLength": 200,
            "description": "who sends it, as the caller says (recorded beside the token's label)",
        },
    },
    "additionalProperties": False,
}
_RESULT = {
    "type": "object",
    "properties": {
        "workflow_id": {"type": "string"},
        "name": {"type": "string"},
        "outcome": {"type": "string"},
        "task": {"type": ["string", "null"]},
    },
}


def paths(
    common: dict[str, Any], write: dict[str, Any], json_body: Any, error: Any
) -> dict[str, Any]:
    """The path items of signals, for :mod:`.openapi`."""

    def op(op_id: str, summary: str, params: list[Any], missing: str) -> dict[str, Any]:
        return {
            "post": {
                "summary": summary,
                "operationId": op_id,
                "tags": ["workflows"],
                "parameters": params,
                "requestBody": {
                    **json_body(_BODY, "optional: the payload and how"),
                    "required": False,
                },
                "responses": {
                    "200": json_body(_RESULT, "delivered: the wait task ended (or a repeated id)"),
                    "202": json_body(_RESULT, "kept for a wait task not reached yet"),
                    "400": error("a bad body, name or key"),
                    "404": error(missing),
                    "409": error("a finished run, or no unended task waits for this signal"),
                    "413": error("a body over the size limit"),
                    **common,
                    **write,
                },
            }
        }

    wid = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
    key = {
        "name": "key",
        "in": "query",
        "required": True,
        "description": "the run's idempotency key (push --key, Idempotency-Key)",
        "schema": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": KEY_PATTERN},
    }
    return {
        "/v1/workflows/{id}/signals/{name}": op(
            "signalWorkflow", "Send a signal to a run: it ends the wait task waiting for it",
            [wid, _NAME, _ID], "no such workflow",
        ),
        "/v1/signals/{name}": op(
            "signalByKey", "Send a signal to the run pushed with an idempotency key",
            [_NAME, key, _ID], "no run has this key",
        ),
    }  # fmt: skip
