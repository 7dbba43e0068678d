"""What a browser must not be able to do: names, origins and content types.

A page on any site can make a browser send a "simple" cross-site request (a form or
``fetch`` with a ``text/plain`` body, no preflight) to a server on this machine, and a
page whose name resolves to 127.0.0.1 (DNS rebinding) can even read the answers. So the
app, before any endpoint runs (:class:`Guard`):

* answers only requests whose ``Host`` is one of the names it serves (421 otherwise):
  a rebinding page's requests carry its own name;
* refuses a write (any method but GET, HEAD, OPTIONS) sent by a page of another origin
  (403): its ``Origin`` is not the server's own nor an allowed one, or without an
  ``Origin`` its ``Sec-Fetch-Site`` is ``cross-site`` or ``same-site``;
* takes a write's body only as ``application/json`` (415): a browser cannot send that
  type cross-origin without a CORS preflight, which this app does not grant (unless
  ``allowed_origins`` names the page's origin).

Clients that are not browsers (curl, SDKs, webhook senders) send no ``Origin`` and no
``Sec-Fetch-Site``: only the ``Host`` and content-type rules apply to them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .errors import HttpError

ANY = "*"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_PORT = re.compile(r"[0-9]{1,5}")
_JSON_TYPE = re.compile(r"application/(?:[a-z0-9.+-]*\+)?json")


def split_host(value: str) -> tuple[str, str | None]:
    """``(name, port)`` of a ``Host`` value (``localhost:8080``, ``[::1]:8080``,
    ``example.com``): the name lower-cased, IPv6 in brackets; the port None when absent.

    Raises :class:`ValueError` for a malformed value.
    """
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            raise ValueError(f"unclosed '[' in {value[:60]!r}")
        name, rest = value[: end + 1], value[end + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError(f"{value[:60]!r} is not host[:port]")
        port = rest[1:] if rest else None
    else:
        name, sep, port_text = value.partition(":")
        port = port_text if sep else None
    if not name or (port is not None and not _PORT.fullmatch(port)):
        raise ValueError(f"{value[:60]!r} is not host[:port]")
    if any(c in name for c in "/@?# \t"):
        raise ValueError(f"{value[:60]!r} is not host[:port]")
    return name, port


def host_entry(text: str) -> str:
    """A checked ``--allowed-host`` entry: ``*``, ``NAME`` (any port) or ``NAME:PORT``
    (an IPv6 address in brackets).

    Raises :class:`ValueError` for anything else.
    """
    text = text.strip()
    if text == ANY:
        return ANY
    try:
        name, port = split_host(text)
    except ValueError:
        raise ValueError(
            f"{text[:100]!r} is not NAME or NAME:PORT (an IPv6 address in brackets: [::1])"
        ) from None
    return name if port is None else f"{name}:{port}"


def origin_entry(text: str) -> str:
    """A checked ``--allowed-origin`` entry: ``scheme://host[:port]``, lower-cased, as a
    browser sends it in ``Origin`` (no path, no trailing slash).

    Raises :class:`ValueError` for anything else.
    """
    text = text.strip().lower().rstrip("/")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path:
        raise ValueError(f"{text[:100]!r} is not an origin (like https://app.example.com)")
    if parts.query or parts.fragment or "@" in parts.netloc:
        raise ValueError(f"{text[:100]!r} is not an origin (like https://app.example.com)")
    split_host(parts.netloc)
    return f"{parts.scheme}://{parts.netloc}"


def default_hosts(host: str) -> tuple[str, ...]:
    """The ``Host`` names a server bound to ``host`` answers by default (any port: the
    name is what a rebinding page cannot fake): on a loopback address the loopback names;
    on a wildcard address (0.0.0.0, ::; tokens are then required) any name; else the
    bound name itself."""
    from .auth import is_loopback

    bare = host.strip().strip("[]").lower()
    if bare in ("0.0.0.0", "::", ""):
        return (ANY,)
    name = f"[{bare}]" if ":" in bare else bare
    if not is_loopback(host):
        return (name,)
    return (name, *(n for n in LOOPBACK_NAMES if n != name))


def check_host(values: list[str], allowed: Iterable[str]) -> None:
    """Raise a 421 :class:`HttpError` unless the request's one ``Host`` (``values``: every
    ``Host`` header it has) is an ``allowed`` entry (``NAME`` any port, ``NAME:PORT`` that
    port, ``*`` anything)."""
    allowed = tuple(allowed)
    if ANY in allowed:
        return
    if len(values) != 1:
        raise HttpError(421, f"expected one Host header, got {len(values)}", "bad_host")
    value = values[0]
    try:
        name, port = split_host(value)
    except ValueError:
        raise HttpError(421, f"Host {value[:100]!r} is not host[:port]", "bad_host") from None
    if name in allowed or (port is not None and f"{name}:{port}" in allowed):
        return
    raise HttpError(
        421,
        f"this server does not answer to Host {value[:100]!r}: add the name with "
        "--allowed-host (or REDISFLOW_HTTP_ALLOWED_HOSTS)",
        "bad_host",
    )


def check_origin(headers: Mapping[str, str], allowed: Iterable[str]) -> None:
    """Raise a 403 :class:`HttpError` when a write comes from a page of another origin
    than the server's own (its ``Host``, any scheme) and the ``allowed`` origins."""
    origin = headers.get("origin")
    if origin is not None:
        origin = origin.strip().lower()
        parts = urlsplit(origin)
        host = (headers.get("host") or "").strip().lower()
        own = parts.scheme in ("http", "https") and bool(host) and parts.netloc == host
        if own or origin in allowed:
            return
        raise HttpError(
            403,
            f"refusing a write from a page at {origin[:100]!r}: only this server's own pages "
            "(and --allowed-origin) may write",
            "cross_origin",
        )
    site = (headers.get("sec-fetch-site") or "").strip().lower()
    if site in ("cross-site", "same-site"):
        raise HttpError(
            403,
            f"refusing a write from a page of another site (Sec-Fetch-Site: {site})",
            "cross_origin",
        )


