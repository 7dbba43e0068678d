"""``POST /v1/bulk``: one steering action over many workflows (:mod:`engine.ops.bulk`), by
ids or by the filter of ``GET /v1/workflows``.

A filter's confirmation is a count: ``dry_run: true`` answers how many match (and their
ids) and does nothing; the call that acts sends that count as ``expect``, and is refused
(409, nothing done) when a different number matches by then. The answer names every
workflow acted on and every one refused, with why.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from engine.core.model import WorkflowState
from engine.ops import bulk

from .bodies import parse_created, parse_json
from .errors import HttpError

if TYPE_CHECKING:
    from .api import Api

DEFAULT_LIMIT = 1_000
_ID = re.compile(r"[0-9]{1,19}", re.A)
_FIELDS = {"action", "ids", "filter", "tasks", "limit", "dry_run", "expect"}
_FILTER_FIELDS = {"state", "name", "template", "created_after", "created_before"}


def _whole(value: Any, name: str, least: int, most: int) -> int:
    # JSON says 3 and 3.0 alike: a whole number either way (as its schema's integer)
    if type(value) is float and value.is_integer():
        value = int(value)
    if type(value) is not int or not least <= value <= most:
        raise HttpError(400, f"{name} is a whole number from {least} to {most:,}")
    return value


def _strings(value: Any, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise HttpError(400, f"{name} is a list of strings")
    return value


def _filter(given: Any) -> bulk.Filter:
    if not isinstance(given, dict):
        raise HttpError(400, "filter is a JSON object")
    unknown = sorted(set(given) - _FILTER_FIELDS)
    if unknown:
        raise HttpError(400, f"filter has no field {unknown[0][:40]!r}")
    for k in _FILTER_FIELDS:
        if k in given and not isinstance(given[k], str):
            raise HttpError(400, f"filter.{k} is a string")
    state = given.get("state")
    if state is not None and state not in {s.value for s in WorkflowState}:
        raise HttpError(
            400,
            f"filter.state {state[:40]!r} is not one of "
            + ", ".join(s.value for s in WorkflowState),
        )
    after = parse_created(given.get("created_after"), "filter.created_after")
    before = parse_created(given.get("created_before"), "filter.created_before")
    return bulk.Filter(
        state, given.get("name") or None, given.get("template") or None, after, before
    )


def parse_request(body: Any) -> dict[str, Any]:
    """The bulk request, checked whole (400 naming what), before anything is read or
    written."""
    if not isinstance(body, dict):
        raise HttpError(
            400, 'send {"action": ..., "ids": [...]} or {"action": ..., "filter": {...}}'
        )
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        raise HttpError(400, f"the body has no field {unknown[0][:40]!r}")
    action = body.get("action")
    if action not in bulk.ACTIONS:
        raise HttpError(400, f"action is one of {', '.join(bulk.ACTIONS)}")
    if ("ids" in body) == ("filter" in body):
        raise HttpError(400, "give ids or a filter, one of them")
    out: dict[str, Any] = {"action": action, "ids": None, "filter": None, "tasks": None}
    if "ids" in body:
        ids = _strings(body["ids"], "ids")
        if len(ids) > bulk.MAX_SELECTED:
            raise HttpError(400, f"ids holds at most {bulk.MAX_SELECTED:,} workflow ids")
        for wid in ids:
            if not _ID.fullmatch(wid):
                raise HttpError(400, f"ids: {wid[:40]!r} is not a workflow id (a whole number)")
        out["ids"] = [str(int(w)) for w in ids]
    else:
        out["filter"] = _filter(body["filter"])
    if "tasks" in body:
        if action != "retry":
            raise HttpError(400, "tasks goes with the retry action only")
        out["tasks"] = _strings(body["tasks"], "tasks")
    out["limit"] = _whole(body.get("limit", DEFAULT_LIMIT), "limit", 1, bulk.MAX_SELECTED)
    dry_run = body.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise HttpError(400, "dry_run is true or false")
    out["dry_run"] = dry_run
    out["expect"] = None
    if "expect" in body:
        out["expect"] = _whole(body["expect"], "expect", 0, bulk.MAX_SELECTED)
    elif out["filter"] is not None and not dry_run:
        raise HttpError(
            400,
            "a filter needs expect: the number of workflows to act on (a dry_run answers "
            "how many match)",
        )
    return out


async def bulk_action(api: Api, request: Request) -> Response:
    """POST /v1/bulk"""
    api.auth(request, "write")
    req = parse_request(parse_json(await api.body(request)))
    engine, action = api.engine, req["action"]
    if req["ids"] is not None:
        ids = list(dict.fromkeys(req["ids"]))
        chosen = bulk.Selection(ids, len(ids))
    else:
        chosen = await run_in_threadpool(bulk.select, engine, req["filter"], req["limit"])
        if not chosen.ids:  # a template or name nothing has: 404
            await run_in_threadpool(bulk.check_known, engine, req["filter"])
    answer: dict[str, Any] = {
        "action": action,
        "dry_run": req["dry_run"],
        "matched": chosen.matched,
        "selected": len(chosen.ids),
    }
    if req["expect"] is not None and req["expect"] != len(chosen.ids):
        raise HttpError(
            409,
            f"{len(chosen.ids):,} workflows are selected now, not the {req['expect']:,} "
            "expected: nothing done",
        )
    if req["dry_run"]:
        answer.update(ids=chosen.ids, acted=[], refused=[])
        return JSONResponse(answer)
    report = await run_in_threadpool(bulk.apply, engine, action, chosen.ids, req["tasks"])
    answer.update(report.to_dict())
    return JSONResponse(answer)


def openapi_paths(common: dict[str, Any], write: dict[str, Any]) -> dict[str, Any]:
    """The path item of ``POST /v1/bulk`` (merged by :mod:`.openapi`)."""
    string = {"type": "string"}
    created = {"type": "string", "format": "date-time"}
    listed = {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"id": string, "count": {"type": "integer"}, "reason": string},
        },
    }
    request = {
        "type": "object",
        "required": ["action"],
        "additionalProperties": False,
        "properties": {
            "action": {"enum": list(bulk.ACTIONS)},
            "ids": {
                "type": "array",
                "maxItems": bulk.MAX_SELECTED,
                "items": {"type": "string", "pattern": "^[0-9]{1,19}$"},
            },
            "filter": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "state": {"enum": [s.value for s in WorkflowState]},
                    "name": string,
                    "template": string,
                    "created_after": created,
                    "created_before": created,
                },
            },
            "tasks": {"type": "array", "items": string},
            "limit": {"type": "integer", "minimum": 1, "maximum": bulk.MAX_SELECTED},
            "dry_run": {"type": "boolean"},
            "expect": {"type": "integer", "minimum": 0, "maximum": bulk.MAX_SELECTED},
        },
        # ids or a filter, one of them
        "oneOf": [
            {"required": ["ids"], "not": {"required": ["filter"]}},
            {"required": ["filter"], "not": {"required": ["ids"]}},
        ],
        "allOf": [
            # tasks go with retry only
            {"if": {"required": ["tasks"]}, "then": {"properties": {"action": {"const": "retry"}}}},
            # a filter acts only on the count expected (expect), unless it is a dry run
            {
                "if": {
                    "required": ["filter"],
                    "not": {"required": ["dry_run"], "properties": {"dry_run": {"const": True}}},
                },
                "then": {"required": ["expect"]},
            },
        ],
    }
    answer = {
        "type": "object",
        "properties": {
            "action": string,
            "dry_run": {"type": "boolean"},
            "matched": {"type": "integer"},
            "selected": {"type": "integer"},
            "ids": {"type": "array", "items": string},
            "acted": listed,
            "refused": listed,
        },
    }

    def body(schema: dict[str, Any], text: str) -> dict[str, Any]:
        return {"description": text, "content": {"application/json": {"schema": schema}}}

    error = body({"$ref": "#/components/schemas/Error"}, "")
    return {
        "/v1/bulk": {
            "post": {
                "summary": "Retry, cancel, pause, release or clean up many workflows: by ids, "
                "or by the filter of GET /v1/workflows",
                "description": "Each workflow is steered by its own atomic call, as alone. "
                "With a filter, send dry_run: true first to learn how many match (and their "
                "ids); then send that count as expect: a different count by then is refused "
                "(409) and nothing is done. The answer lists the workflows acted on (with "
                "the action's count of tasks) and those refused, with why.",
                "operationId": "bulkAction",
                "tags": ["workflows"],
                "requestBody": {"required": True, **body(request, "the action and its workflows")},
                "responses": {
                    "200": body(answer, "done (or, with dry_run, what would be acted on)"),
                    "400": {
                        **error,
                        "description": "a bad body: ids and a filter, neither, a filter "
                        "without expect, a bad state or time",
                    },
                    "404": {
                        **error,
                        "description": "a filter naming a template or name nothing known "
                        "has (no such template, no run of it or workflow of that name kept)",
                    },
                    "409": {**error, "description": "not the expected count: nothing done"},
                    "413": {**error, "description": "body over the payload limit"},
                    **common,
                    **write,
                },
            }
        }
    }
