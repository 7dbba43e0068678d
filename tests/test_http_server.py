"""The HTTP API end to end: a real uvicorn server on a free loopback port, a real
redis-server behind it, httpx as the client."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import redis
import uvicorn
from engine_helpers import agent_thread, wait_for
from prometheus_client.parser import text_string_to_metric_families
from redis.backoff import NoBackoff
from redis.retry import Retry
from starlette.applications import Starlette

from engine import Engine, Task
from engine.http import HttpConfig, Tokens, create_app
from engine.http.auth import github_signature, standard_signature
from engine.http.triggers import new_trigger

READ = "read-token-0123456789"
WRITE = "write-token-0123456789"
WHSEC = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
JSON = {"Content-Type": "application/json"}  # a write's body is JSON or refused (415)

PIPELINE = """
name: pipeline
tasks:
  - name: fetch
    type: http
  - name: total
    type: http
    after: [fetch]
"""


@contextmanager
def serving(app: Starlette, **options: Any) -> Iterator[str]:
    """``app`` under uvicorn in a thread (with ``uvicorn.Config`` ``options``), on a
    loopback port of its own; its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", ws="none", lifespan="on", **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


Client = Callable[..., httpx.Client]


@pytest.fixture()
def client(engine: Engine) -> Iterator[Client]:
    """Start the app over ``engine`` (with ``tokens`` when given) and return a client."""
    opened: list[Any] = []

    def start(tokens: Tokens | None = None, eng: Engine | None = None) -> httpx.Client:
        app = create_app(eng or engine, HttpConfig(tokens=tokens or Tokens(), max_wait_s=60))
        ctx = serving(app)
        base = ctx.__enter__()
        http = httpx.Client(base_url=base, timeout=60)
        opened.append((ctx, http))
        return http

    yield start
    for ctx, http in reversed(opened):
        http.close()
        ctx.__exit__(None, None, None)


@pytest.fixture()
def api(engine: Engine, client: Client) -> httpx.Client:
    """An open server (no tokens) with template ``pipeline`` stored."""
    engine.put_template(PIPELINE)
    return client()


def _pushed(engine: Engine) -> int:
    return engine.stats().workflows_pushed


# -- runs -------------------------------------------------------------------------------


def test_a_run_answers_202_once_pushed(engine: Engine, api: httpx.Client) -> None:
    r = api.post("/v1/templates/pipeline/runs", json={"n": 3})
    assert r.status_code == 202
    body = r.json()
    assert body["status_url"] == f"/v1/workflows/{body['id']}"
    st = engine.status(body["id"])
    assert st.input == {"n": 3}
    assert st.name == "pipeline"
    assert [w.id for w in engine.list(template="pipeline")] == [body["id"]]
    got = api.get(body["status_url"]).json()
    assert got["id"] == body["id"]
    assert got["input"] == {"n": 3}
    assert [t["name"] for t in got["tasks"]] == ["fetch", "total"]


def test_an_idempotency_key_runs_once(engine: Engine, api: httpx.Client) -> None:
    headers = {"Idempotency-Key": "order-42"}
    first = api.post("/v1/templates/pipeline/runs", json={"n": 1}, headers=headers)
    again = api.post("/v1/templates/pipeline/runs", json={"n": 1}, headers=headers)
    assert first.status_code == 202
    assert again.status_code == 200
    assert again.json() == {
        "id": first.json()["id"],
        "status_url": first.json()["status_url"],
        "replayed": True,
    }
    assert _pushed(engine) == 1
    assert engine.count() == 1
    other = api.post("/v1/templates/pipeline/runs", headers={"Idempotency-Key": "order-43"})
    assert other.status_code == 202
    assert engine.count() == 2


