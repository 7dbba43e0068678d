"""The API described: ``GET /openapi.json`` (OpenAPI 3.1) and ``GET /docs`` (a plain page
rendered from it: no script, no stylesheet from elsewhere)."""

from __future__ import annotations

import copy
import html
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from engine.core.model import WorkflowState

from . import agents, bulk, logs, openapi_resources, signals
from .bodies import DURATION_PATTERN, KEY_PATTERN, MAX_KEY

if TYPE_CHECKING:
    from .api import Api

_ERROR = {"$ref": "#/components/schemas/Error"}


def _json(schema: dict[str, Any], text: str) -> dict[str, Any]:
    return {"description": text, "content": {"application/json": {"schema": schema}}}


def _error(text: str) -> dict[str, Any]:
    return _json(_ERROR, text)


_COMMON = {
    "401": _error("missing or invalid bearer token"),
    "421": _error("the Host header is not one of the server's names (--allowed-host)"),
    "503": _error("Redis unreachable: try again"),
}
_WRITE = {  # what any POST may also answer (engine/http/guard.py, protocol.py)
    "403": _error("sent by a page of another origin (Origin, Sec-Fetch-Site), or a read token"),
    "408": _error("the request's headers or body took too long to arrive"),
    "415": _error("a body not sent as Content-Type: application/json"),
}
_WID = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
_WAIT = {
    "name": "wait",
    "in": "query",
    "required": False,
    "description": "wait this long (30s, 2m) for the run to finish",
    "schema": {"type": "string", "pattern": f"^(?:{DURATION_PATTERN})$", "maxLength": 64},
}
_KEY_HEADER = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "the same key again answers the first run's id (replayed: true) and "
    "pushes nothing",
    "schema": {"type": "string", "minLength": 1, "maxLength": MAX_KEY, "pattern": KEY_PATTERN},
}
_ACCEPTED = _json(
    {"$ref": "#/components/schemas/Accepted"},
    "pushed (or, with ?wait=, still running when the wait expired)",
)
_DONE = _json(
    {"$ref": "#/components/schemas/Finished"},
    "an Idempotency-Key seen before (replayed: true, nothing pushed), or with ?wait= the "
    "run succeeded: its final tasks' outputs",
)
_FAILED = _json({"$ref": "#/components/schemas/Finished"}, "with ?wait=: the run failed")


def _control(op: str, text: str) -> dict[str, Any]:
    return {
        "post": {
            "summary": text,
            "operationId": f"{op}Workflow",
            "tags": ["workflows"],
            "parameters": [_WID],
            **(
                {
                    "requestBody": _json(
                        {
                            "type": "object",
                            "properties": {"tasks": {"type": "array", "items": {"type": "string"}}},
                        },
                        'optional: only these failed tasks ("count[17]": one map item)',
                    )
                }
                if op == "retry"
                else {}
            ),
            "responses": {
                "200": _json({"$ref": "#/components/schemas/Control"}, "done"),
                **({"400": _error("a malformed JSON body")} if op == "retry" else {}),
                "404": _error("no such workflow"),
                "409": _error("not allowed in the workflow's state"),
                **_COMMON,
                **_WRITE,
            },
        }
    }


