"""The OpenAPI path items of templates, schedules, triggers, agents, event streams and
workflows pushed as JSON (:mod:`.resources`, :mod:`.stream`); :mod:`.openapi` merges
them into the document."""

from __future__ import annotations

from typing import Any

from engine.spec.definition import MAX_NAME, NAME_PATTERN
from engine.spec.flow import MAX_TEMPLATE_NAME
from engine.spec.options import BY_KEY, WORKFLOW_KEYS
from engine.spec.rate_limits import PERIOD_PATTERN

from ..schedules.spec import CATCHUP, OVERLAP
from ..store.triggers import AUTH_SCHEMES
from .auth import WHSEC_PATTERN
from .stream import CURSOR_PATTERN, MAX_CURSOR
from .triggers import HEADER
from .triggers import NAME as TRIGGER_NAME

Responses = dict[str, Any]


def json_body(schema: dict[str, Any], text: str) -> dict[str, Any]:
    return {"description": text, "content": {"application/json": {"schema": schema}}}


def required_body(schema: dict[str, Any], text: str) -> dict[str, Any]:
    """A request body that must be there (an empty one is refused: 400)."""
    return {"required": True, **json_body(schema, text)}


def error(text: str) -> dict[str, Any]:
    return json_body({"$ref": "#/components/schemas/Error"}, text)


# a name, as the server takes one (engine.spec.definition.check_name)
NAME = {"type": "string", "minLength": 1, "maxLength": MAX_NAME, "pattern": NAME_PATTERN}


# a template's name (engine.spec.flow.check_template_name: printable, which the server
# checks in full, Unicode's format characters too)
TEMPLATE_NAME = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_TEMPLATE_NAME,
    "pattern": r"^[^\s/\u0000-\u001f\u007f-\u009f]+$",
}


def _name(what: str, schema: dict[str, Any] = NAME) -> dict[str, Any]:
    return {
        "name": "name",
        "in": "path",
        "required": True,
        "description": f"the {what}'s name",
        "schema": schema,
    }


_OBJECT = {"type": "object"}
_REMOVED = json_body({"type": "object", "properties": {"removed": {"type": "string"}}}, "removed")

