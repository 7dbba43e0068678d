"""The HTTP server exposed: what a browser page, a rebinding name, odd numbers, cut and
slow clients can and cannot do. A real uvicorn (in this process, or ``redisflow serve``
as a user runs it) on a loopback port, a real redis-server behind it; raw sockets for the
clients that misbehave."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest
from engine_helpers import BIN, ROOT, cli, one_line_error
from starlette.applications import Starlette
from test_http_server import serving as serving_at

from engine import Engine
from engine.http import HttpConfig, Tokens, create_app
from engine.http.openapi import SCHEMA, schema_for
from engine.http.server import Settings

PIPELINE = "name: pipeline\ntasks:\n  - name: fetch\n    type: http\n"
JSON = {"Content-Type": "application/json"}
WRITE = "write-token-0123456789"

# guards of the HTTP layer: the same whatever Redis is behind it
pytestmark = pytest.mark.same_on_cluster


# -- servers and raw clients ------------------------------------------------------------


@contextmanager
def serving(app: Starlette, settings: Settings | None = None) -> Iterator[int]:
    """``app`` under uvicorn in a thread, with the timeouts and cap of ``settings`` when
    given (as ``redisflow serve`` runs it), on a loopback port of its own; its port."""
    options = {} if settings is None else settings.uvicorn_options()
    with serving_at(app, **options) as base:
        yield int(base.rsplit(":", 1)[1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def redisflow_serve(env: dict[str, str], *extra: str) -> Iterator[tuple[int, list[str]]]:
    """``redisflow serve`` on a free port with ``extra`` options, until SIGTERM; yields
    the port and a list that receives its stderr lines once it has stopped."""
    port = _free_port()
    proc = subprocess.Popen(
        [str(BIN / "redisflow"), "serve", "--port", str(port), *extra],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    err: list[str] = []
    try:
        deadline = time.monotonic() + 30
        while True:  # up once it answers anything (its Host rules may refuse this one)
            assert proc.poll() is None, proc.communicate()[1]
            try:
                if raw(port, b"GET /healthz HTTP/1.0\r\n\r\n", timeout=5):
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        yield port, err
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        try:
            _, text = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            _, text = proc.communicate(timeout=30)
        err.extend(text.splitlines())
    assert proc.returncode == 0, "\n".join(err)


def raw(port: int, data: bytes, timeout: float = 30) -> bytes:
    """Send ``data`` on a new connection, then read until the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        return _read_all(s)


def _read_all(s: socket.socket) -> bytes:
    got = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            return got
        if not chunk:
            return got
        got += chunk


def status_of(reply: bytes) -> int:
    """The status code of a raw HTTP reply (0: none)."""
    if not reply.startswith(b"HTTP/1.1 "):
        return 0
    return int(reply[9:12])


@pytest.fixture()
def pushed(engine: Engine) -> Engine:
    engine.put_template(PIPELINE)
    return engine


# -- writes from browser pages ----------------------------------------------------------


def test_a_browser_page_cannot_push_or_steer(pushed: Engine) -> None:
    """Simple cross-site requests (text/plain and form bodies, or no body with a page's
    Origin) are refused before anything runs; the server's own pages and clients that
    are not browsers still write."""
    engine = pushed
    with (
        serving(create_app(engine)) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http,
    ):
        run = "/v1/templates/pipeline/runs"
        for headers in (
            {"Content-Type": "text/plain"},
            {"Content-Type": "application/x-www-form-urlencoded"},
            {"Content-Type": "multipart/form-data; boundary=x"},
            {},  # a body without a type (fetch() of a Blob)
        ):
            r = http.post(run, content=b'{"n": 1}', headers=headers)
            assert r.status_code == 415, headers
            assert "application/json" in r.json()["error"]
        assert engine.count() == 0
        r = http.post(
            run, content=b"{}", headers={"Content-Type": "application/json; charset=utf-8"}
        )
        assert r.status_code == 202
        wid = r.json()["id"]

        cancel = f"/v1/workflows/{wid}/cancel"
        for headers in (
            {"Origin": "http://evil.example"},
            {"Origin": "null"},
            {"Origin": f"http://localhost:{port}"},  # another origin than the Host's
            {"Sec-Fetch-Site": "cross-site"},
            {"Sec-Fetch-Site": "same-site"},  # another port of this host
            {"Origin": "http://evil.example", "Content-Type": "application/json"},
        ):
            r = http.post(cancel, headers=headers)
            assert r.status_code == 403, headers
            assert set(r.json()) == {"error"}
        r = http.post(cancel, content=b"", headers={"Content-Type": "text/plain"})
        assert r.status_code == 415  # even without a body: a form's type is not JSON
        r = http.post(run, json={}, headers={"Origin": "https://evil.example"})
        assert r.status_code == 403
        assert engine.state(wid) == "running"
        assert engine.count() == 1

        # a page of this server, a same-origin fetch, curl: allowed
        r = http.post(f"/v1/workflows/{wid}/pause", headers={"Origin": f"http://127.0.0.1:{port}"})
        assert r.status_code == 200
        r = http.post(f"/v1/workflows/{wid}/release", headers={"Sec-Fetch-Site": "same-origin"})
        assert r.status_code == 200
        assert http.post(cancel).status_code == 200
        assert engine.state(wid) == "cancelled"
        # reads are not writes: a cross-site GET is answered (the browser hides it)
        assert http.get(f"/v1/workflows/{wid}", headers={"Sec-Fetch-Site": "cross-site"}).is_success


