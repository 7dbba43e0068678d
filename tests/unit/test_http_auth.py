"""The HTTP layer's pure parts, without a server: tokens, signatures, bodies, triggers."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from engine.errors import DefinitionError
from engine.http.auth import (
    Tokens,
    github_signature,
    is_loopback,
    load_tokens,
    require,
    standard_signature,
    verify_github,
    verify_standard,
)
from engine.http.bodies import (
    check_key,
    check_length,
    parse_json,
    parse_limit,
    parse_wait,
    read_limited,
)
from engine.http.errors import HttpError
from engine.http.triggers import (
    check_trigger_name,
    delivery_key,
    new_trigger,
    read_secret,
    verify_delivery,
)
from engine.store.triggers import Trigger

READ = "r" * 20
WRITE = "w" * 20
WHSEC = "whsec_" + base64.b64encode(b"0123456789abcdef0123").decode()


@contextmanager
def _refused(status: int, reason: str | None = None) -> Iterator[pytest.ExceptionInfo[HttpError]]:
    """The block raises an HttpError of ``status`` (and ``reason``, when given)."""
    with pytest.raises(HttpError) as info:
        yield info
    assert info.value.status == status, info.value.message
    if reason is not None:
        assert info.value.reason == reason


# -- tokens -----------------------------------------------------------------------------


def test_tokens_from_file_and_environment(tmp_path: Path) -> None:
    f = tmp_path / "tokens"
    f.write_text(f"# operators\nread {READ}\n\nwrite {WRITE}\n")
    tokens = load_tokens(str(f), env={"REDISFLOW_HTTP_READ_TOKEN": "e" * 16})
    assert tokens.read == {READ, "e" * 16}
    assert tokens.write == {WRITE}
    assert tokens.role_of(WRITE) == "write"
    assert tokens.role_of(READ) == "read"
    assert tokens.role_of("x" * 20) is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("admin " + "a" * 20, "tokens:1: expected 'read TOKEN'"),
        ("read", "tokens:1: expected"),
        ("\nwrite short", "tokens:2: a token must be at least 16"),
        (f"read {READ} extra", "tokens:1: expected"),
    ],
)
def test_a_bad_token_file_names_its_line(tmp_path: Path, text: str, says: str) -> None:
    f = tmp_path / "tokens"
    f.write_text(text)
    with pytest.raises(DefinitionError, match=says):
        load_tokens(str(f), env={})


def test_a_missing_token_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(DefinitionError, match="nope: cannot read the token file"):
        load_tokens(str(tmp_path / "nope"), env={})


def test_require_checks_roles() -> None:
    tokens = Tokens(frozenset({READ}), frozenset({WRITE}))
    require(tokens, f"Bearer {WRITE}", "write")
    require(tokens, f"bearer {WRITE}", "read")  # write implies read
    require(tokens, f"Bearer {READ}", "read")
    with _refused(403, "read_only"):
        require(tokens, f"Bearer {READ}", "write")
    with _refused(401, "unauthorized"):
        require(tokens, None, "read")
    with _refused(401, "unauthorized"):
        require(tokens, "Bearer " + "x" * 20, "read")
    with _refused(401, "unauthorized"):
        require(tokens, f"Basic {READ}", "read")
    require(Tokens(), None, "write")  # no token configured: loopback-only server, open


def test_tokens_carry_labels_and_require_says_who_calls(tmp_path: Path) -> None:
    f = tmp_path / "tokens"
    f.write_text(f"write {WRITE} label=ci-bot\nread {READ}\n")
    tokens = load_tokens(str(f), env={"REDISFLOW_HTTP_WRITE_TOKEN": "e" * 16})
    assert require(tokens, f"Bearer {WRITE}", "write") == "token ci-bot"
    assert require(tokens, f"Bearer {'e' * 16}", "write") == "token REDISFLOW_HTTP_WRITE_TOKEN"
    unlabelled = require(tokens, f"Bearer {READ}", "read")
    assert re.fullmatch(r"token sha256:[0-9a-f]{8}", unlabelled)
    assert READ not in unlabelled
    assert require(Tokens(), None, "write") == "anonymous"
    f.write_text(f"write {WRITE} label=\n")
    with pytest.raises(DefinitionError, match="tokens:1: a token's label is 1 to 64"):
        load_tokens(str(f), env={})


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.0.3", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("192.168.1.4", False),
        ("::", False),
        ("example.org", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


# -- signatures -------------------------------------------------------------------------


def test_github_signature() -> None:
    body = b'{"zen":"Keep it logically awesome."}'
    header = github_signature("s3cret", body)
    assert header.startswith("sha256=")
    verify_github("s3cret", body, header)
    verify_github("s3cret", body, header.upper().replace("SHA256", "sha256"))
    with _refused(401, "bad_signature"):
        verify_github("other", body, header)
    with _refused(401, "bad_signature"):
        verify_github("s3cret", body + b" ", header)
    with _refused(401, "bad_signature"):
        verify_github("s3cret", body, "sha1=" + header[7:])
    with _refused(401, "missing_signature"):
        verify_github("s3cret", body, None)


def test_github_signature_matches_githubs_documented_example() -> None:
    # docs.github.com, "Validating webhook deliveries": secret "It's a Secret to Everybody"
    # and payload "Hello, World!" sign to this value
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert github_signature("It's a Secret to Everybody", b"Hello, World!") == expected


def _standard_headers(body: bytes, sent: int, msg_id: str = "msg_1") -> dict[str, str]:
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(sent),
        "webhook-signature": standard_signature(WHSEC, msg_id, sent, body),
    }


def test_standard_webhooks_signature() -> None:
    body = b'{"type":"invoice.paid"}'
    now = 1_800_000_000.0
    headers = _standard_headers(body, int(now))
    verify_standard(WHSEC, headers, body, now)
    # one of several signatures (a rotated secret) is enough
    several = dict(headers, **{"webhook-signature": "v1,AAAA " + headers["webhook-signature"]})
    verify_standard(WHSEC, several, body, now)
    with _refused(401, "bad_signature"):
        verify_standard(WHSEC, headers, body + b"x", now)
    with _refused(401, "bad_signature"):  # the id is signed too
        verify_standard(WHSEC, dict(headers, **{"webhook-id": "msg_2"}), body, now)
    with _refused(401, "missing_signature"):
        verify_standard(WHSEC, {"webhook-id": "msg_1"}, body, now)


def test_standard_webhooks_refuses_an_old_or_future_timestamp() -> None:
    body = b"{}"
    now = 1_800_000_000.0
    replayed = _standard_headers(body, int(now) - 301)
    with _refused(401, "stale_timestamp"):
        verify_standard(WHSEC, replayed, body, now)
    with _refused(401, "stale_timestamp"):
        verify_standard(WHSEC, _standard_headers(body, int(now) + 301), body, now)
    verify_standard(WHSEC, _standard_headers(body, int(now) - 299), body, now)
    with _refused(401, "bad_signature"):
        verify_standard(WHSEC, dict(replayed, **{"webhook-timestamp": "soon"}), body, now)


def test_standard_webhooks_matches_the_specs_reference_vector() -> None:
    # the reference test of standard-webhooks' libraries (python/tests)
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = b'{"test": 2432232314}'
    sig = standard_signature(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body)
    assert sig == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


# -- bodies -----------------------------------------------------------------------------


def test_parse_json_names_line_and_column() -> None:
    assert parse_json(b'{"a": [1, 2]}') == {"a": [1, 2]}
    assert parse_json(b"") is None
    assert parse_json(b"  \n") is None
    with _refused(400, "bad_json") as e:
        parse_json(b'{\n  "a": 1,\n  "b": }')
    assert "line 3, column 8" in e.value.message
    with _refused(400, "bad_json") as e:
        parse_json(b"\xff\xfe")
    assert "UTF-8" in e.value.message
    with _refused(400, "bad_json") as e:
        parse_json(b'{"a": NaN}')
    assert "NaN" in e.value.message


def test_body_limits() -> None:
    check_length(None, 10)
    check_length("10", 10)
    with _refused(413, "too_large"):
        check_length("11", 10)
    with _refused(400):
        check_length("ten", 10)

    async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
        for p in parts:
            yield p

    assert asyncio.run(read_limited(chunks(b"12345", b"67890"), 10)) == b"1234567890"
    with _refused(413, "too_large"):
        asyncio.run(read_limited(chunks(b"12345", b"678901"), 10))


def test_wait_limit_and_key_parameters() -> None:
    assert parse_wait(None, 60) is None
    assert parse_wait("30s", 60) == 30
    assert parse_wait("1m", 60) == 60
    assert parse_wait("2.5", 60) == 2.5
    assert parse_wait("2m", 60) == 60  # at most what the server allows
    with _refused(400):
        parse_wait("soon", 60)
    assert check_key(None, "Idempotency-Key") is None
    assert check_key(" order-42 ", "Idempotency-Key") == "order-42"
    with _refused(400, "bad_idempotency_key"):
        check_key("", "Idempotency-Key")
    with _refused(400, "bad_idempotency_key"):
        check_key("k" * 201, "Idempotency-Key")
    assert parse_limit(None, 50, 1000) == 50
    assert parse_limit("7", 50, 1000) == 7
    for bad in ("0", "1001", "-1", "x"):
        with _refused(400):
            parse_limit(bad, 50, 1000)


# -- triggers ---------------------------------------------------------------------------


def test_a_trigger_needing_a_secret_is_refused_without_one() -> None:
    for auth in ("github", "standard-webhooks", "bearer"):
        with pytest.raises(DefinitionError, match="needs a secret"):
            new_trigger("t", "tpl", auth, "")
    with pytest.raises(DefinitionError, match="takes no secret"):
        new_trigger("t", "tpl", "none", "s3cret")
    with pytest.raises(DefinitionError, match="whsec_"):
        new_trigger("t", "tpl", "standard-webhooks", "plain-secret")
    with pytest.raises(DefinitionError, match="not base64"):
        new_trigger("t", "tpl", "standard-webhooks", "whsec_***")
    with pytest.raises(DefinitionError, match="not one of"):
        new_trigger("t", "tpl", "hmac", "s")
    with pytest.raises(DefinitionError, match="not an HTTP header"):
        new_trigger("t", "tpl", "github", "s", "X Delivery")
    assert new_trigger("t", "tpl", "none").auth == "none"
    t = new_trigger("gh", "build", "github", "s3cret", "X-GitHub-Delivery")
    assert (t.template, t.secret, t.idempotency_header) == ("build", "s3cret", "X-GitHub-Delivery")


@pytest.mark.parametrize("name", ["", "a/b", "-x", "a b", "é", "x" * 101])
def test_trigger_names_fit_a_url_path(name: str) -> None:
    with pytest.raises(DefinitionError, match="trigger name"):
        check_trigger_name(name)


def test_read_secret(tmp_path: Path) -> None:
    f = tmp_path / "secret"
    f.write_text("s3cret\n")
    assert read_secret(None, str(f)) == "s3cret"
    assert read_secret("GH", None, env={"GH": "from-env"}) == "from-env"
    assert read_secret(None, None) == ""
    with pytest.raises(DefinitionError, match="unset or empty"):
        read_secret("GH", None, env={})
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(DefinitionError, match="empty"):
        read_secret(None, str(tmp_path / "empty"))
    with pytest.raises(DefinitionError, match="cannot read"):
        read_secret(None, str(tmp_path / "missing"))


def test_verify_delivery_by_scheme() -> None:
    body = json.dumps({"ref": "main"}).encode()
    gh = Trigger("gh", "build", "github", "s3cret", "X-GitHub-Delivery")
    verify_delivery(gh, {"x-hub-signature-256": github_signature("s3cret", body)}, body, 0)
    with _refused(401):
        verify_delivery(gh, {}, body, 0)
    bearer = Trigger("b", "build", "bearer", "t0ken-t0ken-t0ken")
    verify_delivery(bearer, {"authorization": "Bearer t0ken-t0ken-t0ken"}, body, 0)
    with _refused(401):
        verify_delivery(bearer, {"authorization": "Bearer nope"}, body, 0)
    verify_delivery(Trigger("open", "build", "none"), {}, body, 0)
    # stored by hand without a secret: refused, never open
    with _refused(401, "no_secret"):
        verify_delivery(Trigger("x", "build", "github", ""), {}, body, 0)
    assert delivery_key(gh, {"x-github-delivery": "d-1"}) == "trigger:gh:d-1"
    assert delivery_key(bearer, {}) is None
    with _refused(400, "missing_idempotency_key"):
        delivery_key(gh, {})