# A workflow in the native file format, as JSON (docs/workflows.md says every field; the
# server checks the rest: names unique, parents known, no cycle; 400 naming the line). Its
# keys and its tasks' are those the loader knows (engine.spec.options), no other.
_TASK_NAME = NAME
WORKFLOW = {
    "type": "object",
    "required": ["name", "tasks"],
    "additionalProperties": False,
    "properties": {
        **dict.fromkeys(sorted(WORKFLOW_KEYS), {}),
        "name": NAME,
        "tasks": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["name"],
                "additionalProperties": False,
                "properties": {
                    **dict.fromkeys(sorted(BY_KEY), {}),
                    "name": _TASK_NAME,
                    "type": {"type": ["string", "null"]},
                    "payload": {},
                    "after": {"type": ["array", "null"], "items": _TASK_NAME},
                    "priority": {"type": "integer"},
                    "max_attempts": {"type": "integer", "minimum": 1},
                    "when": {"type": ["string", "null"], "description": "a CEL condition"},
                },
            },
        },
        "input_schema": {
            "type": ["object", "boolean", "null"],
            "description": "a JSON Schema every run's input must fit",
        },
    },
}
# a template's workflow may leave out its name, or leave it empty (the template's is used)
TEMPLATE_WORKFLOW = {
    **WORKFLOW,
    "required": ["tasks"],
    "properties": {
        **WORKFLOW["properties"],  # type: ignore[dict-item]
        "name": {"anyOf": [NAME, {"const": ""}]},
    },
}
TEMPLATE = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "version": {"type": "integer"},
        "latest": {"type": "integer"},
        "put_at": {"type": "number"},
        "source": {"type": "string"},
        "runs": {"type": "integer"},
        "text": {"type": ["string", "null"]},
    },
}
SCHEDULE_SETTINGS = {
    "type": "object",
    "required": ["template"],
    "properties": {
        "name": {"type": "string", "description": "if given, the path's name"},
        "template": {"type": "string", "minLength": 1},
        "cron": {"type": "string", "description": "5 fields or @daily..., in timezone"},
        "every": {"type": "string", "description": "a duration: 15m, 1h"},
        "offset": {"type": "string"},
        "timezone": {"type": "string"},
        "input": {"type": "object"},
        "overlap": {"type": "string", "enum": list(OVERLAP)},
        "catchup": {"type": "string", "enum": list(CATCHUP)},
        "catchup_window": {"type": "string"},
        "max_catchup": {"type": "integer"},
        "jitter": {"type": "string"},
        "start_at": {"type": "string"},
        "end_at": {"type": "string"},
        "pause_on_failure": {"type": "boolean"},
        "paused": {"type": "boolean"},
    },
}
# a rate limit (engine/spec/rate_limits.py); the server checks the rest: the period's unit and
# range, a key naming a field after input. or payload., at most 512 bytes
_RATE_PROPERTIES: dict[str, Any] = {
    "key": {
        "type": "string",
        "minLength": 1,
        "description": "input.<field>, payload.<field> or a constant",
    },
    "limit": {
        "type": "integer",
        "minimum": 1,
        "maximum": 1_000_000,
        "description": "starts per period, per key",
    },
    "per": {
        "type": "string",
        "pattern": PERIOD_PATTERN,
        "description": "the period: 1s, 30s, 1m, 1h (ms s m h d), up to 366 days",
    },
    "burst": {
        "type": "integer",
        "minimum": 1,
        "maximum": 1_000_000,
        "description": "starts at once after a quiet spell (default 1)",
    },
}
RATE_LIMIT = {
    "type": "object",
    "required": ["key", "limit"],
    "additionalProperties": False,
    "properties": _RATE_PROPERTIES,
}
RATE_LIMIT_OF_TYPE = {
    **RATE_LIMIT,
    "required": ["type", "key", "limit", "per", "burst"],
    "properties": {"type": {"type": "string"}, **_RATE_PROPERTIES},
}
_TYPE = {
    "name": "type",
    "in": "path",
    "required": True,
    "description": "the task type",
    "schema": NAME,
}
TRIGGER = {
    "type": "object",
    "description": "a webhook trigger; its secret is never answered (has_secret says "
    "whether it has one)",
    "properties": {
        "name": {"type": "string"},
        "template": {"type": "string"},
        "auth": {"type": "string"},
        "idempotency_header": {"type": ["string", "null"]},
        "created_at": {"type": ["number", "null"]},
        "created_by": {"type": "string"},
        "has_secret": {"type": "boolean"},
    },
    "not": {"required": ["secret"]},
}
TRIGGER_SETTINGS = {
    "type": "object",
    "required": ["template", "auth"],
    "additionalProperties": False,
    "properties": {
        "template": {"type": "string", "minLength": 1},
        "auth": {"type": "string", "enum": list(AUTH_SCHEMES)},
        "secret": {
            "type": "string",
            "description": "what the scheme checks (none: no secret); written, never read back",
        },
        "idempotency_header": {
            "anyOf": [{"const": ""}, {"type": "string", "pattern": HEADER.pattern}]
        },
    },
    "allOf": [
        {  # none takes no secret; every other scheme needs one (a trigger never fails open)
            "if": {"properties": {"auth": {"const": "none"}}},
            "then": {"properties": {"secret": {"maxLength": 0}}},
            "else": {"required": ["secret"], "properties": {"secret": {"minLength": 1}}},
        },
        {  # whsec_ and base64 of 16 bytes or more
            "if": {"properties": {"auth": {"const": "standard-webhooks"}}},
            "then": {"properties": {"secret": {"pattern": WHSEC_PATTERN}}},
        },
    ],
}
_SSE = {
    "description": "a stream of Server-Sent Events: event: the kind (task.succeeded...), "
    "data: the event as JSON; the last message of each read has an id: to resume from "
    "(Last-Event-ID)",
    "content": {
        "text/event-stream": {
            "schema": {  # one event (OpenAPI 3.1: the schema of a stream's items)
                "type": "object",
                "required": ["event", "data"],
                "properties": {
                    "event": {"type": "string", "description": "its kind"},
                    "data": {"type": "string", "description": "the event as JSON"},
                    "id": {"type": "string", "pattern": CURSOR_PATTERN},
                },
            }
        }
    },
}
_TOO_MANY_STREAMS = (
    "too many event streams open: the server's (--max-streams) or this token's "
    "(--max-streams-per-token); try again once one has closed"
)
_LAST_EVENT_ID = {
    "name": "Last-Event-ID",
    "in": "header",
    "required": False,
    "description": "resume after this id (one this server sent; any other is ignored)",
    "schema": {"type": "string", "maxLength": MAX_CURSOR},
}