def test_deliveries_are_json_and_not_from_pages(pushed: Engine) -> None:
    from engine.http.triggers import new_trigger

    engine = pushed
    engine.put_trigger(new_trigger("open", "pipeline", "none"))
    with (
        serving(create_app(engine)) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http,
    ):
        r = http.post(
            "/v1/triggers/open",
            content=b"payload=%7B%7D",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert r.status_code == 415
        r = http.post("/v1/triggers/open", json={}, headers={"Origin": "http://evil.example"})
        assert r.status_code == 403
        assert engine.count() == 0
        r = http.post(
            "/v1/triggers/open",
            content=b"{}",
            headers={"Content-Type": "application/cloudevents+json"},
        )
        assert r.status_code == 202
        assert http.post("/v1/triggers/open", json={"a": 1}).status_code == 202
        assert engine.count() == 2


def test_allowed_origins_may_call_the_api(pushed: Engine) -> None:
    app = create_app(pushed, HttpConfig(allowed_origins=("https://app.example.com",)))
    with (
        serving(app) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http,
    ):
        page = {"Origin": "https://app.example.com", "Sec-Fetch-Site": "cross-site"}
        pre = http.options(
            "/v1/templates/pipeline/runs",
            headers={
                **page,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type",
            },
        )
        assert pre.status_code == 200
        assert pre.headers["access-control-allow-origin"] == "https://app.example.com"
        r = http.post("/v1/templates/pipeline/runs", json={}, headers=page)
        assert r.status_code == 202
        assert r.headers["access-control-allow-origin"] == "https://app.example.com"
        r = http.post("/v1/templates/pipeline/runs", json={}, headers={"Origin": "https://x.com"})
        assert r.status_code == 403
    assert pushed.count() == 1


# -- Host: DNS rebinding ----------------------------------------------------------------


@pytest.mark.slow
def test_only_the_servers_own_names_are_answered(pushed: Engine) -> None:
    with serving(create_app(pushed)) as port:
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "LOCALHOST"):
            reply = raw(
                port,
                f"GET /v1/workflows HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode(),
            )
            assert status_of(reply) == 200, host
        for request in (
            f"GET /v1/workflows HTTP/1.1\r\nHost: evil.example:{port}\r\n",  # rebound name
            "GET /metrics HTTP/1.1\r\nHost: evil.example\r\n",
            "GET /healthz HTTP/1.1\r\nHost: localhost.evil.example\r\n",
            "GET /v1/workflows HTTP/1.0\r\n",  # no Host at all
            f"GET /v1/workflows HTTP/1.1\r\nHost: localhost:{port}\r\nHost: evil.example\r\n",
            f"POST /v1/templates/pipeline/runs HTTP/1.1\r\nHost: evil.example:{port}\r\n"
            "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
        ):
            data = request if request.endswith("{}") else request + "Connection: close\r\n\r\n"
            reply = raw(port, data.encode())
            assert status_of(reply) == 421, request
            assert b'{"error"' in reply
    assert pushed.count() == 0