def check_content_type(headers: Mapping[str, str]) -> None:
    """Raise a 415 :class:`HttpError` unless a write's body is sent as JSON: a
    ``Content-Type`` must be ``application/json`` (or ``application/...+json``), and a
    write with a body must have one. A bodyless write without a type passes."""
    given = headers.get("content-type")
    if given is None:
        length = (headers.get("content-length") or "").strip()
        if "transfer-encoding" in headers or (length and length != "0"):
            raise HttpError(
                415, "send the body with Content-Type: application/json", "bad_content_type"
            )
        return
    media = given.split(";", 1)[0].strip().lower()
    if not _JSON_TYPE.fullmatch(media):
        raise HttpError(
            415,
            f"this API takes JSON: Content-Type {given[:80]!r} is not application/json",
            "bad_content_type",
        )


@dataclass(frozen=True)
class GuardConfig:
    """``allowed_hosts``: ``Host`` entries served (see :func:`check_host`);
    ``allowed_origins``: other origins whose pages may write."""

    allowed_hosts: tuple[str, ...] = LOOPBACK_NAMES
    allowed_origins: tuple[str, ...] = ()


class Guard:
    """ASGI middleware applying :func:`check_host` to every request and
    :func:`check_origin` and :func:`check_content_type` to every write; a refusal is
    answered ``{"error": ...}`` before the app sees the request."""

    def __init__(self, app: Any, config: GuardConfig) -> None:
        self.app = app
        self.hosts = config.allowed_hosts
        self.origins = frozenset(config.allowed_origins)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers, hosts = _headers(scope)
        try:
            check_host(hosts, self.hosts)
            if scope["method"] not in SAFE_METHODS:
                check_origin(headers, self.origins)
                check_content_type(headers)
        except HttpError as e:
            await _refuse(send, e)
            return
        await self.app(scope, receive, send)


def _headers(scope: Any) -> tuple[dict[str, str], list[str]]:
    """The request's headers by lower-case name (the first of repeated ones), and every
    ``Host`` header."""
    out: dict[str, str] = {}
    hosts: list[str] = []
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        if name == "host":
            hosts.append(value)
        out.setdefault(name, value)
    return out, hosts


async def _refuse(send: Any, error: HttpError) -> None:
    body = json.dumps({"error": error.message}, ensure_ascii=False, separators=(",", ":"))
    data = body.encode()
    await send(
        {
            "type": "http.response.start",
            "status": error.status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})