def paths(common: Responses, write: Responses) -> dict[str, Any]:
    """The path items; ``common``: what any call may answer (401, 421, 503), ``write``:
    what any write may answer (403, 408, 415)."""
    ops = _Ops(common, write)
    return {
        **_templates(ops),
        **_rate_limits(ops),
        **_schedules(ops),
        **_listings(ops),
        **_event_streams(ops),
    }


class _Ops:
    """Operation objects: a read's answers (200 and what any call may answer) and a
    write's (its own and what any write may answer)."""

    def __init__(self, common: Responses, write: Responses) -> None:
        self.common = common
        self.write = write

    def read(self, summary: str, op_id: str, tag: str, ok: dict[str, Any], **more: Any) -> Any:
        responses = {"200": ok, **more.pop("responses", {}), **self.common}
        return {"summary": summary, "operationId": op_id, "tags": [tag],
                **more, "responses": responses}  # fmt: skip

    def change(self, summary: str, op_id: str, tag: str, ok: Responses, **more: Any) -> Any:
        responses = {**ok, **more.pop("responses", {}), **self.common, **self.write}
        return {"summary": summary, "operationId": op_id, "tags": [tag],
                **more, "responses": responses}  # fmt: skip


def _too_large() -> Responses:
    return {"413": error("body over the payload limit")}


def _put_answer(extra: dict[str, Any]) -> Responses:
    schema = {"type": "object", "properties": {"name": {"type": "string"}, **extra}}
    return {
        "201": json_body(schema, "stored: new"),
        "200": json_body(schema, "stored: replaced (or, for a template, unchanged)"),
    }


def _schedule_state() -> dict[str, Any]:
    return json_body(
        {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "paused": {"type": "boolean"},
                "changed": {"type": "boolean"},
            },
        },
        "done; changed: false when it already was",
    )


def _templates(ops: _Ops) -> dict[str, Any]:
    """Templates: list, get, put, delete."""
    return {
        "/v1/templates": {
            "get": ops.read(
                "Every template's latest version (without its text)",
                "listTemplates",
                "templates",
                json_body(
                    {
                        "type": "object",
                        "properties": {"templates": {"type": "array", "items": TEMPLATE}},
                    },
                    "the templates, by name",
                ),
            )  # fmt: skip
        },
        "/v1/templates/{name}": {
            "get": ops.read(
                "One version of a template (the latest by default), its text included",
                "getTemplate",
                "templates",
                json_body(TEMPLATE, "the template"),
                parameters=[
                    _name("template", TEMPLATE_NAME),
                    {
                        "name": "version",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "integer", "minimum": 1, "maximum": 999_999_999},
                    },
                ],
                responses={
                    "400": error("a version that is not a whole number from 1"),
                    "404": error("no such template or version"),
                },
            ),
            "put": ops.change(
                "Store the body (a workflow file's JSON) as the template's next version",
                "putTemplate",
                "templates",
                _put_answer({"version": {"type": "integer"}, "new": {"type": "boolean"}}),
                parameters=[_name("template", TEMPLATE_NAME)],
                requestBody=required_body(
                    TEMPLATE_WORKFLOW, "the workflow, in the native format as JSON"
                ),
                responses={
                    "400": error("not a valid workflow (what and where: body.json:LINE: ...)"),
                    **_too_large(),
                },
            ),
            "delete": ops.change(
                "Delete a template, every version (its runs stay)",
                "deleteTemplate",
                "templates",
                {"200": _REMOVED},
                parameters=[_name("template", TEMPLATE_NAME)],
                responses={"404": error("no such template")},
            ),
        },
    }