def test_allowed_hosts_are_configurable(pushed: Engine) -> None:
    app = create_app(pushed, HttpConfig(allowed_hosts=("flows.example.com:8443", "alias")))
    with serving(app) as port:

        def get(host: str) -> int:
            return status_of(
                raw(
                    port,
                    f"GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode(),
                )
            )

        assert get("flows.example.com:8443") == 200
        assert get("flows.example.com:8080") == 421
        assert get("flows.example.com") == 421
        assert get("alias:1") == 200
        assert get("alias") == 200
        assert get(f"127.0.0.1:{port}") == 421
    with serving(create_app(pushed, HttpConfig(allowed_hosts=("*",)))) as port:
        reply = raw(port, b"GET /healthz HTTP/1.1\r\nHost: anything\r\nConnection: close\r\n\r\n")
        assert status_of(reply) == 200


def test_serve_answers_its_bound_names_and_allowed_hosts(
    pushed: Engine, cli_env: dict[str, str]
) -> None:
    with redisflow_serve(cli_env) as (port, _):
        base = "GET /healthz HTTP/1.1\r\nConnection: close\r\nHost: "
        assert status_of(raw(port, f"{base}127.0.0.1:{port}\r\n\r\n".encode())) == 200
        assert status_of(raw(port, f"{base}localhost:{port}\r\n\r\n".encode())) == 200
        assert status_of(raw(port, f"{base}evil.example:{port}\r\n\r\n".encode())) == 421
        assert status_of(raw(port, f"{base}127.0.0.1\r\n\r\n".encode())) == 200  # any port
        assert status_of(raw(port, f"{base}evil.example\r\n\r\n".encode())) == 421
    env = {**cli_env, "REDISFLOW_HTTP_ALLOWED_HOSTS": "flows.internal, other"}
    with redisflow_serve(env, "--allowed-host", "evil.example") as (port, _):
        base = "GET /healthz HTTP/1.1\r\nConnection: close\r\nHost: "
        assert status_of(raw(port, f"{base}evil.example:{port}\r\n\r\n".encode())) == 200
        # the option replaces the variable, and the defaults
        assert status_of(raw(port, f"{base}flows.internal\r\n\r\n".encode())) == 421
        assert status_of(raw(port, f"{base}127.0.0.1:{port}\r\n\r\n".encode())) == 421
    with redisflow_serve(env) as (port, _):
        base = "GET /healthz HTTP/1.1\r\nConnection: close\r\nHost: "
        assert status_of(raw(port, f"{base}flows.internal:{port}\r\n\r\n".encode())) == 200
        assert status_of(raw(port, f"{base}localhost:{port}\r\n\r\n".encode())) == 421


@pytest.mark.slow
def test_workers_have_the_same_guards_and_timeouts(pushed: Engine, cli_env: dict[str, str]) -> None:
    """With --workers the app and protocol are built again in each process."""
    with redisflow_serve(cli_env, "--workers", "2", "--header-timeout", "1s") as (port, err):
        base = "GET /healthz HTTP/1.1\r\nConnection: close\r\nHost: "
        for _ in range(4):  # each worker, likely
            assert status_of(raw(port, f"{base}localhost:{port}\r\n\r\n".encode())) == 200
            assert status_of(raw(port, f"{base}evil.example:{port}\r\n\r\n".encode())) == 421
            started = time.monotonic()
            assert status_of(raw(port, b"GET /healthz HTTP/1.1\r\nHost: loc")) == 408
            assert time.monotonic() - started < 20
        r = httpx.post(
            f"http://127.0.0.1:{port}/v1/templates/pipeline/runs",
            content=b"{}",
            headers={"Content-Type": "text/plain"},
        )
        assert r.status_code == 415
    assert pushed.count() == 0
    assert "Traceback" not in "\n".join(err)


def test_serve_refuses_bad_names_and_limits(cli_env: dict[str, str]) -> None:
    for args, says in (
        (["--allowed-host", "a b"], "--allowed-host"),
        (["--allowed-host", "::1"], "in brackets"),
        (["--allowed-origin", "app.example.com"], "not an origin"),
        (["--allowed-origin", "https://app.example.com/path"], "not an origin"),
        (["--header-timeout", "0"], "--header-timeout"),
        (["--body-timeout", "forever"], "--body-timeout"),
        (["--max-connections", "0"], "--max-connections"),
    ):
        r = cli("serve", *args, env=cli_env)
        assert r.returncode == 2, args
        assert says in r.stderr, (args, r.stderr)
    r = cli("serve", env={**cli_env, "REDISFLOW_HTTP_ALLOWED_HOSTS": "ok, a/b"})
    assert r.returncode == 2
    assert "REDISFLOW_HTTP_ALLOWED_HOSTS" in one_line_error(r)


