"""``GET /v1/workflows/{id}/tasks/{name}/logs``: what a task's handler wrote (every
attempt; a map's items too), page by page after a cursor, or waiting for new lines
(``wait``) to follow a running task. Its OpenAPI path item is :data:`PATH_ITEM`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from engine.runtime.tasklogs import read_logs

from .errors import HttpError
from .stream import MAX_SEQ

if TYPE_CHECKING:
    from .api import Api

CURSOR = r"^(?:-|[0-9]{1,19}-[0-9]{1,19})$"
MAX_LIMIT = 10_000
MAX_WAIT_S = 30


def _query_int(request: Request, name: str, default: int, low: int, high: int) -> int:
    given = request.query_params.get(name)
    if given is None:
        return default
    if (
        not given.isascii()
        or not given.isdigit()
        or len(given) > 9
        or not low <= int(given) <= high
    ):
        raise HttpError(400, f"{name} {given[:40]!r} is not a whole number from {low} to {high}")
    return int(given)


async def task_logs(api: Api, request: Request) -> Response:
    """GET /v1/workflows/{id}/tasks/{name}/logs?after=&limit=&wait="""
    api.auth(request, "read")
    after = request.query_params.get("after", "-")
    if not re.match(CURSOR, after) or (
        after != "-" and any(int(n) > MAX_SEQ for n in after.split("-"))
    ):
        raise HttpError(400, f"after {after[:40]!r} is not a cursor this API answered")
    limit = _query_int(request, "limit", 1000, 1, MAX_LIMIT)
    # a longer wait than the server's --max-wait waits that long, as every ?wait= does
    wait_s = min(_query_int(request, "wait", 0, 0, MAX_WAIT_S), api.config.max_wait_s)
    wid, name = request.path_params["id"], request.path_params["name"]

    def read() -> tuple[list[Any], str]:
        lines, cursor = read_logs(api.engine, wid, name, after, limit)
        if lines or not wait_s:
            return lines, cursor
        if api.engine.state(wid).finished:  # its last lines may have come since the read
            return read_logs(api.engine, wid, name, after, limit)
        # wait for the workflow's next flush (any task's), then read again
        api.engine.store.logs.wait_log_entries(
            wid, "$" if cursor == "-" else cursor, int(wait_s * 1000), 1
        )
        return read_logs(api.engine, wid, name, after, limit)

    lines, cursor = await run_in_threadpool(read)
    return JSONResponse({"lines": [x.to_dict() for x in lines], "cursor": cursor})


_LINE = {
    "type": "object",
    "properties": {
        "task": {"type": "string"},
        "key": {"type": "string", "description": "3, or 3.17 for an item of a map"},
        "attempt": {"type": "integer"},
        "ts": {"type": "number"},
        "source": {"type": "string", "enum": ["log", "stdout", "stderr"]},
        "text": {"type": "string"},
        "id": {"type": "string"},
    },
}


def path_item(common: dict[str, Any], error: Any) -> dict[str, Any]:
    """The OpenAPI path item (``common``: what any call may answer; ``error``: a JSON
    error response of a description)."""
    return {
        "get": {
            "summary": "What a task's handler wrote (logging, print, an --exec command's "
            "stderr), every attempt, after a cursor",
            "operationId": "getTaskLogs",
            "tags": ["workflows"],
            "parameters": [
                {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                {
                    "name": "name",
                    "in": "path",
                    "required": True,
                    "description": "the task's name (or index)",
                    "schema": {"type": "string"},
                },
                {
                    "name": "after",
                    "in": "query",
                    "required": False,
                    "description": "the cursor of the last answer (default: from the first line)",
                    "schema": {"type": "string", "pattern": CURSOR},
                },
                {
                    "name": "limit",
                    "in": "query",
                    "required": False,
                    "description": "at most this many flushes (each one attempt's lines)",
                    "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                },
                {
                    "name": "wait",
                    "in": "query",
                    "required": False,
                    "description": "seconds to wait for new lines while it runs (a long poll)",
                    "schema": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_S},
                },
            ],  # fmt: skip
            "responses": {
                "200": {
                    "description": "its lines, and the cursor to read on from",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "lines": {"type": "array", "items": _LINE},
                                    "cursor": {"type": "string"},
                                },
                            }
                        }
                    },
                },
                "400": error("a bad after, limit or wait"),
                "404": error("no such workflow, or no such task in it"),
                **common,
            },
        }
    }
