"""Webhook triggers: checked at creation (never fail open), verified per delivery.

A trigger (:class:`~engine.store.triggers.Trigger`) names a template, an auth scheme and
its secret, and the header whose value makes a delivery idempotent:

* ``github``: ``X-Hub-Signature-256: sha256=<hex>``, HMAC-SHA256 of the raw body;
* ``standard-webhooks``: ``webhook-id``, ``webhook-timestamp``, ``webhook-signature``
  (secret ``whsec_<base64>``, 5-minute tolerance);
* ``bearer``: ``Authorization: Bearer <secret>``;
* ``none``: anyone may run it; only when asked for by name, and never with a secret.

Pure functions: the app and the CLI call them; nothing here talks to Redis.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from ..errors import DefinitionError
from ..spec.flow import trigger_key
from ..store.triggers import AUTH_SCHEMES, Trigger
from .auth import standard_key, verify_bearer_secret, verify_github, verify_standard
from .bodies import check_key
from .errors import HttpError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")  # goes in a URL path as is
HEADER = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$")  # an HTTP header name (token)
SECRET_MAX = 4096


def check_trigger_name(name: str) -> str:
    """``name`` if it can name a trigger (it goes in a URL path as is)."""
    if not NAME.match(name):
        raise DefinitionError(
            f"trigger name {name[:120]!r} must be 1 to 100 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def read_secret(
    env_name: str | None, file: str | None, env: Mapping[str, str] | None = None
) -> str:
    """The secret from environment variable ``env_name`` or from ``file`` (its text,
    trailing whitespace dropped); ``""`` when neither is given.

    Raises :class:`DefinitionError` when the variable is unset or empty, the file cannot
    be read or is empty, or both are given.
    """
    env = os.environ if env is None else env
    if env_name and file:
        raise DefinitionError("give --secret-env or --secret-file, not both")
    if env_name:
        value = env.get(env_name, "").strip()
        if not value:
            raise DefinitionError(f"--secret-env {env_name}: the variable is unset or empty")
        return _checked_secret(value, f"--secret-env {env_name}")
    if file:
        try:
            value = Path(file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as e:
            raise DefinitionError(f"--secret-file {file}: cannot read it ({e})") from None
        if not value:
            raise DefinitionError(f"--secret-file {file}: the file is empty")
        return _checked_secret(value, f"--secret-file {file}")
    return ""


def _checked_secret(value: str, where: str) -> str:
    if len(value) > SECRET_MAX:
        raise DefinitionError(f"{where}: the secret is over {SECRET_MAX} characters")
    if not value.isprintable():
        raise DefinitionError(f"{where}: the secret holds a control character or line break")
    return value


def new_trigger(
    name: str,
    template: str,
    auth: str,
    secret: str = "",
    idempotency_header: str = "",
    created_by: str = "",
) -> Trigger:
    """A checked :class:`Trigger`.

    Raises :class:`DefinitionError` for a bad name or header, an unknown scheme, a
    scheme that needs a secret given none (a trigger never fails open), a secret given
    to ``none``, or a Standard Webhooks secret that is not ``whsec_<base64>``.
    """
    check_trigger_name(name)
    if not template or not template.strip():
        raise DefinitionError(f"trigger {name}: give the template it runs")
    if auth not in AUTH_SCHEMES:
        raise DefinitionError(
            f"trigger {name}: auth {auth!r} is not one of {', '.join(AUTH_SCHEMES)}"
        )
    if auth == "none":
        if secret:
            raise DefinitionError(f"trigger {name}: auth none takes no secret")
    elif not secret:
        raise DefinitionError(
            f"trigger {name}: auth {auth} needs a secret (--secret-env VAR or "
            "--secret-file FILE); refusing to create a trigger anyone could run"
        )
    if auth == "standard-webhooks":
        try:
            standard_key(secret)
        except DefinitionError as e:
            raise DefinitionError(f"trigger {name}: {e}") from None
    if idempotency_header and not HEADER.match(idempotency_header):
        raise DefinitionError(
            f"trigger {name}: {idempotency_header[:100]!r} is not an HTTP header name"
        )
    return Trigger(name, template, auth, secret, idempotency_header, None, created_by)


def verify_delivery(trigger: Trigger, headers: Mapping[str, str], body: bytes, now: float) -> None:
    """Check a delivery's credentials against ``trigger`` (``headers`` looked up in lower
    case). Raises a 401 :class:`HttpError` when they do not pass. The stored scheme is
    checked at every delivery and fails closed: a trigger stored the old way (readable by
    every role), an unknown or missing scheme, a scheme needing a secret without one, or
    ``none`` with a secret (never made by ``new_trigger``) refuses every delivery."""
    if trigger.legacy:
        raise HttpError(
            401,
            f"trigger {trigger.name} was stored before trigger secrets were sealed (every "
            "Redis user of the namespace could read or change it): put it again with a new "
            "secret (redisflow trigger put)",
            "legacy_trigger",
        )
    if trigger.auth not in AUTH_SCHEMES:
        raise HttpError(
            401, f"trigger {trigger.name} has unknown auth {trigger.auth!r}", "no_secret"
        )
    if trigger.auth == "none":
        if trigger.secret:  # a secret beside "none": not made by new_trigger
            raise HttpError(
                401, f"trigger {trigger.name} has auth none and a secret: put it again", "no_secret"
            )
        return
    if not trigger.secret:  # stored by hand without one: never fail open
        raise HttpError(401, f"trigger {trigger.name} has no secret", "no_secret")
    if trigger.auth == "github":
        verify_github(trigger.secret, body, headers.get("x-hub-signature-256"))
    elif trigger.auth == "standard-webhooks":
        try:
            verify_standard(trigger.secret, headers, body, now)
        except DefinitionError:  # the stored secret is not whsec_...
            raise HttpError(
                401, f"trigger {trigger.name} has an unusable secret", "no_secret"
            ) from None
    elif trigger.auth == "bearer":
        verify_bearer_secret(trigger.secret, headers.get("authorization"))
    else:  # a scheme added to AUTH_SCHEMES without its check here
        raise HttpError(
            401, f"trigger {trigger.name} has unknown auth {trigger.auth!r}", "no_secret"
        )


def delivery_key(trigger: Trigger, headers: Mapping[str, str]) -> str | None:
    """The run key of a delivery: ``trigger:<name>:<header value>``, or None for a
    trigger without an idempotency header. A delivery lacking the header it names is
    refused (400): deduplicating it on anything else, or not at all, would surprise."""
    if not trigger.idempotency_header:
        return None
    value = headers.get(trigger.idempotency_header.lower())
    key = check_key(value, trigger.idempotency_header)
    if key is None:
        raise HttpError(
            400,
            f"missing {trigger.idempotency_header} header (trigger {trigger.name} "
            "deduplicates deliveries on it)",
            "missing_idempotency_key",
        )
    return trigger_key(trigger.name, key)
