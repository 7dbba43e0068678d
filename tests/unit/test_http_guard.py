"""The HTTP layer's new guards as pure functions: Host names, origins, content types, and
numbers in a query or header (ASCII digits, bounded)."""

from __future__ import annotations

import pytest

from engine.http.bodies import check_length, parse_cursor, parse_limit, parse_wait
from engine.http.errors import HttpError
from engine.http.guard import (
    check_content_type,
    check_host,
    check_origin,
    default_hosts,
    host_entry,
    origin_entry,
    split_host,
)


def test_number_parsers() -> None:
    assert parse_cursor(None) == 0
    assert parse_cursor("120") == 120
    assert parse_wait("1h", 600) == 600  # a longer wait waits as long as the server allows
    assert parse_limit("0050", 50, 1000) == 50
    assert parse_wait("1m30s", 600) == 90
    assert parse_wait("30S", 600) == 30
    check_length("12", 100)
    for call in (
        lambda: parse_cursor("\u0663"),
        lambda: parse_cursor(""),  # as the schema says: 1 to 16 digits
        lambda: parse_cursor(str(10**16)),
        lambda: parse_limit("\u0663", 50, 1000),
        lambda: parse_limit("9" * 19, 50, 1000),
        lambda: parse_wait("1s" * 9, 600),
        lambda: parse_wait("1" * 100 + "x", 600),
        lambda: check_length("\u0663", 100),
        lambda: check_length("1_0", 100),
    ):
        with pytest.raises(HttpError) as e:
            call()
        assert e.value.status == 400


def test_host_names_and_origins() -> None:
    assert split_host("LocalHost:8080") == ("localhost", "8080")
    assert split_host("[::1]:8080") == ("[::1]", "8080")
    assert split_host("[::1]") == ("[::1]", None)
    for bad in ("", ":80", "a:b", "[::1", "[::1]x", "a b", "a/b", "u@h", "h:123456"):
        with pytest.raises(ValueError):
            split_host(bad)
    assert host_entry("Flows.Example.com") == "flows.example.com"
    assert host_entry("*") == "*"
    assert host_entry("[::1]:80") == "[::1]:80"
    assert origin_entry("HTTPS://App.example.com/") == "https://app.example.com"
    for bad in ("app.example.com", "ftp://x", "https://x/y", "https://u@x", "https://x?q"):
        with pytest.raises(ValueError):
            origin_entry(bad)
    assert default_hosts("127.0.0.1") == ("127.0.0.1", "localhost", "[::1]")
    assert default_hosts("::1") == ("[::1]", "127.0.0.1", "localhost")
    assert default_hosts("LocalHost") == ("localhost", "127.0.0.1", "[::1]")
    assert default_hosts("0.0.0.0") == ("*",)
    assert default_hosts("::") == ("*",)
    assert default_hosts("10.0.0.5") == ("10.0.0.5",)
    assert default_hosts("flows.internal") == ("flows.internal",)
    check_host(["x:1"], ["x"])
    with pytest.raises(HttpError) as e:
        check_host([], ["x"])
    assert e.value.status == 421
    check_origin({"host": "h:1", "origin": "http://h:1"}, ())
    check_origin({"host": "h:1", "origin": "https://h:1"}, ())  # behind a TLS proxy
    check_origin({"host": "h:1", "sec-fetch-site": "none"}, ())  # typed in the address bar
    check_origin(
        {"host": "h:1", "origin": "https://a.com", "sec-fetch-site": "cross-site"},
        {"https://a.com"},
    )
    for headers in (
        {"host": "h:1", "origin": "http://h:2"},
        {"host": "h:1", "origin": "file://"},
        {"host": "h:1", "origin": "ftp://h:1"},
        {"origin": "http://h:1"},
        {"host": "h:1", "sec-fetch-site": "cross-site"},
    ):
        with pytest.raises(HttpError) as e:
            check_origin(headers, ())
        assert e.value.status == 403, headers
    check_content_type({})
    check_content_type({"content-length": "0"})
    check_content_type({"content-type": "Application/JSON; charset=utf-8", "content-length": "2"})
    check_content_type({"content-type": "application/vnd.github+json"})
    for headers in (
        {"content-length": "2"},
        {"transfer-encoding": "chunked"},
        {"content-type": "text/plain"},
        {"content-type": "application/jsonx"},
        {"content-type": "text/json"},
    ):
        with pytest.raises(HttpError) as e:
            check_content_type(headers)
        assert e.value.status == 415, headers
