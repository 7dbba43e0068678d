"""``redisflow-tui --serve``: a token to reach it, ``--host``, and a page that loads
nothing from another host. The real command, served on a free loopback port; httpx as
the browser."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("textual_serve")

from redisflow_tui.web import COOKIE, local_page, read_token  # noqa: E402

TOKEN = "console-token-0123456789"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture()
def console(redis_url: str) -> Iterator[str]:
    """``redisflow-tui --serve`` with a token from the environment; its base URL."""
    port = _free_port()
    env = {**os.environ, "REDISFLOW_TUI_TOKEN": TOKEN}
    proc = subprocess.Popen(
        [sys.executable, "-m", "redisflow_tui", "--url", redis_url, "--serve",
         "--host", "127.0.0.1", "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
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
        yield base
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate(timeout=30)
    assert f"serving on http://127.0.0.1:{port}/?token={TOKEN}" in out


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