SCHEMA: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "redisflow",
        "version": "1",
        "description": "Run workflow templates, deliver webhooks to triggers, read and steer "
        'workflows. Every error is JSON {"error": "..."}. With tokens configured, '
        "every /v1 call except trigger deliveries needs Authorization: Bearer <token> "
        "(read, or write to push and steer). Only the Host names the server answers to "
        "are served (421); a POST takes its body as application/json (415) and is refused "
        "from a page of another origin (403).",
    },
    "paths": {
        "/v1/templates/{name}/runs": {
            "post": {
                "summary": "Run template NAME with the JSON body as its input",
                "operationId": "runTemplate",
                "tags": ["runs"],
                "parameters": [
                    {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
                    _WAIT,
                    _KEY_HEADER,
                ],
                "requestBody": _json({}, "the run's input: any JSON value (empty: none)"),
                "responses": {
                    "202": _ACCEPTED,
                    "200": _DONE,
                    "422": _FAILED,
                    "400": _error(
                        "malformed JSON (line and column named), a bad input, ?wait= or "
                        "Idempotency-Key"
                    ),
                    "404": _error("no such template"),
                    "413": _error("body over the payload limit"),
                    **_COMMON,
                    **_WRITE,
                },
            }
        },
        "/v1/triggers/{name}": {
            "post": {
                "summary": "Deliver a webhook: run the trigger's template with the body",
                "description": "Authenticated by the trigger's own scheme (github: "
                "X-Hub-Signature-256; standard-webhooks: webhook-id, webhook-timestamp, "
                "webhook-signature; bearer), not by the server's tokens. A trigger with an "
                "idempotency header runs each delivery id once.",
                "operationId": "deliver",
                "tags": ["runs"],
                "parameters": [
                    {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
                    _WAIT,
                ],
                "requestBody": _json({}, "the delivery: any JSON value, signed as sent"),
                "responses": {
                    "202": _ACCEPTED,
                    "200": _DONE,
                    "422": _FAILED,
                    "400": _error(
                        "malformed JSON, a bad ?wait=, or the idempotency header missing"
                    ),
                    "401": _error("bad or missing signature, or a stale timestamp"),
                    "404": _error("no such trigger (or its template is gone)"),
                    "413": _error("body over the payload limit"),
                    "421": _COMMON["421"],
                    "503": _COMMON["503"],
                    **_WRITE,
                    "403": _error("sent by a page of another origin (Origin, Sec-Fetch-Site)"),
                },
            }
        },
        "/v1/workflows": {
            "get": {
                "summary": "Workflows, newest first, a page at a time",
                "operationId": "listWorkflows",
                "tags": ["workflows"],
                "parameters": [
                    {
                        "name": "state",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string", "enum": [s.value for s in WorkflowState]},
                    }
                ]
                + [
                    {"name": n, "in": "query", "required": False, "schema": {"type": "string"}}
                    for n in ("template", "name")
                ]
                + [
                    {
                        "name": "cursor",
                        "in": "query",
                        "required": False,
                        "description": "the next_cursor of the previous page",
                        "schema": {"type": "string", "pattern": "^[0-9]{1,16}$"},
                    },
                    {
                        "name": "limit",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "integer", "minimum": 1, "maximum": 1000},
                    },
                ]
                + [
                    {
                        "name": n,
                        "in": "query",
                        "required": False,
                        "description": f"only workflows created {when}: an RFC 3339 time "
                        "(2026-11-25T10:00:00Z)",
                        "schema": {"type": "string", "format": "date-time"},
                    }
                    for n, when in (
                        ("created_after", "at or after this time"),
                        ("created_before", "before this time"),
                    )
                ],
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "workflows": {"type": "array", "items": {"type": "object"}},
                                "next_cursor": {"type": ["string", "null"]},
                            },
                        },
                        "a page; pass next_cursor as cursor for the next one",
                    ),
                    "400": _error("a bad state, limit, cursor, created_after or created_before"),
                    **_COMMON,
                },
            }
        },
        "/v1/workflows/{id}": {
            "get": {
                "summary": "One workflow: state, counts, every task",
                "operationId": "getWorkflow",
                "tags": ["workflows"],
                "parameters": [_WID],
                "responses": {
                    "200": _json({"type": "object"}, "the workflow"),
                    "404": _error("no such workflow"),
                    **_COMMON,
                },
            }
        },
        "/v1/workflows/by-key/{key}": {
            "get": {
                "summary": "The workflow pushed with an idempotency key (Idempotency-Key, "
                "push --key): state, counts, every task",
                "operationId": "getWorkflowByKey",
                "tags": ["workflows"],
                "parameters": [
                    {
                        "name": "key",
                        "in": "path",
                        "required": True,
                        "schema": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": MAX_KEY,
                            "pattern": KEY_PATTERN,
                        },
                    }
                ],
                "responses": {
                    "200": _json({"type": "object"}, "the workflow"),
                    "400": _error("a key that is not 1 to 200 printable ASCII characters"),
                    "404": _error("no workflow has this key"),
                    **_COMMON,
                },
            }
        },
        "/v1/workflows/{id}/pause": _control("pause", "Hold a running workflow"),
        "/v1/workflows/{id}/release": _control("release", "Resume a paused workflow"),
        "/v1/workflows/{id}/cancel": _control("cancel", "Cancel a running or paused workflow"),
        "/v1/workflows/{id}/retry": _control("retry", "Run a failed workflow's failures again"),
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics, read from Redis on each scrape",
                "operationId": "metrics",
                "tags": ["operations"],
                "responses": {
                    "200": {
                        "description": "text exposition format",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    },
                    **_COMMON,
                },
            }
        },
        "/healthz": {
            "get": {
                "summary": "Whether Redis answers (no token needed)",
                "operationId": "health",
                "tags": ["operations"],
                "responses": {
                    "200": _json({"type": "object"}, "Redis answers"),
                    "421": _COMMON["421"],
                    "503": _COMMON["503"],
                },
            }
        },
    },
    "components": {
        "schemas": {
            "Error": {
                "type": "object",
                "required": ["error"],
                "properties": {"error": {"type": "string"}},
            },
            "Accepted": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "status_url": {"type": "string"},
                    "replayed": {"type": "boolean"},
                    "state": {"type": "string"},
                },
            },
            "Finished": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "status_url": {"type": "string"},
                    "replayed": {"type": "boolean"},
                    "state": {"type": "string"},
                    "outputs": {"type": "object", "description": "final task name -> output"},
                    "error": {"type": "string"},
                    "errors": {"type": "object", "description": "failed task name -> error"},
                },
            },
            "Control": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "op": {"type": "string"},
                    "count": {"type": "integer"},
                },
            },
        },
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
    },
}


