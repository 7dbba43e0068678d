"""Redis URLs: read and checked in one place; a password never shows in any output, be it
URL-encoded or not, whatever it holds; a malformed URL is one line and exit code 2."""

from __future__ import annotations

import os
import re
from urllib.parse import quote

import pytest
import redis.connection
from engine_helpers import cli

from engine import Engine
from engine.connect.embedded import free_port
from engine.connect.urls import URLError, parse_url, redact
from engine.errors import DefinitionError, UnreachableError

SECRET = "Zq9w"  # in every password below: absent from every output


def passwords() -> dict[str, str]:
    """Passwords as written in a URL that redis-py reads (the user meant them so)."""
    return {
        "at": f"p@{SECRET}@x",
        "colon": f"p:{SECRET}:x",
        "encoded": quote(f"p@{SECRET}/?#:[]%x", safe=""),
        "plain": f"{SECRET}-pw",
    }


def malformed(port: int) -> dict[str, str]:
    """URLs that cannot be read as meant: refused before connecting."""
    return {
        "slash": f"redis://alice:p/{SECRET}@127.0.0.1:{port}/0",
        "question": f"redis://alice:p?{SECRET}@127.0.0.1:{port}/0",
        "hash": f"redis://alice:p#{SECRET}@127.0.0.1:{port}/0",
        "digits then slash": f"redis://alice:12/{SECRET}@127.0.0.1:{port}/0",
        "bracket": f"redis://alice:p[{SECRET}]@127.0.0.1:{port}/0",
        "unclosed IPv6": f"redis://alice:{SECRET}@[::1/0",
        "not IPv6": f"redis://alice:{SECRET}@[abc]:{port}/0",
        "TLS option on redis://": f"redis://alice:{SECRET}@127.0.0.1:{port}/0?ssl_ca_certs=/x",
        "unknown option": f"redis://alice:{SECRET}@127.0.0.1:{port}/0?{SECRET}=1",
        "bad port": f"redis://alice:{SECRET}@127.0.0.1:99999/0",
        "path not a db": f"redis://alice:{SECRET}@127.0.0.1:{port}/zero",
        "space": f"redis://alice:p {SECRET}@127.0.0.1:{port}/0",
        "no scheme": f"alice:{SECRET}@127.0.0.1:{port}",
        "unix with a host": f"unix://alice:{SECRET}@host/tmp/r.sock",
    }


def assert_hidden(text: str) -> None:
    assert SECRET not in text, text
    assert "Traceback" not in text, text


def test_redact_works_on_the_parsed_url() -> None:
    for name, pw in passwords().items():
        url = f"redis://alice:{pw}@h:1/0"
        assert redact(url) == "redis://alice:***@h:1/0", name
        assert parse_url(url).password == redis.connection.parse_url(url)["password"]
    assert redact(f"rediss://:{SECRET}@[::1]:6380/2?ssl_password={SECRET}") == (
        "rediss://:***@[::1]:6380/2"
    )
    assert redact(f"unix://:{SECRET}@/tmp/r.sock?db=3") == "unix://:***@/tmp/r.sock?db=3"
    assert redact(f"redis+cluster://u:{SECRET}@h:7000") == "redis+cluster://u:***@h:7000"
    for name, url in malformed(6379).items():
        assert_hidden(redact(url))
        with pytest.raises(URLError) as e:
            parse_url(url)
        assert_hidden(str(e.value))
        assert str(e.value).startswith("invalid Redis URL: "), name


def test_parse_url_reads_as_redis_py_does() -> None:
    for url in [
        "redis://h",
        "redis://h:7/3",
        "redis://u:p@h:7/",
        "redis://:p%3Ax@[::1]:7/1",
        "rediss://h:7/0?ssl_ca_certs=%2Fca.pem&socket_timeout=3",
        f"redis://alice:{passwords()['at']}@h:7/0",
    ]:
        ours, theirs = parse_url(url), redis.connection.parse_url(url)
        assert (ours.username, ours.password) == (theirs.get("username"), theirs.get("password"))
        assert (ours.host or None, ours.port) == (theirs.get("host"), theirs.get("port"))
        assert (ours.db or 0) == theirs.get("db", 0), url


@pytest.mark.parametrize("name", sorted(passwords()))
def test_engine_messages_hide_the_password(name: str) -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(UnreachableError) as e:
        Engine.connect(f"redis://alice:{passwords()[name]}@127.0.0.1:{port}/0")
    assert_hidden(str(e.value))
    assert f"redis://alice:***@127.0.0.1:{port}/0" in str(e.value)


def test_engine_refuses_a_malformed_url() -> None:
    for url in malformed(free_port()).values():
        with pytest.raises(DefinitionError) as e:
            Engine.connect(url)
        assert_hidden(str(e.value))


def run_tool(tool: str, url: str, via_env: bool = False) -> tuple[int, str]:
    """Run ``tool`` against ``url`` (by --url, or REDISFLOW_URL); its exit code and
    everything it printed."""
    extra = {
        "redisflow": ["list"],
        "redisflow serve": ["serve", "--port", str(free_port())],
        "redisflow-agent": ["--handler", "demos.handlers:noop", "--connect-timeout", "0.2"],
        "redisflow-demo": ["--workflows", "1", "--agents", "1"],
        "redisflow-tui": [],
    }[tool]
    env = {k: v for k, v in os.environ.items() if k != "REDISFLOW_URL"}
    args = [*extra]
    if via_env:
        env["REDISFLOW_URL"] = url
    else:
        args += ["--url", url]
    out = cli(*args, env=env, tool=tool.split()[0], timeout=90)
    text = out.stdout + out.stderr
    if out.returncode in (2, 3):
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("redisflow"), text
    return out.returncode, text


TOOLS = ["redisflow", "redisflow serve", "redisflow-agent", "redisflow-demo"]


@pytest.mark.parametrize("name", sorted(passwords()))
def test_redisflow_hides_the_password_of_an_unreachable_redis(name: str) -> None:
    url = f"redis://alice:{passwords()[name]}@127.0.0.1:{free_port()}/0"
    code, text = run_tool("redisflow", url)
    assert code == 3, text
    assert_hidden(text)
    assert "redis://alice:***@127.0.0.1:" in text


@pytest.mark.parametrize("name", sorted(malformed(1)))
def test_redisflow_refuses_a_malformed_url_in_one_line(name: str) -> None:
    code, text = run_tool("redisflow", malformed(free_port())[name])
    assert code == 2, text
    assert_hidden(text)
    assert re.search(r"redisflow: invalid Redis URL: \S", text), text


@pytest.mark.parametrize("tool", TOOLS)
def test_every_tool_hides_the_password(tool: str) -> None:
    port = free_port()
    for name in ("at", "encoded"):
        url = f"redis://alice:{passwords()[name]}@127.0.0.1:{port}/0"
        code, text = run_tool(tool, url, via_env=name == "encoded")
        assert code == 3, text
        assert_hidden(text)
    for name in ("slash", "hash", "unclosed IPv6", "TLS option on redis://"):
        code, text = run_tool(tool, malformed(port)[name])
        assert code == 2, (name, text)
        assert_hidden(text)


def test_the_console_refuses_a_malformed_url() -> None:
    pytest.importorskip("textual")
    for name in ("question", "unclosed IPv6"):
        code, text = run_tool("redisflow-tui", malformed(free_port())[name])
        assert code == 2, text
        assert_hidden(text)