# -- numbers in the query ---------------------------------------------------------------


def test_query_numbers_are_ascii_and_in_range(pushed: Engine) -> None:
    with (
        serving(create_app(pushed)) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http,
    ):
        for name, value in (
            ("cursor", "99999999999999999999999"),
            ("cursor", "1" * 5000),
            ("cursor", "\u0663"),  # ARABIC-INDIC DIGIT THREE: isdigit() says yes
            ("cursor", "-1"),
            ("cursor", "1_0"),
            ("limit", "1" * 5000),
            ("limit", "\u0663"),
            ("limit", "\uff15"),  # FULLWIDTH DIGIT FIVE
            ("limit", " 5"),
        ):
            r = http.get("/v1/workflows", params={name: value})
            assert r.status_code == 400, (name, value[:20], r.text[:200])
            assert name in r.json()["error"]
        for value in ("\u0663", "1" * 5000, "inf", "nan", "1e3", "30\u017f"):
            r = http.post("/v1/templates/pipeline/runs", json={}, params={"wait": value})
            assert r.status_code == 400, value[:20]
            assert "wait" in r.json()["error"]
        assert pushed.count() == 0
        assert http.get("/v1/workflows", params={"cursor": "3", "limit": "5"}).status_code == 200
        assert http.get("/v1/workflows", params={"cursor": str(10**15)}).status_code == 200


def test_the_schema_names_the_new_refusals() -> None:
    for path, ops in SCHEMA["paths"].items():
        for method, op in ops.items():
            assert "421" in op["responses"], (method, path)
            if method == "post":
                for status in ("403", "408", "415"):
                    assert status in op["responses"], (method, path, status)


# -- clients that go away or take their time ----------------------------------------------


