"""Signals over HTTP: by run id and by the run's idempotency key, ids applied once,
refusals as JSON with their status."""

from __future__ import annotations

import hashlib

import httpx
from test_http_server import JSON, READ, WRITE, Client, client  # noqa: F401 - the fixture

from engine import Engine, Workflow
from engine.http import Tokens


def approval() -> Workflow:
    wf = Workflow("approval")
    g = wf.task("approve", wait={"signal": "approve"})
    wf.task("ship", after=[g])
    return wf


def test_a_signal_by_id_and_by_key(engine: Engine, client: Client) -> None:  # noqa: F811
    api: httpx.Client = client()
    wid = engine.push(approval())
    r = api.post(
        f"/v1/workflows/{wid}/signals/approve",
        json={"payload": {"ok": True}, "comment": "fine", "by": "ops"},
        headers={"Idempotency-Key": "sig-1"},
    )
    assert r.status_code == 200, r.text
    assert r.json() == {
        "workflow_id": str(wid), "name": "approve", "outcome": "delivered", "task": "approve"
    }  # fmt: skip
    again = api.post(
        f"/v1/workflows/{wid}/signals/approve", json={}, headers={"Idempotency-Key": "sig-1"}
    )
    assert (again.status_code, again.json()["outcome"]) == (200, "duplicate:delivered")
    st = engine.status(wid)
    assert st.task("approve").output == {"ok": True}
    assert st.task("approve").signal["by"] == "ops"  # type: ignore[index]

    keyed = engine.push(approval(), key="order-8812")
    wf = Workflow("early")
    a = wf.task("a")
    wf.task("w", after=[a], wait={"signal": "paid"})
    early = engine.push(wf, key="order-9")
    r = api.post("/v1/signals/paid?key=order-9", json={"payload": 42})
    assert (r.status_code, r.json()["outcome"]) == (202, "kept")
    r = api.post("/v1/signals/approve?key=order-8812", content=b"", headers=JSON)
    assert r.status_code == 200
    assert engine.status(keyed).task("approve").state == "succeeded"
    assert engine.status(early).task("w").state == "waiting"


def test_refusals(engine: Engine, client: Client) -> None:  # noqa: F811
    api: httpx.Client = client()
    wid = engine.push(approval())
    cases = [
        (f"/v1/workflows/{wid}/signals/nope", {}, 409, "no task waiting for signal nope"),
        ("/v1/workflows/999/signals/approve", {}, 404, "does not exist"),
        ("/v1/signals/approve?key=nobody", {}, 404, "nobody"),
        ("/v1/signals/approve", {}, 400, "?key="),
        (f"/v1/workflows/{wid}/signals/approve", {"paylod": 1}, 400, "unknown field 'paylod'"),
        (f"/v1/workflows/{wid}/signals/approve", {"reject": "yes"}, 400, "true or false"),
        (f"/v1/workflows/{wid}/signals/approve", [1], 400, "JSON object"),
    ]
    for path, body, code, text in cases:
        r = api.post(path, json=body)
        assert r.status_code == code, (path, r.text)
        assert text in r.json()["error"], (path, r.text)
    assert engine.status(wid).task("approve").state == "ready"  # nothing was written


def test_a_signal_needs_a_write_token(engine: Engine, client: Client) -> None:  # noqa: F811
    api: httpx.Client = client(Tokens(read=frozenset({READ}), write=frozenset({WRITE})))
    wid = engine.push(approval())
    path = f"/v1/workflows/{wid}/signals/approve"
    assert api.post(path, json={}).status_code == 401
    assert api.post(path, json={}, headers={"Authorization": f"Bearer {READ}"}).status_code == 403
    ok = api.post(path, json={}, headers={"Authorization": f"Bearer {WRITE}"})
    assert ok.status_code == 200


def test_a_signal_records_the_token_that_sent_it(engine: Engine, client: Client) -> None:  # noqa: F811
    other = "w" * 24
    api: httpx.Client = client(
        Tokens(write=frozenset({WRITE, other}), labels=frozenset({(WRITE, "ci-bot")}))
    )
    wf = Workflow("three")
    for name in ("a", "b", "c"):
        wf.task(name, wait={"signal": "go"})
    wid = engine.push(wf)
    path = f"/v1/workflows/{wid}/signals/go"
    for body, token in (({"by": "the-ceo"}, WRITE), ({}, WRITE), ({"by": "x"}, other)):
        r = api.post(path, json=body, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200, r.text
    st = engine.status(wid)
    got = [(st.task(n).signal or {}).get("by") for n in "abc"]
    ids = [(st.task(n).signal or {}).get("identity") for n in "abc"]
    fingerprint = "token sha256:" + hashlib.sha256(other.encode()).hexdigest()[:8]
    assert got == ["the-ceo", "token ci-bot", "x"]  # as claimed; by default the label
    assert ids == ["token ci-bot", "token ci-bot", fingerprint]
    seen = [e.data for e in engine.events(20) if e.kind == "workflow.signal"]
    assert {(d["by"], d["identity"]) for d in seen} == set(zip(got, ids, strict=True))

    open_api: httpx.Client = client()  # no token: loopback only, anyone
    wid = engine.push(approval())
    r = open_api.post(f"/v1/workflows/{wid}/signals/approve", json={"by": "bob"})
    assert r.status_code == 200, r.text
    sig = engine.status(wid).task("approve").signal or {}
    assert (sig["by"], sig["identity"]) == ("bob", "anonymous")


def test_a_full_mailbox_answers_409_and_keeps_nothing(engine: Engine, client: Client) -> None:  # noqa: F811
    api: httpx.Client = client()
    wf = Workflow("early")
    a = wf.task("a")
    wf.task("w", after=[a], wait={"signal": "paid"})
    wid = engine.push(wf)
    for k in range(100):
        assert api.post(f"/v1/workflows/{wid}/signals/paid", json={"payload": k}).status_code == 202
    box = engine.keys.shard_of(wid).mailbox(wid, "paid")
    r = api.post(f"/v1/workflows/{wid}/signals/paid", json={"payload": 100})
    assert r.status_code == 409
    assert "already keeps 100 signals paid" in r.json()["error"]
    assert engine.redis.llen(box) == 100
    assert engine.redis.lindex(box, -1).endswith("\n99")