def _rate_limits(ops: _Ops) -> dict[str, Any]:
    """Rate limits by task type."""
    return {
        "/v1/rate-limits": {
            "get": ops.read(
                "The deployment's rate limits, by task type",
                "listRateLimits",
                "rate limits",
                json_body(
                    {
                        "type": "object",
                        "properties": {
                            "rate_limits": {
                                "type": "object",
                                "additionalProperties": RATE_LIMIT,
                            }
                        },
                    },
                    "type -> its rate limit",
                ),
            )
        },
        "/v1/rate-limits/{type}": {
            "put": ops.change(
                "Set a task type's rate limit (for runs pushed from now on)",
                "putRateLimit",
                "rate limits",
                {"200": json_body(RATE_LIMIT_OF_TYPE, "stored: the type and its rate limit")},
                parameters=[_TYPE],
                requestBody=required_body(RATE_LIMIT, "the rate limit"),
                responses={"400": error("a bad rate limit (what and why)"), **_too_large()},
            ),
            "delete": ops.change(
                "Remove a task type's rate limit (runs pushed before keep theirs)",
                "deleteRateLimit",
                "rate limits",
                {"200": _REMOVED},
                parameters=[_TYPE],
                responses={"404": error("no rate limit for that type")},
            ),
        },
    }


def _schedules(ops: _Ops) -> dict[str, Any]:
    """Schedules: list, get, put, delete, pause, unpause, trigger."""
    schedule_state = _schedule_state()
    return {
        "/v1/schedules": {
            "get": ops.read(
                "Every schedule, with its next due time, last run and counters",
                "listSchedules",
                "schedules",
                json_body(
                    {
                        "type": "object",
                        "properties": {"schedules": {"type": "array", "items": _OBJECT}},
                    },
                    "the schedules, by name (as schedule list --json)",
                ),
            )  # fmt: skip
        },
        "/v1/schedules/{name}": {
            "get": ops.read(
                "One schedule",
                "getSchedule",
                "schedules",
                json_body(_OBJECT, "the schedule (as schedule show --json)"),
                parameters=[_name("schedule")],
                responses={"404": error("no such schedule")},
            ),
            "put": ops.change(
                "Create or update a schedule from its settings (as in a schedule file)",
                "putSchedule",
                "schedules",
                _put_answer({"new": {"type": "boolean"}}),
                parameters=[_name("schedule")],
                requestBody=required_body(SCHEDULE_SETTINGS, "the settings"),
                responses={
                    "400": error("a bad setting or unknown template (what and where)"),
                    **_too_large(),
                },
            ),
            "delete": ops.change(
                "Delete a schedule (its runs are left alone)",
                "deleteSchedule",
                "schedules",
                {"200": _REMOVED},
                parameters=[_name("schedule")],
                responses={"404": error("no such schedule")},
            ),
        },
        "/v1/schedules/{name}/pause": {
            "post": ops.change(
                "Stop firing its ticks",
                "pauseSchedule",
                "schedules",
                {"200": schedule_state},
                parameters=[_name("schedule")],
                responses={"404": error("no such schedule")},
            )
        },
        "/v1/schedules/{name}/unpause": {
            "post": ops.change(
                "Fire its ticks again: from now, or with catchup=true from where it was paused",
                "unpauseSchedule",
                "schedules",
                {"200": schedule_state},
                parameters=[
                    _name("schedule"),
                    {
                        "name": "catchup",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string", "enum": ["true", "false"]},
                    },
                ],
                responses={
                    "400": error("catchup not true or false"),
                    "404": error("no such schedule"),
                },
            )
        },
        "/v1/schedules/{name}/trigger": {
            "post": ops.change(
                "Run one tick now, under the schedule's overlap policy (it may be skipped)",
                "triggerSchedule",
                "schedules",
                {
                    "200": json_body(
                        {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "tick": {"type": "integer"},
                                "what": {"type": "string"},
                                "run": {"type": ["string", "null"]},
                            },
                        },
                        "what the tick did (fired, buffered, skipped) and its run",
                    )
                },
                parameters=[_name("schedule")],
                responses={
                    "404": error("no such schedule (or its template is gone)"),
                    "409": error("the schedule cannot fire now"),
                },
            )
        },
    }