# -- the resources of engine/http/resources.py and the event streams --------------------

_PATHS = SCHEMA["paths"]
_PATHS.update(openapi_resources.paths(_COMMON, _WRITE))
_PATHS.update(signals.paths(_COMMON, _WRITE, _json, _error))
_PATHS["/v1/workflows"]["post"] = openapi_resources.push_operation(
    _COMMON, _WRITE, _WAIT, _KEY_HEADER, {"202": _ACCEPTED, "200": _DONE, "422": _FAILED}
)
_PATHS["/v1/triggers/{name}"].update(openapi_resources.trigger_operations(_COMMON, _WRITE))
_PATHS.update(bulk.openapi_paths(_COMMON, _WRITE))
_PATHS.update(agents.openapi_paths(_COMMON, _WRITE))
_PATHS["/v1/workflows/{id}/tasks/{name}/logs"] = logs.path_item(_COMMON, _error)
_OPEN = {("/healthz", "get"), ("/v1/triggers/{name}", "post")}  # no server token needed


def schema_for(secured: bool) -> dict[str, Any]:
    """The document a server serves: with ``secured`` (tokens configured), every
    operation but the open ones declares the bearer security scheme."""
    doc = copy.deepcopy(SCHEMA)
    if not secured:
        del doc["components"]["securitySchemes"]
        for path, item in doc["paths"].items():
            for method, op in item.items():
                if (path, method) != ("/v1/triggers/{name}", "post"):  # its own auth
                    op["responses"].pop("401", None)
        return doc
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if (path, method) not in _OPEN:
                op["security"] = [{"bearer": []}]
    return doc


def docs_page(schema: dict[str, Any]) -> str:
    """A plain HTML listing of ``schema``'s operations: method, path, summary, parameters
    and responses."""
    e = html.escape
    info = schema["info"]
    rows: list[str] = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{e(info['title'])} API</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto;padding:0 1em}"
        "code{background:#eee;padding:0 .2em}h2{margin-top:2em;font-size:1.1em}"
        "td{vertical-align:top;padding:.1em .6em}</style></head><body>",
        f"<h1>{e(info['title'])} API</h1><p>{e(info['description'])}</p>",
        "<p>Machine-readable: <a href='openapi.json'>openapi.json</a></p>",
    ]
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            rows.append(f"<h2><code>{e(method.upper())} {e(path)}</code></h2>")
            rows.append(f"<p>{e(op.get('summary', ''))}</p>")
            if op.get("description"):
                rows.append(f"<p>{e(op['description'])}</p>")
            params = op.get("parameters", [])
            if params:
                rows.append("<table><tr><th>parameter</th><th>in</th><th>about</th></tr>")
                for p in params:
                    about = p.get("description", "")
                    rows.append(
                        f"<tr><td><code>{e(p['name'])}</code></td><td>{e(p['in'])}</td>"
                        f"<td>{e(about)}</td></tr>"
                    )
                rows.append("</table>")
            if "requestBody" in op:
                rows.append(f"<p>Body: {e(op['requestBody']['description'])}</p>")
            rows.append("<table><tr><th>status</th><th>means</th></tr>")
            for status, resp in op["responses"].items():
                rows.append(f"<tr><td>{e(status)}</td><td>{e(resp['description'])}</td></tr>")
            rows.append("</table>")
    rows.append("</body></html>")
    return "\n".join(rows)


async def openapi_document(api: Api, _: Request) -> Response:
    """``GET /openapi.json``: the API's OpenAPI document."""
    return JSONResponse(api.schema)


async def docs(api: Api, _: Request) -> Response:
    """``GET /docs``: a page that renders the document."""
    return HTMLResponse(docs_page(api.schema))
