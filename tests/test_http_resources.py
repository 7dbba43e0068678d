"""The HTTP API as complete as the CLI: templates, schedules, triggers (secrets never
answered), agents, workflows pushed as JSON, and live event streams (Server-Sent Events,
resumed from Last-Event-ID). A real uvicorn server and redis-server; httpx as client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from engine_helpers import agent_thread, wait_for
from test_http_server import READ, WRITE, Client, client  # noqa: F401 - the fixture

from engine import Engine, Task
from engine.http import Tokens

PIPELINE = {"name": "pipeline", "tasks": [{"name": "fetch", "type": "http"},
            {"name": "total", "type": "http", "after": ["fetch"]}]}  # fmt: skip
SECRET = "s3cret-value-that-must-never-come-back"


@pytest.fixture()
def api(client: Client) -> httpx.Client:  # noqa: F811
    return client()


def sse(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """The messages of an SSE stream: {"event", "data", "id"} (comments skipped)."""
    msg: dict[str, Any] = {}
    for line in lines:
        if not line:
            if "data" in msg or "id" in msg:
                yield msg
            msg = {}
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            msg[field] = json.loads(value) if field == "data" else value


# -- templates --------------------------------------------------------------------------


def test_templates_put_list_get_and_delete(engine: Engine, api: httpx.Client) -> None:
    r = api.put("/v1/templates/pipeline", json=PIPELINE)
    assert (r.status_code, r.json()) == (201, {"name": "pipeline", "version": 1, "new": True})
    again = api.put("/v1/templates/pipeline", json=PIPELINE)
    assert (again.status_code, again.json()["new"]) == (200, False)
    assert [t["name"] for t in api.get("/v1/templates").json()["templates"]] == ["pipeline"]
    got = api.get("/v1/templates/pipeline").json()
    assert got["version"] == 1 and json.loads(got["text"]) == PIPELINE
    assert engine.template("pipeline").version == 1
    assert api.get("/v1/templates/pipeline?version=7").status_code == 404
    assert api.get("/v1/templates/pipeline?version=x").status_code == 400
    assert api.delete("/v1/templates/pipeline").json() == {"removed": "pipeline"}
    assert api.get("/v1/templates/pipeline").status_code == 404
    assert api.delete("/v1/templates/pipeline").status_code == 404


def test_a_bad_template_says_what_and_where_and_writes_nothing(
    engine: Engine, api: httpx.Client
) -> None:
    body = '{"name": "p",\n "tasks": [\n  {"name": "a", "after": ["nope"]}]}'
    r = api.put("/v1/templates/p", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"].startswith("body.json:3:")
    assert "nope" in r.json()["error"]
    assert engine.templates() == []


# -- workflows pushed from a definition ----------------------------------------------


def test_a_workflow_pushed_as_json(engine: Engine, api: httpx.Client) -> None:
    r = api.post("/v1/workflows", json=PIPELINE)
    assert r.status_code == 202
    wid = r.json()["id"]
    assert [t.name for t in engine.status(wid).tasks] == ["fetch", "total"]
    key = {"Idempotency-Key": "k-1"}
    first = api.post("/v1/workflows", json=PIPELINE, headers=key)
    replay = api.post("/v1/workflows", json=PIPELINE, headers=key)
    assert (first.status_code, replay.status_code) == (202, 200)
    assert replay.json()["replayed"] is True and replay.json()["id"] == first.json()["id"]
    assert engine.count() == 2


def test_a_bad_workflow_is_refused_whole(engine: Engine, api: httpx.Client) -> None:
    cycle = (
        '{"name": "c", "tasks": [\n {"name": "a", "after": ["b"]},\n'
        ' {"name": "b", "after": ["a"]}]}'
    )
    r = api.post("/v1/workflows", content=cycle, headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert "cycle" in r.json()["error"]
    bad = api.post(
        "/v1/workflows", content='{"tasks": [1]}', headers={"Content-Type": "application/json"}
    )
    assert bad.status_code == 400 and bad.json()["error"].startswith("body.json")
    assert api.post("/v1/workflows", json=[]).status_code == 400
    assert engine.count() == 0


# -- schedules --------------------------------------------------------------------------


def test_schedules_put_list_pause_trigger_and_delete(engine: Engine, api: httpx.Client) -> None:
    engine.put_template(json.dumps(PIPELINE))
    r = api.put("/v1/schedules/nightly", json={"template": "pipeline", "cron": "0 2 * * *"})
    assert (r.status_code, r.json()) == (201, {"name": "nightly", "new": True})
    assert engine.schedule("nightly").cron == "0 2 * * *"
    listed = api.get("/v1/schedules").json()["schedules"]
    assert [s["name"] for s in listed] == ["nightly"]
    assert api.get("/v1/schedules/nightly").json()["when"] == "cron 0 2 * * *"
    paused = api.post("/v1/schedules/nightly/pause").json()
    assert paused == {"name": "nightly", "paused": True, "changed": True}
    assert engine.schedule("nightly").paused
    assert api.post("/v1/schedules/nightly/unpause").json()["changed"] is True
    tick = api.post("/v1/schedules/nightly/trigger").json()
    assert tick["what"] == "fired" and engine.status(tick["run"]).name == "pipeline"
    assert api.delete("/v1/schedules/nightly").json() == {"removed": "nightly"}
    assert api.get("/v1/schedules/nightly").status_code == 404
    for op in ("pause", "unpause", "trigger"):
        assert api.post(f"/v1/schedules/nightly/{op}").status_code == 404


def test_a_bad_schedule_is_refused(engine: Engine, api: httpx.Client) -> None:
    r = api.put("/v1/schedules/s", json={"template": "gone", "every": "1h"})
    assert r.status_code == 400 and "'gone' does not exist" in r.json()["error"]
    engine.put_template(json.dumps(PIPELINE))
    r = api.put("/v1/schedules/s", json={"template": "pipeline", "cron": "61 * * * *"})
    assert r.status_code == 400 and "cron" in r.json()["error"]
    r = api.put("/v1/schedules/s", json={"template": "pipeline", "every": "1h", "name": "t"})
    assert r.status_code == 400
    assert engine.schedules() == []


# -- triggers ---------------------------------------------------------------------------


def test_triggers_never_answer_their_secret(engine: Engine, api: httpx.Client) -> None:
    engine.put_template(json.dumps(PIPELINE))
    r = api.put(
        "/v1/triggers/gh",
        json={"template": "pipeline", "auth": "bearer", "secret": SECRET,
              "idempotency_header": "X-Delivery"},
    )  # fmt: skip
    assert r.status_code == 200, r.text
    assert engine.trigger("gh").secret == SECRET
    answers = [r, api.get("/v1/triggers"), api.get("/v1/triggers/gh")]
    for a in answers:
        assert SECRET not in a.text and '"secret"' not in a.text
    assert answers[2].json()["has_secret"] is True
    assert answers[1].json()["triggers"][0]["auth"] == "bearer"
    # the stored trigger takes deliveries
    ok = api.post("/v1/triggers/gh", json={}, headers={"Authorization": f"Bearer {SECRET}",
                                                       "X-Delivery": "1"})  # fmt: skip
    assert ok.status_code == 202
    assert api.delete("/v1/triggers/gh").json() == {"removed": "gh"}
    assert api.get("/v1/triggers/gh").status_code == 404


def test_a_trigger_without_a_secret_is_refused(engine: Engine, api: httpx.Client) -> None:
    engine.put_template(json.dumps(PIPELINE))
    r = api.put("/v1/triggers/t", json={"template": "pipeline", "auth": "github"})
    assert r.status_code == 400 and "needs a secret" in r.json()["error"]
    r = api.put("/v1/triggers/t", json={"template": "x", "auth": "none"})
    assert r.status_code == 400 and "does not exist" in r.json()["error"]
    r = api.put("/v1/triggers/t", json={"template": "pipeline", "auth": "none", "sekret": "x"})
    assert r.status_code == 400 and "unknown field" in r.json()["error"]
    assert engine.triggers() == []


# -- agents, the root, methods ------------------------------------------------------------


def test_agents_are_listed(engine: Engine, api: httpx.Client) -> None:
    assert api.get("/v1/agents").json() == {"agents": []}
    with agent_thread(engine, {"http": lambda t: None}, "a7"):
        # registered once its thread has run a step
        agents = wait_for(lambda: api.get("/v1/agents").json()["agents"], what="the agent")
    assert [a["id"] for a in agents] == ["a7"] and agents[0]["types"] == ["http"]


def test_the_root_points_at_the_docs_and_405_names_the_methods(api: httpx.Client) -> None:
    r = api.get("/", follow_redirects=False)
    assert r.status_code in (302, 307) and r.headers["location"] == "/docs"
    r = api.patch("/v1/triggers/x")
    assert r.status_code == 405
    assert set(r.headers["allow"].split(", ")) == {"GET", "HEAD", "PUT", "DELETE", "POST"}
    r = api.post("/v1/workflows/1/events")
    assert (r.status_code, r.headers["allow"]) == (405, "GET, HEAD")


def test_tokens_guard_every_new_endpoint(engine: Engine, client: Client) -> None:  # noqa: F811
    http = client(Tokens(frozenset({READ}), frozenset({WRITE})))
    read, write = ({"Authorization": f"Bearer {t}"} for t in (READ, WRITE))
    for path in ("/v1/templates", "/v1/schedules", "/v1/triggers", "/v1/agents"):
        assert http.get(path).status_code == 401
        assert http.get(path, headers=read).status_code == 200
    assert http.put("/v1/templates/p", json=PIPELINE, headers=read).status_code == 403
    assert http.post("/v1/workflows", json=PIPELINE, headers=read).status_code == 403
    assert http.get("/v1/events").status_code == 401
    assert http.put("/v1/templates/p", json=PIPELINE, headers=write).status_code == 201
    schema = http.get("/openapi.json").json()
    assert schema["paths"]["/v1/templates/{name}"]["put"]["security"] == [{"bearer": []}]
    assert "security" not in schema["paths"]["/healthz"]["get"]


# -- event streams ------------------------------------------------------------------------


def test_the_event_stream_is_live_and_resumes_from_last_event_id(
    engine: Engine, api: httpx.Client
) -> None:
    with api.stream("GET", "/v1/events") as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        wid = api.post("/v1/workflows", json=PIPELINE).json()["id"]
        got = None
        for msg in sse(r.iter_lines()):
            if msg.get("event") == "workflow.pushed" and msg["data"]["wid"] == wid:
                got = msg
                break
    assert got is not None
    # the id is on the last message of a read: resume after the last one seen
    last_id = got.get("id")
    assert last_id is not None, got
    second = api.post("/v1/workflows", json=PIPELINE).json()["id"]
    with api.stream("GET", "/v1/events", headers={"Last-Event-ID": last_id}) as r:
        for msg in sse(r.iter_lines()):
            if "data" in msg:
                assert msg["data"]["wid"] != wid  # nothing before the id again
                if msg["event"] == "workflow.pushed" and msg["data"]["wid"] == second:
                    break
    assert api.get("/v1/events", headers={"Last-Event-ID": "x" * 12_001}).status_code == 400


def test_a_workflows_stream_ends_when_it_finishes(engine: Engine, api: httpx.Client) -> None:
    wid = api.post("/v1/workflows", json=PIPELINE).json()["id"]

    def ok(task: Task) -> Any:
        return 1

    with api.stream("GET", f"/v1/workflows/{wid}/events") as r:
        with agent_thread(engine, {"http": ok}):
            msgs = [m for m in sse(r.iter_lines()) if "data" in m]
    kinds = [m["event"] for m in msgs]
    assert kinds[0] == "workflow.pushed" and kinds[-1] == "workflow.succeeded"
    assert {m["data"]["wid"] for m in msgs} == {wid}
    assert any(m["data"].get("task_name") == "total" for m in msgs)
    # read again after the end: the same events, from its first; resumed after it: 204
    again = [
        m for m in sse(api.get(f"/v1/workflows/{wid}/events").text.splitlines()) if "data" in m
    ]
    assert [m["event"] for m in again] == kinds
    last = msgs[-1]["id"]
    done = api.get(f"/v1/workflows/{wid}/events", headers={"Last-Event-ID": last})
    assert done.status_code == 204
    assert api.get("/v1/workflows/999999/events").status_code == 404


def test_a_stream_that_sees_the_end_late_still_sends_it(
    engine: Engine, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workflow finishes between the stream's read of the events and its look at the
    state (made to happen here): the events that ended it are sent, then the stream ends."""
    from engine_helpers import Hand

    from engine.http.stream import encode_cursor

    wid = api.post("/v1/workflows", json=PIPELINE).json()["id"]
    seen = {s.shard: "0-0" for s in engine.keys.all_shards()}
    engine.events_after(seen)  # up to now: the stream starts after the push
    real = engine.state

    def finished_meanwhile(w: str) -> Any:
        monkeypatch.setattr(engine, "state", real)
        hand = Hand(engine)
        for _ in range(2):
            hand.succeed(hand.claim_one("http"), 1)
        return real(w)

    monkeypatch.setattr(engine, "state", finished_meanwhile)
    r = api.get(f"/v1/workflows/{wid}/events", headers={"Last-Event-ID": encode_cursor(seen)})
    assert r.status_code == 200
    kinds = [m["event"] for m in sse(r.text.splitlines()) if "data" in m]
    assert kinds[-1] == "workflow.succeeded" and "workflow.pushed" not in kinds