def _cut_body(port: int, path: str) -> None:
    """Headers announcing 1000 bytes, 5 of them, then the connection closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json"
            '\r\nContent-Length: 1000\r\n\r\n{"a":'.encode()
        )
        time.sleep(0.2)  # the app is reading the body by now


def test_a_client_cut_mid_body_costs_no_traceback(pushed: Engine, cli_env: dict[str, str]) -> None:
    from engine.http.triggers import new_trigger

    pushed.put_trigger(new_trigger("open", "pipeline", "none"))
    with redisflow_serve(cli_env) as (port, err):
        for _ in range(5):
            _cut_body(port, "/v1/templates/pipeline/runs")
            _cut_body(port, "/v1/triggers/open")
        time.sleep(0.5)
        r = httpx.post(f"http://127.0.0.1:{port}/v1/templates/pipeline/runs", json={})
        assert r.status_code == 202
    logged = "\n".join(err)
    assert "Traceback" not in logged, logged
    assert "ClientDisconnect" not in logged, logged
    assert "internal error" not in logged, logged
    assert "Exception" not in logged, logged
    assert pushed.count() == 1


def test_slow_clients_are_timed_out_and_do_not_starve_others(
    pushed: Engine, cli_env: dict[str, str]
) -> None:
    """500 connections trickle a header a byte at a time (never finishing), with a cap
    of 100 connections: they are answered 408 and closed after the header timeout, and a
    normal request is served meanwhile (503 while the cap is full, then 200)."""
    limits = ["--header-timeout", "2s", "--body-timeout", "2s", "--max-connections", "100"]
    with redisflow_serve(cli_env, *limits) as (port, err), ExitStack() as sockets:

        def connect() -> socket.socket:
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            return sockets.enter_context(s)

        body = connect()  # headers whole, then a body that never ends
        body.sendall(
            f"POST /v1/templates/pipeline/runs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"n": '.encode()
        )
        idle = connect()  # sends nothing
        slow = []
        for _ in range(500):
            s = connect()
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            slow.append(s)
        started = time.monotonic()
        stop = threading.Event()

        def trickle() -> None:  # a byte every 0.2 s each: never idle, never done
            while not stop.wait(0.2):
                for s in slow:
                    try:
                        s.send(b"x")
                    except OSError:
                        pass

        thread = threading.Thread(target=trickle, daemon=True)
        thread.start()
        try:
            served = None
            statuses: set[int] = set()
            while time.monotonic() - started < 60:
                try:
                    r = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=30)
                except httpx.TransportError:
                    time.sleep(0.1)
                    continue
                statuses.add(r.status_code)
                if r.status_code == 200:
                    served = time.monotonic() - started
                    break
                time.sleep(0.1)
            assert served is not None, f"a normal request was not served: {statuses}"
        finally:
            stop.set()
            thread.join(10)
        replies = [_read_all(s) for s in slow]
        assert time.monotonic() - started < 60
        assert {status_of(r) for r in replies} == {408}, {r[:40] for r in replies}
        assert b"headers took over 2s" in replies[0]
        assert _read_all(idle) == b""  # nothing sent, nothing answered
        reply = _read_all(body)
        assert status_of(reply) == 408
        assert b"body took over 2s" in reply
        assert pushed.count() == 0
        # the server is fine afterwards
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
    assert "Traceback" not in "\n".join(err)


def test_event_streams_leave_connections_for_writes(
    pushed: Engine, cli_env: dict[str, str], tmp_path: Path
) -> None:
    """A read token opening stream after stream cannot take every connection: past one
    token's cap, then past the process's (half of --max-connections), a stream is
    answered 429, while /healthz and writes are served; a stream that ends gives its
    place back."""
    reader, other = "read-token-aaaa-0123456789", "read-token-bbbb-0123456789"
    tokens = tmp_path / "tokens"
    tokens.write_text(f"read {reader}\nread {other}\nwrite {WRITE}\n")
    limits = ["--max-connections", "12", "--max-streams-per-token", "4"]
    with (
        redisflow_serve(cli_env, "--token-file", str(tokens), *limits) as (port, err),
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http,
        ExitStack() as streams,
    ):

        def stream(token: str, path: str = "/v1/events") -> httpx.Response:
            auth = {"Authorization": f"Bearer {token}"}
            return streams.enter_context(http.stream("GET", path, headers=auth))

        opened = [stream(reader) for _ in range(4)]
        assert [r.status_code for r in opened] == [200] * 4
        refused = http.get("/v1/events", headers={"Authorization": f"Bearer {reader}"})
        assert refused.status_code == 429
        assert "--max-streams-per-token" in refused.json()["error"]
        assert [stream(other).status_code for _ in range(2)] == [200, 200]  # 6: half of 12
        wid = pushed.run("pipeline").id
        refused = http.get(
            f"/v1/workflows/{wid}/events", headers={"Authorization": f"Bearer {other}"}
        )
        assert refused.status_code == 429
        assert "at most 6 open (--max-streams)" in refused.json()["error"]
        assert http.get("/healthz").status_code == 200
        pushed_now = http.post(
            "/v1/templates/pipeline/runs", json={}, headers={"Authorization": f"Bearer {WRITE}"}
        )
        assert pushed_now.status_code == 202
        opened[0].close()  # the server sees it go within a second or so: its place is free
        deadline = time.monotonic() + 30
        while True:
            again = stream(other, f"/v1/workflows/{wid}/events")
            if again.status_code == 200:
                break
            assert again.status_code == 429
            assert time.monotonic() < deadline, "a closed stream kept its place"
            time.sleep(0.2)
    assert "Traceback" not in "\n".join(err)


def test_serve_refuses_a_stream_cap_at_the_connection_cap(cli_env: dict[str, str]) -> None:
    r = cli("serve", "--max-connections", "10", "--max-streams", "10", env=cli_env)
    assert r.returncode == 2
    assert "--max-streams 10 must be below --max-connections 10" in one_line_error(r)
    r = cli("serve", "--max-streams-per-token", "0", env=cli_env)
    assert r.returncode == 2
    assert "--max-streams-per-token" in r.stderr


def test_a_slow_body_after_an_early_answer_is_closed(pushed: Engine) -> None:
    """A client refused at once (401 here) that keeps sending its body slowly is cut at
    the body timeout; a kept-alive connection's next request has its own header timeout."""
    settings = Settings(
        url=None, namespace="rf", max_payload=1 << 20, header_timeout_s=1.0, body_timeout_s=1.0
    )
    app = create_app(pushed, HttpConfig(tokens=Tokens(frozenset(), frozenset({WRITE}))))
    with serving(app, settings) as port:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(
                f"POST /v1/templates/pipeline/runs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{".encode()
            )
            first = s.recv(65536)
            assert status_of(first) == 401
            started = time.monotonic()
            for _ in range(50):  # 10 s of trickling, were it allowed
                try:
                    s.send(b" ")
                except OSError:
                    break
                time.sleep(0.2)
            assert _read_all(s) == b""
            assert time.monotonic() - started < 9
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
            assert status_of(s.recv(65536)) == 200
            s.sendall(b"GET /healthz HTTP/1.1\r\nHo")  # the next request stalls
            reply = _read_all(s)
            assert status_of(reply) == 408
    assert pushed.count() == 0


