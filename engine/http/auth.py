"""Who may call the HTTP server: bearer tokens per role, and webhook signatures.

Pure functions, no server and no Redis: the app calls them with the request's headers
and raw body. Every comparison of a secret is :func:`hmac.compare_digest`.

Roles: ``read`` (GET endpoints, ``/metrics``) and ``write`` (push runs, steer workflows;
write implies read). Without any token configured every caller has every role: the
server then binds loopback addresses only (:func:`is_loopback`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DefinitionError
from .errors import HttpError

ROLES = ("read", "write")
TOKEN_ENV = {"read": "REDISFLOW_HTTP_READ_TOKEN", "write": "REDISFLOW_HTTP_WRITE_TOKEN"}
STANDARD_TOLERANCE_S = 300.0  # Standard Webhooks: how far webhook-timestamp may be from now
WHSEC = "whsec_"
# a Standard Webhooks secret standard_key takes, as a regex (the HTTP API's schema for one):
# whsec_ and the base64 of 16 bytes or more
WHSEC_PATTERN = (
    r"^whsec_(?:[A-Za-z0-9+/]{4}){5,}(?:[A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)$"
)


ANONYMOUS = "anonymous"  # who calls a server with no token configured (loopback only)
MAX_LABEL = 64


@dataclass(frozen=True)
class Tokens:
    """Bearer tokens by role. Empty: no authentication (loopback only). ``labels``: who
    a token stands for, ``(token, label)`` (a token without one goes by its
    fingerprint, :func:`fingerprint`)."""

    read: frozenset[str] = field(default_factory=frozenset)
    write: frozenset[str] = field(default_factory=frozenset)
    labels: frozenset[tuple[str, str]] = field(default_factory=frozenset)

    @property
    def configured(self) -> bool:
        return bool(self.read or self.write)

    def role_of(self, token: str) -> str | None:
        """``"write"``, ``"read"`` or None for ``token``, every stored token compared in
        constant time (so a reply's timing says nothing about which one was close)."""
        found = self.identify(token)
        return None if found is None else found[0]

    def identify(self, token: str) -> tuple[str, str] | None:
        """``(role, label)`` of ``token``, or None, compared as :meth:`role_of` does."""
        given = token.encode()
        role, known = None, ""
        for name, tokens in (("read", self.read), ("write", self.write)):
            for t in tokens:
                if hmac.compare_digest(given, t.encode()):
                    role, known = (name, t) if role != "write" else (role, known)
        if role is None:
            return None
        label = next((lb for t, lb in self.labels if t == known), None)
        return role, label or fingerprint(known)


def fingerprint(token: str) -> str:
    """A token's label when it has none: ``sha256:`` and the first 8 hex digits of its
    SHA-256 (names it in status and events without giving it away)."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()[:8]


def load_tokens(path: str | None = None, env: Mapping[str, str] | None = None) -> Tokens:
    """Tokens from ``path`` (lines ``role token`` or ``role token label=NAME``; blank
    lines and ``#`` comments skipped) and from ``REDISFLOW_HTTP_READ_TOKEN`` /
    ``REDISFLOW_HTTP_WRITE_TOKEN`` (labelled with the variable's name).

    Raises :class:`DefinitionError` naming the file and line of a bad entry.
    """
    env = os.environ if env is None else env
    found: dict[str, set[str]] = {r: set() for r in ROLES}
    labels: dict[str, str] = {}
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise DefinitionError(f"{path}: cannot read the token file ({e})") from None
        for n, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            labelled = len(parts) == 3 and parts[2].startswith("label=")
            if (
                len(parts) not in (2, 3)
                or (len(parts) == 3 and not labelled)
                or (parts[0] not in ROLES)
            ):
                raise DefinitionError(
                    f"{path}:{n}: expected 'read TOKEN' or 'write TOKEN' (and an optional "
                    f"label=NAME), got {len(parts)} word(s) starting {parts[0][:20]!r}"
                )
            token = _checked(parts[1], f"{path}:{n}")
            found[parts[0]].add(token)
            if labelled:
                labels[token] = _label(parts[2][6:], f"{path}:{n}")
    for role, name in TOKEN_ENV.items():
        value = env.get(name, "").strip()
        if value:
            found[role].add(_checked(value, name))
            labels.setdefault(value, name)
    return Tokens(frozenset(found["read"]), frozenset(found["write"]), frozenset(labels.items()))


def _label(label: str, where: str) -> str:
    if not 0 < len(label) <= MAX_LABEL or not label.isascii() or not label.isprintable():
        raise DefinitionError(
            f"{where}: a token's label is 1 to {MAX_LABEL} printable ASCII characters"
        )
    return label


def _checked(token: str, where: str) -> str:
    if len(token) < 16:
        raise DefinitionError(f"{where}: a token must be at least 16 characters long")
    if not token.isascii() or not token.isprintable():
        raise DefinitionError(f"{where}: a token must be printable ASCII")
    return token


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def require(tokens: Tokens, header: str | None, role: str) -> str:
    """Who calls, as authenticated: ``token <label>`` (:class:`Tokens`), or
    :data:`ANONYMOUS` when no token is configured (then anything goes). Raises a 401
    :class:`HttpError` unless ``header`` carries a known token, a 403 one when ``role``
    is ``write`` and the token may only read."""
    if not tokens.configured:
        return ANONYMOUS
    token = bearer(header)
    if token is None:
        raise HttpError(401, "missing bearer token (Authorization: Bearer <token>)", "unauthorized")
    found = tokens.identify(token)
    if found is None:
        raise HttpError(401, "invalid bearer token", "unauthorized")
    if role == "write" and found[0] != "write":
        raise HttpError(403, "this token may only read: this needs a write token", "read_only")
    return f"token {found[1]}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is only reachable from this machine."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# -- webhook signatures -----------------------------------------------------------------


def verify_github(secret: str, body: bytes, header: str | None) -> None:
    """GitHub's ``X-Hub-Signature-256: sha256=<hex>``: HMAC-SHA256 of the raw body.

    Raises a 401 :class:`HttpError` when it is missing or does not match.
    """
    if not header:
        raise HttpError(401, "missing X-Hub-Signature-256 header", "missing_signature")
    prefix, _, given = header.strip().partition("=")
    if prefix != "sha256" or not given:
        raise HttpError(401, "X-Hub-Signature-256 must be sha256=<hex>", "bad_signature")
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), given.strip().lower().encode()):
        raise HttpError(401, "signature does not match", "bad_signature")


def github_signature(secret: str, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value GitHub would send for ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def standard_key(secret: str) -> bytes:
    """The key of a Standard Webhooks secret ``whsec_<base64>``.

    Raises :class:`DefinitionError` when it is not one.
    """
    if not secret.startswith(WHSEC):
        raise DefinitionError("a standard-webhooks secret must look like whsec_<base64>")
    try:
        key = base64.b64decode(secret[len(WHSEC) :], validate=True)
    except (binascii.Error, ValueError):
        raise DefinitionError("the standard-webhooks secret after whsec_ is not base64") from None
    if len(key) < 16:
        raise DefinitionError("the standard-webhooks secret must hold at least 16 bytes")
    return key


def verify_standard(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    now: float,
    tolerance_s: float = STANDARD_TOLERANCE_S,
) -> None:
    """Standard Webhooks: ``webhook-signature: v1,<base64>`` (one or more, space
    separated) of HMAC-SHA256 over ``<webhook-id>.<webhook-timestamp>.<body>``, with the
    timestamp within ``tolerance_s`` of ``now`` (a replayed old delivery fails).

    Raises a 401 :class:`HttpError` naming what is wrong.
    """
    msg_id = headers.get("webhook-id")
    stamp = headers.get("webhook-timestamp")
    signatures = headers.get("webhook-signature")
    if not msg_id or not stamp or not signatures:
        raise HttpError(
            401,
            "missing webhook-id, webhook-timestamp or webhook-signature header",
            "missing_signature",
        )
    try:
        sent = int(stamp)
    except ValueError:
        raise HttpError(401, "webhook-timestamp is not a whole number", "bad_signature") from None
    if abs(now - sent) > tolerance_s:
        raise HttpError(
            401,
            f"webhook-timestamp is {now - sent:+.0f}s from now (tolerance {tolerance_s:g}s)",
            "stale_timestamp",
        )
    expected = standard_signature(secret, msg_id, sent, body).encode()
    if not _any_equal(expected, signatures.split()):
        raise HttpError(401, "signature does not match", "bad_signature")


def standard_signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` entry (``v1,<base64>``) a sender would make."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(standard_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def _any_equal(expected: bytes, given: Iterable[str]) -> bool:
    ok = False
    for sig in given:
        if sig.startswith("v1,"):
            ok |= hmac.compare_digest(expected, sig.encode())
    return ok


def verify_bearer_secret(secret: str, header: str | None) -> None:
    """A trigger with ``bearer`` auth: ``Authorization: Bearer <its secret>``."""
    token = bearer(header)
    if token is None:
        raise HttpError(401, "missing bearer token (Authorization: Bearer <token>)", "unauthorized")
    if not hmac.compare_digest(token.encode(), secret.encode()):
        raise HttpError(401, "invalid bearer token", "unauthorized")