def _listings(ops: _Ops) -> dict[str, Any]:
    """Triggers and agents, listed."""
    return {
        "/v1/triggers": {
            "get": ops.read(
                "Every webhook trigger, oldest first (secrets never included)",
                "listTriggers",
                "triggers",
                json_body(
                    {
                        "type": "object",
                        "properties": {"triggers": {"type": "array", "items": TRIGGER}},
                    },
                    "the triggers",
                ),
            )  # fmt: skip
        },
        "/v1/agents": {
            "get": ops.read(
                "Every agent known, with liveness from its heartbeat",
                "listAgents",
                "agents",
                json_body(
                    {
                        "type": "object",
                        "properties": {"agents": {"type": "array", "items": _OBJECT}},
                    },
                    "the agents (as agents --json)",
                ),
            )  # fmt: skip
        },
    }


def _event_streams(ops: _Ops) -> dict[str, Any]:
    """Event streams: the deployment's, a workflow's."""
    return {
        "/v1/events": {
            "get": ops.read(
                "The deployment's events, live, as Server-Sent Events (from now, or after "
                "Last-Event-ID)",
                "streamEvents",
                "events",
                _SSE,
                parameters=[_LAST_EVENT_ID],
                responses={
                    "400": error("a Last-Event-ID over 12,000 characters"),
                    "429": error(_TOO_MANY_STREAMS),
                },
            )
        },
        "/v1/workflows/{id}/events": {
            "get": ops.read(
                "A workflow's events as Server-Sent Events, from its first one still kept "
                "(or after Last-Event-ID), until it finishes",
                "streamWorkflowEvents",
                "events",
                _SSE,
                parameters=[
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                    _LAST_EVENT_ID,
                ],
                responses={
                    "204": {
                        "description": "it has finished and nothing is left after "
                        "Last-Event-ID (an EventSource stops reconnecting)"
                    },
                    "400": error("a Last-Event-ID over 12,000 characters"),
                    "404": error("no such workflow"),
                    "429": error(_TOO_MANY_STREAMS),
                },
            )  # fmt: skip
        },
    }


def push_operation(
    common: Responses, write: Responses, wait: dict[str, Any], key_header: dict[str, Any],
    answers: Responses,
) -> dict[str, Any]:  # fmt: skip
    """``POST /v1/workflows``: push the body, a workflow file's JSON."""
    return {
        "summary": "Push a workflow given as the JSON of a workflow file (native format)",
        "operationId": "pushWorkflow",
        "tags": ["runs"],
        "parameters": [wait, key_header],
        "requestBody": required_body(WORKFLOW, "the workflow, validated as redisflow push does"),
        "responses": {
            **answers,
            "400": error(
                "not a valid workflow (what and where: body.json:LINE: ...), a bad ?wait= or "
                "Idempotency-Key"
            ),
            "413": error("body over the payload limit"),
            **common,
            **write,
        },
    }


def trigger_operations(common: Responses, write: Responses) -> dict[str, Any]:
    """GET, PUT and DELETE of ``/v1/triggers/{name}`` (its POST is a delivery)."""
    name = {**_name("trigger"), "schema": {"type": "string", "pattern": TRIGGER_NAME.pattern}}
    return {
        "get": {
            "summary": "One webhook trigger (its secret never included)",
            "operationId": "getTrigger",
            "tags": ["triggers"],
            "parameters": [name],
            "responses": {
                "200": json_body(TRIGGER, "the trigger"),
                "404": error("no such trigger"),
                **common,
            },
        },
        "put": {
            "summary": "Create or replace a webhook trigger",
            "operationId": "putTrigger",
            "tags": ["triggers"],
            "parameters": [name],
            "requestBody": required_body(TRIGGER_SETTINGS, "the trigger's settings"),
            "responses": {
                "200": json_body(TRIGGER, "stored (the secret not echoed)"),
                "400": error(
                    "a bad name, scheme or header, a missing secret (or one given to none), "
                    "an unknown template"
                ),
                "413": error("body over the payload limit"),
                **common,
                **write,
            },
        },
        "delete": {
            "summary": "Delete a webhook trigger",
            "operationId": "deleteTrigger",
            "tags": ["triggers"],
            "parameters": [name],
            "responses": {"200": _REMOVED, "404": error("no such trigger"), **common, **write},
        },
    }