def test_bad_requests_push_nothing(engine: Engine, api: httpx.Client) -> None:
    r = api.post(
        "/v1/templates/pipeline/runs",
        content=b'{\n  "n": 1,\n  "m": ]\n}',
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 400
    assert r.json()["error"].startswith("malformed JSON at line 3, column 8")
    r = api.post("/v1/templates/nope/runs", json={})
    assert r.status_code == 404
    assert "nope" in r.json()["error"]
    r = api.post("/v1/templates/pipeline/runs?wait=forever", json={})
    assert r.status_code == 400
    assert "wait" in r.json()["error"]
    r = api.post("/v1/templates/pipeline/runs", json=1, headers={"Idempotency-Key": "k" * 201})
    assert r.status_code == 400
    assert _pushed(engine) == 0


def test_a_body_over_the_payload_limit_is_413(redis_url: str, client: Client) -> None:
    small = Engine.connect(redis_url, max_payload=1000)
    try:
        small.put_template(PIPELINE)
        http = client(eng=small)
        big = b'"' + b"x" * 2000 + b'"'
        r = http.post("/v1/templates/pipeline/runs", content=big, headers=JSON)
        assert r.status_code == 413
        assert "1000-byte" in r.json()["error"]

        def chunked() -> Iterator[bytes]:  # no Content-Length: counted as it streams
            for _ in range(20):
                yield b"x" * 100

        r = http.post("/v1/templates/pipeline/runs", content=chunked(), headers=JSON)
        assert r.status_code == 413
        assert small.count() == 0
    finally:
        small.close()


def test_tokens_guard_reads_and_writes(engine: Engine, client: Client) -> None:
    engine.put_template(PIPELINE)
    http = client(Tokens(frozenset({READ}), frozenset({WRITE})))
    run = "/v1/templates/pipeline/runs"
    assert http.post(run, json={}).status_code == 401
    r = http.post(run, json={}, headers={"Authorization": "Bearer wrong-token-0123456789"})
    assert r.status_code == 401
    assert r.json() == {"error": "invalid bearer token"}
    r = http.post(run, json={}, headers={"Authorization": f"Bearer {READ}"})
    assert r.status_code == 403
    assert engine.count() == 0
    r = http.post(run, json={}, headers={"Authorization": f"Bearer {WRITE}"})
    assert r.status_code == 202
    wid = r.json()["id"]
    assert http.get(f"/v1/workflows/{wid}").status_code == 401
    for token in (READ, WRITE):
        got = http.get(f"/v1/workflows/{wid}", headers={"Authorization": f"Bearer {token}"})
        assert got.status_code == 200
    assert http.get("/metrics").status_code == 401
    assert http.get("/metrics", headers={"Authorization": f"Bearer {READ}"}).status_code == 200
    r = http.post(f"/v1/workflows/{wid}/cancel", headers={"Authorization": f"Bearer {READ}"})
    assert r.status_code == 403
    assert http.get("/openapi.json").status_code == 200  # the description is public


# -- waiting for the outcome ------------------------------------------------------------


def _fetch_and_total(task: Task) -> Any:
    if task.name == "fetch":
        if (task.input or {}).get("fail"):
            raise RuntimeError("the source is down")
        return [1, 2, 3]
    return {"sum": sum(task.parents["fetch"])}


def test_wait_returns_the_outputs(engine: Engine, api: httpx.Client) -> None:
    with agent_thread(engine, {"http": _fetch_and_total}):
        r = api.post("/v1/templates/pipeline/runs?wait=30s", json={})
        assert r.status_code == 200
        body = r.json()
        assert body["state"] == "succeeded"
        assert body["outputs"] == {"total": {"sum": 6}}
        # the same key again: the first run's outcome, nothing pushed
        key = {"Idempotency-Key": "k"}
        first = api.post("/v1/templates/pipeline/runs?wait=30s", json={}, headers=key)
        again = api.post("/v1/templates/pipeline/runs?wait=30s", json={}, headers=key)
    assert again.status_code == 200
    assert again.json() == {**first.json(), "replayed": True}
    assert engine.count() == 2


def test_wait_reports_a_failure_as_422(engine: Engine, api: httpx.Client) -> None:
    with agent_thread(engine, {"http": _fetch_and_total}):
        r = api.post("/v1/templates/pipeline/runs?wait=30s", json={"fail": True})
    assert r.status_code == 422
    body = r.json()
    assert body["state"] == "failed"
    assert "task fetch" in body["error"]
    assert "the source is down" in body["error"]
    assert "the source is down" in body["errors"]["fetch"]


def test_a_wait_that_expires_answers_202(engine: Engine, api: httpx.Client) -> None:
    r = api.post("/v1/templates/pipeline/runs?wait=0.3s", json={})  # no agent runs it
    assert r.status_code == 202
    assert r.json()["state"] == "running"
    assert r.json()["status_url"] == f"/v1/workflows/{r.json()['id']}"


# -- workflows --------------------------------------------------------------------------


def test_list_pages_with_a_cursor(engine: Engine, api: httpx.Client) -> None:
    ids = [api.post("/v1/templates/pipeline/runs", json={"n": n}).json()["id"] for n in range(5)]
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2, "template": "pipeline"}
        if cursor:
            params["cursor"] = cursor
        page = api.get("/v1/workflows", params=params).json()
        seen += [w["id"] for w in page["workflows"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(ids))
    assert api.get("/v1/workflows", params={"state": "paused"}).json()["workflows"] == []
    assert api.get("/v1/workflows", params={"template": "other"}).json()["workflows"] == []
    assert api.get("/v1/workflows", params={"state": "sleeping"}).status_code == 400
    assert api.get("/v1/workflows", params={"limit": 0}).status_code == 400
    assert api.get("/v1/workflows", params={"cursor": "x"}).status_code == 400


def test_steering(engine: Engine, api: httpx.Client) -> None:
    wid = api.post("/v1/templates/pipeline/runs", json={}).json()["id"]
    r = api.post(f"/v1/workflows/{wid}/pause")
    assert r.json() == {"id": wid, "op": "pause", "count": 1}
    assert engine.state(wid) == "paused"
    r = api.post(f"/v1/workflows/{wid}/pause")
    assert r.status_code == 409
    assert "paused" in r.json()["error"]
    assert api.post(f"/v1/workflows/{wid}/release").json()["count"] == 1
    assert api.post(f"/v1/workflows/{wid}/cancel").status_code == 200
    assert engine.state(wid) == "cancelled"
    assert api.post(f"/v1/workflows/{wid}/retry").status_code == 409
    assert api.post(f"/v1/workflows/{wid}/frob").status_code == 404
    assert api.post("/v1/workflows/999/cancel").status_code == 404
    assert api.get("/v1/workflows/999").status_code == 404
    assert api.get("/v1/workflows/abc").status_code == 404


def test_retry_of_named_tasks(engine: Engine, api: httpx.Client) -> None:
    with agent_thread(engine, {"http": _fetch_and_total}):
        wid = api.post("/v1/templates/pipeline/runs?wait=30s", json={"fail": True}).json()["id"]
    r = api.post(f"/v1/workflows/{wid}/retry", json={"tasks": ["nope"]})
    assert r.status_code == 404
    r = api.post(f"/v1/workflows/{wid}/retry", json={"tasks": "fetch"})
    assert r.status_code == 400
    r = api.post(f"/v1/workflows/{wid}/retry", json={"tasks": ["fetch"]})
    assert r.status_code == 200
    assert r.json()["count"] >= 1
    assert engine.state(wid) == "running"


def test_every_error_is_json(api: httpx.Client) -> None:
    for r in (
        api.get("/nowhere"),
        api.delete("/v1/workflows/1"),
        api.get("/v1/workflows/1"),
    ):
        assert r.status_code in (404, 405)
        assert set(r.json()) == {"error"}


def test_redis_unreachable_is_503(client: Client) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    no_retry = Retry(NoBackoff(), 0)  # redis-py's default retries take seconds
    dead = Engine(redis.Redis(port=port, decode_responses=True, retry=no_retry), push_retry_s=0)
    http = client(eng=dead)
    for r in (
        http.post("/v1/templates/pipeline/runs", json={}),
        http.get("/v1/workflows/1"),
        http.get("/v1/workflows"),
        http.get("/metrics"),
        http.get("/healthz"),
        http.post("/v1/triggers/gh", content=b"{}", headers=JSON),
    ):
        assert r.status_code == 503
        assert r.json()["error"].startswith("Redis unreachable")


# -- triggers ---------------------------------------------------------------------------


def _gh_post(http: httpx.Client, body: bytes, secret: str, delivery: str) -> httpx.Response:
    return http.post(
        "/v1/triggers/gh",
        content=body,
        headers={
            "X-Hub-Signature-256": github_signature(secret, body),
            "X-GitHub-Delivery": delivery,
            "Content-Type": "application/json",
        },
    )


def test_github_deliveries(engine: Engine, api: httpx.Client) -> None:
    engine.put_trigger(new_trigger("gh", "pipeline", "github", "s3cret", "X-GitHub-Delivery"))
    body = json.dumps({"ref": "refs/heads/main"}).encode()
    assert _gh_post(api, body, "wrong", "d-1").status_code == 401
    assert engine.count() == 0
    r = _gh_post(api, body, "s3cret", "d-1")
    assert r.status_code == 202
    wid = r.json()["id"]
    assert engine.status(wid).input == {"ref": "refs/heads/main"}
    again = _gh_post(api, body, "s3cret", "d-1")  # GitHub's redelivery
    assert again.status_code == 200
    assert again.json()["id"] == wid
    assert again.json()["replayed"] is True
    assert engine.count() == 1
    assert _gh_post(api, body, "s3cret", "d-2").status_code == 202
    assert engine.count() == 2
    # the run records who pushed it
    pushed = [e for e in engine.events() if e.wid == wid and e.kind == "workflow.pushed"]
    assert [e.data["by"] for e in pushed] == ["trigger:gh"]
    # no delivery header: refused, nothing pushed
    r = api.post(
        "/v1/triggers/gh",
        content=body,
        headers={"X-Hub-Signature-256": github_signature("s3cret", body), **JSON},
    )
    assert r.status_code == 400
    assert "X-GitHub-Delivery" in r.json()["error"]
    assert api.post("/v1/triggers/nope", content=body, headers=JSON).status_code == 404
    assert engine.count() == 2


def test_standard_webhooks_deliveries(engine: Engine, api: httpx.Client) -> None:
    engine.put_trigger(new_trigger("sw", "pipeline", "standard-webhooks", WHSEC, "webhook-id"))
    body = b'{"type": "invoice.paid"}'

    def post(msg_id: str, sent: int, secret: str = WHSEC) -> httpx.Response:
        headers = {
            "webhook-id": msg_id,
            "webhook-timestamp": str(sent),
            "webhook-signature": standard_signature(secret, msg_id, sent, body),
            **JSON,
        }
        return api.post("/v1/triggers/sw", content=body, headers=headers)

    now = int(time.time())
    other = "whsec_" + "QUJDREVGR0hJSktMTU5PUA=="
    assert post("msg_1", now, other).status_code == 401
    r = post("msg_1", now - 3600)  # an old delivery replayed
    assert r.status_code == 401
    assert "webhook-timestamp" in r.json()["error"]
    assert engine.count() == 0
    r = post("msg_1", now)
    assert r.status_code == 202
    assert engine.status(r.json()["id"]).input == {"type": "invoice.paid"}
    assert post("msg_1", now).json()["replayed"] is True
    assert engine.count() == 1


def test_bearer_and_open_triggers(engine: Engine, client: Client) -> None:
    engine.put_template(PIPELINE)
    # the server's own tokens do not apply to deliveries: the trigger's scheme does
    http = client(Tokens(frozenset(), frozenset({WRITE})))
    engine.put_trigger(new_trigger("hook", "pipeline", "bearer", "hook-secret-0123"))
    engine.put_trigger(new_trigger("open", "pipeline", "none"))
    r = http.post("/v1/triggers/hook", json={}, headers={"Authorization": f"Bearer {WRITE}"})
    assert r.status_code == 401
    hook = {"Authorization": "Bearer hook-secret-0123"}
    r = http.post("/v1/triggers/hook", json={}, headers=hook)
    assert r.status_code == 202
    assert http.post("/v1/triggers/open", json=[1]).status_code == 202
    assert http.post("/v1/triggers/open", json=[1]).status_code == 202  # no dedup asked
    assert engine.count() == 3


# -- metrics and the description --------------------------------------------------------


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics(engine: Engine, api: httpx.Client) -> None:
    engine.put_trigger(new_trigger("gh", "pipeline", "github", "s3cret", "X-GitHub-Delivery"))
    with agent_thread(engine, {"http": _fetch_and_total}):
        api.post("/v1/templates/pipeline/runs?wait=30s", json={})
    for n in range(3):
        api.post("/v1/templates/pipeline/runs", json={"n": n})
    _gh_post(api, b"{}", "s3cret", "d-1")
    _gh_post(api, b"{}", "s3cret", "d-1")
    _gh_post(api, b"{}", "wrong", "d-2")
    api.post("/v1/templates/pipeline/runs", content=b"{", headers=JSON)
    shard = engine.keys.shard(0)
    sec, _ = engine.redis.time()
    engine.redis.zadd(shard.schedules_due, {"nightly": (sec - 90) * 1000, "later": 1e15})
    r = api.get("/metrics")
    assert r.status_code == 200
    m = _samples(r.text)
    assert m[("redisflow_workflows", (("state", "running"),))] == 4
    assert m[("redisflow_workflows", (("state", "succeeded"),))] == 1
    assert m[("redisflow_workflows_pushed_total", ())] == 5
    assert m[("redisflow_tasks_ended_total", (("state", "succeeded"),))] == 2
    assert m[("redisflow_tasks_ended_total", (("state", "failed"),))] == 0
    assert m[("redisflow_tasks", (("state", "ready"),))] == 4
    assert m[("redisflow_queue_depth", (("type", "http"),))] == 4
    assert m[("redisflow_queue_oldest_age_seconds", (("type", "http"),))] >= 0
    assert m[("redisflow_agents", (("state", "stopped"),))] == 1
    assert m[("redisflow_schedule_lag_seconds", ())] >= 90
    assert m[("redisflow_http_rejected_total", (("reason", "bad_signature"),))] == 1
    assert m[("redisflow_http_rejected_total", (("reason", "bad_json"),))] == 1
    deliveries = "redisflow_http_deliveries_total"
    assert m[(deliveries, (("outcome", "accepted"), ("trigger", "gh")))] == 1
    assert m[(deliveries, (("outcome", "duplicate"), ("trigger", "gh")))] == 1


def test_queue_age_of_a_waiting_task(engine: Engine, api: httpx.Client) -> None:
    api.post("/v1/templates/pipeline/runs", json={})
    # the task waits as if made ready two minutes ago
    queues = [s.queue("http") for s in engine.keys.all_shards()]
    [member] = [m for q in queues for m in engine.redis.zrange(q, 0, 0)]
    wid, idx = member.split(":")
    key = engine.keys.shard_of(wid).workflow(wid)
    engine.redis.hincrby(key, "ct", -120_000)
    m = _samples(api.get("/metrics").text)
    assert m[("redisflow_queue_oldest_age_seconds", (("type", "http"),))] >= 120


def test_openapi_and_docs(api: httpx.Client) -> None:
    schema = api.get("/openapi.json").json()
    assert schema["openapi"].startswith("3.")
    assert "/v1/templates/{name}/runs" in schema["paths"]
    assert "/v1/triggers/{name}" in schema["paths"]
    page = api.get("/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "POST /v1/triggers/{name}" in page.text
    assert "<script" not in page.text
    assert api.get("/healthz").json() == {"ok": True}


def test_mounted_in_another_app(engine: Engine) -> None:
    from starlette.routing import Mount

    engine.put_template(PIPELINE)
    outer = Starlette(routes=[Mount("/flows", create_app(engine))])
    with serving(outer) as base, httpx.Client(base_url=base) as http:
        r = http.post("/flows/v1/templates/pipeline/runs", json={})
        assert r.status_code == 202
        assert r.json()["status_url"] == f"/flows/v1/workflows/{r.json()['id']}"
        assert http.get(r.json()["status_url"]).status_code == 200


def test_concurrent_runs_are_answered_each_with_its_own_outcome(
    engine: Engine, api: httpx.Client
) -> None:
    """Requests that arrive together are pushed together: a bad one fails alone, and one
    idempotency key sent many times at once still makes one workflow."""
    from concurrent.futures import ThreadPoolExecutor

    engine.put_template(
        "name: gated\nconcurrency: {key: customer, limit: 1}\ntasks:\n  - name: a\n"
    )

    def post(n: int) -> httpx.Response:
        if n % 10 == 3:  # no customer field: its concurrency key cannot be read
            return api.post("/v1/templates/gated/runs", json={"n": n})
        if n % 10 == 7:
            return api.post("/v1/templates/nope/runs", json={"n": n})
        if n % 2:
            return api.post("/v1/templates/pipeline/runs", json={"n": n})
        return api.post("/v1/templates/pipeline/runs", json={}, headers={"Idempotency-Key": "k"})

    with ThreadPoolExecutor(16) as pool:
        replies = list(pool.map(post, range(80)))
    by_kind: dict[str, set[int]] = {}
    for n, r in enumerate(replies):
        kind = {3: "bad", 7: "unknown"}.get(n % 10, "keyed" if n % 2 == 0 else "plain")
        by_kind.setdefault(kind, set()).add(r.status_code)
    assert by_kind["bad"] == {400}
    assert by_kind["unknown"] == {404}
    assert by_kind["plain"] == {202}
    keyed = [r.json() for n, r in enumerate(replies) if n % 2 == 0 and n % 10 not in (3, 7)]
    assert len({r["id"] for r in keyed}) == 1
    assert sum(not r.get("replayed") for r in keyed) == 1
    plain = sum(1 for n in range(80) if n % 2 and n % 10 not in (3, 7))
    assert engine.count() == plain + 1


def test_the_wait_listener_stops_when_no_one_waits(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.http import finished

    monkeypatch.setattr(finished, "IDLE_S", 0.2)
    engine.put_template(PIPELINE)
    app = create_app(engine)
    waiter = app.state.redisflow.waiter
    with serving(app) as base, httpx.Client(base_url=base, timeout=60) as http:
        assert http.post("/v1/templates/pipeline/runs?wait=0.1s").status_code == 202
        wait_for(lambda: waiter._listener is None, what="the listener to stop")
        with agent_thread(engine, {"http": _fetch_and_total}):  # a later wait starts it again
            assert http.post("/v1/templates/pipeline/runs?wait=30s").status_code == 200
