"""``redisflow-tui --serve``: a token to reach it, ``--host``, and a page that loads
nothing from another host. The real command, served on a free loopback port; httpx as
the browser."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
import httpx
import pytest

# what the console shows and does with its keys: the same on a cluster, whose reads the
# engine's own tests check there
pytestmark = pytest.mark.same_on_cluster

pytest.importorskip("textual_serve")

from engine import Engine, Workflow  # noqa: E402
from redisflow_tui.__main__ import build_parser  # noqa: E402
from redisflow_tui.web import COOKIE, local_page, read_token  # noqa: E402

TOKEN = "console-token-0123456789"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving_console(
    redis_url: str, env: dict[str, str], *extra: str
) -> Iterator[tuple[str, list[str]]]:
    """``redisflow-tui --serve`` on a free port; its base URL, and a list that receives
    everything it printed (stdout and stderr) once it has stopped."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "redisflow_tui", "--url", redis_url, "--serve",
         "--host", "127.0.0.1", "--port", str(port), *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    printed: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.communicate()
            try:
                httpx.get(base, timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the console did not start"
                time.sleep(0.1)
        yield base, printed
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            out, err = proc.communicate(timeout=30)
        printed += [out, err]


@pytest.fixture()
def console(redis_url: str) -> Iterator[str]:
    """``redisflow-tui --serve`` with a token from the environment; its base URL."""
    env = {**os.environ, "REDISFLOW_TUI_TOKEN": TOKEN}
    with serving_console(redis_url, env) as (base, printed):
        yield base
    assert f"serving on {base}/ (open {base}/?token=TOKEN once" in printed[0]
    assert TOKEN not in "".join(printed)


def test_the_token_is_printed_only_when_made_here_and_never_logged(
    redis_url: str, tmp_path: Path
) -> None:
    """A token read from a file is never printed, nor logged with the requests that
    carry it (the access log names paths without their query); a token made at start is
    printed once, in the address to open."""
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    env = {k: v for k, v in os.environ.items() if k != "REDISFLOW_TUI_TOKEN"}
    with serving_console(redis_url, env, "--token-file", str(path)) as (base, printed):
        with httpx.Client(base_url=base) as browser:
            assert browser.get(f"/?token={TOKEN}").status_code == 302
            assert browser.get("/").status_code == 200
            assert browser.get(f"/static/js/textual.js?token={TOKEN}").status_code == 200
    text = "".join(printed)
    assert f"the one in {path}" in text
    assert '"GET /static/js/textual.js" 200' in text  # requests are logged: by path alone
    assert TOKEN not in text
    assert "?token=" not in text.replace("?token=TOKEN", "")
    with serving_console(redis_url, env) as (base, printed):
        pass
    made = re.search(rf"serving on {re.escape(base)}/\?token=(\S+)", printed[0])
    assert made is not None and len(made.group(1)) >= 16
    assert "".join(printed).count(made.group(1)) == 1


def test_nothing_without_the_token(console: str) -> None:
    for path in ("/", "/static/js/textual.js", "/ws", "/?token=wrong-token-0123456789"):
        r = httpx.get(console + path)
        assert r.status_code == 401, path
        assert "?token=" in r.text
    bearer = httpx.get(console + "/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert bearer.status_code == 200


def test_the_token_once_then_a_cookie_and_a_page_from_this_host_only(console: str) -> None:
    with httpx.Client(base_url=console) as browser:
        first = browser.get(f"/?token={TOKEN}")
        assert first.status_code == 302 and first.headers["location"] == "/"
        cookie = first.headers["set-cookie"]
        assert COOKIE in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        page = browser.get("/")
        assert page.status_code == 200
        hosts = set(re.findall(r"(?:https?|wss?)://([^/\"' ]+)", page.text))
        assert hosts <= {"127.0.0.1:" + console.rsplit(":", 1)[1], "www.w3.org"}, hosts
        assert "fonts.googleapis.com" not in page.text
        fonts = re.findall(r"url\(\"([^\"]+\.ttf)\"\)", page.text)
        assert len(fonts) == 2
        for font in fonts:
            r = browser.get(font)
            assert r.status_code == 200 and len(r.content) > 10_000
        js = browser.get("/static/js/textual.js")
        assert js.status_code == 200
        assert not re.search(r"https?://(?!www\.w3\.org)[a-z]", js.text)
        # the websocket is not for pages of another site
        evil = browser.get("/ws", headers={"Origin": "http://evil.example"})
        assert evil.status_code == 403


def test_the_token_file_and_variable_are_checked(tmp_path: Path) -> None:
    assert read_token(None, {}) is None
    assert read_token(None, {"REDISFLOW_TUI_TOKEN": TOKEN}) == TOKEN
    good = tmp_path / "t"
    good.write_text(TOKEN + "\n")
    assert read_token(str(good), {"REDISFLOW_TUI_TOKEN": "x"}) == TOKEN
    short = tmp_path / "s"
    short.write_text("short\n")
    with pytest.raises(ValueError, match="at least 16"):
        read_token(str(short), {})
    with pytest.raises(ValueError, match="cannot read"):
        read_token(str(tmp_path / "none"), {})


def test_a_bad_token_exits_2_with_one_line(tmp_path: Path) -> None:
    short = tmp_path / "s"
    short.write_text("short\n")
    done = subprocess.run(
        [sys.executable, "-m", "redisflow_tui", "--serve", "--token-file", str(short)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"redisflow-tui: {short}: a token is at least 16 printable ASCII characters, no spaces"
    ]


def test_the_page_keeps_its_own_links() -> None:
    page = '<link rel="stylesheet" href="x.css" />\n<link\n  rel="stylesheet"\n  href="https://fonts.googleapis.com/css?family=Roboto%20Mono"\n/>'
    out = local_page(page)
    assert 'href="x.css"' in out and "googleapis" not in out and "@font-face" in out


def test_a_page_linked_to_a_workflow_opens_the_console_on_it(
    redis_url: str, engine: Engine
) -> None:
    """``?workflow=ID`` in the address (with the token, or after it): the page's console
    is started with ``--open ID``, its websocket under /ws/ID (same-origin only)."""
    wf = Workflow("linked-run")
    wf.task("only-on-its-screen")
    wid = str(engine.push(wf))
    env = {**os.environ, "REDISFLOW_TUI_TOKEN": TOKEN}
    with serving_console(redis_url, env, "--open", wid) as (base, printed):
        with httpx.Client(base_url=base) as browser:
            first = browser.get(f"/?token={TOKEN}&workflow={wid}")
            assert first.status_code == 302 and first.headers["location"] == f"/?workflow={wid}"
            page = browser.get(f"/?workflow={wid}")
            assert page.status_code == 200
            assert re.search(rf'data-session-websocket-url="ws://[^"]+/ws/{wid}"', page.text)
            plain = browser.get("/")
            assert re.search(r'data-session-websocket-url="ws://[^"]+/ws"', plain.text)
            bad = browser.get("/?workflow=1;rm")  # not an id: the plain console
            assert re.search(r'data-session-websocket-url="ws://[^"]+/ws"', bad.text)
            assert browser.get("/ws/abc").status_code == 404
            evil = browser.get(f"/ws/{wid}", headers={"Origin": "http://evil.example"})
            assert evil.status_code == 403
            assert httpx.get(f"{base}/ws/{wid}").status_code == 401  # no token
        linked, home = (_screen_text(base, path) for path in (f"/ws/{wid}", "/ws"))
        assert "only-on-its-screen" in linked, linked[-2000:]
        assert "linked-run" in home and "only-on-its-screen" not in home
    assert f"?token=TOKEN&workflow={wid} once" in printed[0]


def _screen_text(base: str, path: str, seconds: float = 8.0) -> str:
    """What the console served at websocket ``path`` draws in its first seconds (its
    terminal output, escapes and all)."""

    async def read() -> str:
        out = bytearray()
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with aiohttp.ClientSession(headers=headers) as session:
            url = base.replace("http", "ws", 1) + path + "?width=160&height=45"
            async with session.ws_connect(url) as ws:
                deadline = time.monotonic() + seconds
                while time.monotonic() < deadline:
                    try:
                        msg = await ws.receive(timeout=deadline - time.monotonic())
                    except TimeoutError:
                        break
                    if msg.type == aiohttp.WSMsgType.BINARY:
                        out += msg.data
                    elif msg.type != aiohttp.WSMsgType.TEXT:
                        break
        return out.decode("utf-8", "replace")

    return asyncio.run(read())


def test_open_takes_a_workflow_id_only() -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["--open", "12; rm -rf /"])
    assert exit_.value.code == 2
    assert build_parser().parse_args(["--open", "12"]).open == "12"
