"""``POST /v1/agents/{id}/drain``: ask an agent to drain and stop
(:func:`engine.runtime.agent_ops.drain`): at its next heartbeat it stops claiming, finishes and
reports what it runs, and leaves."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

if TYPE_CHECKING:
    from .api import Api


async def drain_agent(api: Api, request: Request) -> Response:
    """POST /v1/agents/{id}/drain"""
    api.auth(request, "write")
    agent = request.path_params["id"]
    await run_in_threadpool(api.engine.drain_agent, agent)
    return JSONResponse({"agent": agent, "draining": True})


def openapi_paths(common: dict[str, Any], write: dict[str, Any]) -> dict[str, Any]:
    """The path item of ``POST /v1/agents/{id}/drain`` (merged by :mod:`.openapi`)."""

    def body(schema: dict[str, Any], text: str) -> dict[str, Any]:
        return {"description": text, "content": {"application/json": {"schema": schema}}}

    error = {"$ref": "#/components/schemas/Error"}
    answer = {
        "type": "object",
        "properties": {"agent": {"type": "string"}, "draining": {"type": "boolean"}},
    }
    return {
        "/v1/agents/{id}/drain": {
            "post": {
                "summary": "Ask an agent to drain: it stops claiming, finishes and reports "
                "what it runs, and exits (at its next heartbeat)",
                "operationId": "drainAgent",
                "tags": ["agents"],
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {
                    "200": body(answer, "asked"),
                    "404": body(error, "no such agent"),
                    "409": body(error, "the agent is not live (stopped, or dead)"),
                    **common,
                    **write,
                },
            }
        }
    }