def test_a_long_wait_is_not_a_slow_client(pushed: Engine) -> None:
    """The timeouts are on what the client sends: a ?wait= longer than both is fine."""
    settings = Settings(
        url=None, namespace="rf", max_payload=1 << 20, header_timeout_s=0.5, body_timeout_s=0.5
    )
    with (
        serving(create_app(pushed), settings) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http,
    ):
        r = http.post("/v1/templates/pipeline/runs?wait=2s", json={})
        assert r.status_code == 202
        assert r.json()["state"] == "running"


# -- the schema, checked by a client nobody here wrote ----------------------------------


@pytest.mark.parametrize("tokens", [False, True], ids=["open", "tokens"])
def test_schemathesis_finds_the_server_true_to_its_schema(
    pushed: Engine, tokens: bool, tmp_path: Path
) -> None:
    """schemathesis generates requests from /openapi.json (valid and not) over every
    operation and checks every answer against it: status codes documented, schema-valid
    requests accepted, invalid ones refused, 405s naming the methods allowed, event
    streams' events as described; with tokens, every guarded operation declaring its
    security and refusing a request without one (tests/schemathesis.toml says what a
    schema cannot). A fixed seed: the same requests each run. Event streams end after a
    quarter second here, so each request ends. Run in a folder of its own: its cache
    stays there."""
    binary = BIN / "schemathesis"
    if not binary.exists():
        pytest.skip("schemathesis is not installed (the test extra installs it)")
    config = HttpConfig(max_stream_s=0.25, max_wait_s=0.5)
    auth: list[str] = []
    if tokens:
        config = HttpConfig(
            tokens=Tokens(frozenset({"read-token-0123456789"}), frozenset({WRITE})),
            max_stream_s=0.25,
            max_wait_s=0.5,
        )
        auth = ["-H", f"Authorization: Bearer {WRITE}"]
    # the bodies' schemas are fuzzed in full without tokens; with them, fewer examples an
    # operation check what differs (declared security, 401 without a token, 403 for reads)
    examples = "10" if tokens else "25"
    with serving(create_app(pushed, config)) as port:
        result = subprocess.run(
            [str(binary), "--config-file", str(ROOT / "tests" / "schemathesis.toml"), "run",
             f"http://127.0.0.1:{port}/openapi.json", "--checks", "all", "--max-examples",
             examples, "--seed", "1", "--no-color", *auth],
            capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
        )  # fmt: skip
    assert result.returncode == 0, result.stdout[-6000:]
    assert " passed" in result.stdout


def test_every_guarded_operation_declares_its_security() -> None:
    """With tokens, every operation but /healthz and trigger deliveries (checked by the
    trigger's own scheme) names the bearer scheme; without, none does, and none says 401
    but deliveries."""
    secured, open_ = schema_for(True), schema_for(False)
    for path, item in secured["paths"].items():
        for method, op in item.items():
            own = (path, method) in {("/healthz", "get"), ("/v1/triggers/{name}", "post")}
            assert ("security" in op) != own, (path, method)
            assert ("401" in op["responses"]) == (path != "/healthz"), (path, method)
            plain = open_["paths"][path][method]
            assert "security" not in plain
            delivery = (path, method) == ("/v1/triggers/{name}", "post")
            assert ("401" in plain["responses"]) == delivery, (path, method)
    assert secured["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
