"""Request bodies and parameters: size limit, JSON with line and column, ``?wait=``,
``limit``, ``cursor`` and creation times.

Pure functions (and one async reader over any chunk iterator), tested without a server.
Numbers in a query or a header are ASCII digits only (``str.isdigit`` and ``int`` also
take other scripts' digits, ``int`` underscores and spaces), with a length cap before
any conversion.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from engine.core.timing import parse_duration

from ..errors import DefinitionError
from .errors import HttpError

MAX_KEY = 200  # characters of an idempotency key
MAX_CURSOR = 10**16 - 1  # the largest ?cursor= (an offset into the list of workflows)
_DIGITS = re.compile(r"[0-9]{1,18}")  # a whole number that fits in 64 bits
_NUMBER = r"[0-9]{1,12}(?:\.[0-9]{1,9})?"
# 90, 1m30s (the OpenAPI schema publishes the same pattern)
DURATION_PATTERN = rf"{_NUMBER}|(?:{_NUMBER}(?:ms|s|m|h|d|w|MS|S|M|H|D|W)){{1,8}}"
_DURATION = re.compile(DURATION_PATTERN, re.A)


def whole_number(value: str) -> int | None:
    """``value`` as an int when it is 1 to 18 ASCII digits, else None."""
    return int(value) if _DIGITS.fullmatch(value) else None


def check_length(header: str | None, limit: int) -> None:
    """413 at once when ``Content-Length`` says the body is over ``limit`` bytes."""
    if header is None:
        return
    size = whole_number(header.strip())
    if size is None:
        raise HttpError(400, f"Content-Length {header[:40]!r} is not a number")
    if size > limit:
        raise HttpError(413, _too_large(limit), "too_large")


async def read_limited(chunks: AsyncIterator[bytes], limit: int) -> bytes:
    """The whole body from ``chunks``, or a 413 :class:`HttpError` as soon as it passes
    ``limit`` bytes (the rest is not read into memory)."""
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise HttpError(413, _too_large(limit), "too_large")
        parts.append(chunk)
    return b"".join(parts)


def _too_large(limit: int) -> str:
    return f"the body is over the {limit}-byte payload limit"


def parse_json(body: bytes) -> Any:
    """The JSON value of ``body`` (None for an empty body).

    Raises a 400 :class:`HttpError` naming the line and column of a syntax error.
    """
    if not body.strip():
        return None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise HttpError(400, f"the body is not UTF-8 (byte {e.start})", "bad_json") from None
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as e:
        raise HttpError(
            400, f"malformed JSON at line {e.lineno}, column {e.colno}: {e.msg}", "bad_json"
        ) from None
    except RecursionError:
        raise HttpError(400, "the JSON body is nested too deeply", "bad_json") from None
    except ValueError as e:
        raise HttpError(400, f"malformed JSON: {e}", "bad_json") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)  # made once: loads() makes one a call


def parse_wait(value: str | None, most: float) -> float | None:
    """``?wait=30s`` (or ``30``, ``1m``) as seconds, at most ``most`` (a longer wait
    waits that long, as a long poll does); None when absent; a 400 :class:`HttpError`
    when it is not a duration."""
    if value is None:
        return None
    if len(value) > 64 or not _DURATION.fullmatch(value):
        raise HttpError(400, f"wait {value[:40]!r} is not a duration (like 30, 30s, 2m, 500ms)")
    try:
        seconds = parse_duration(value, "wait")
    except DefinitionError as e:
        raise HttpError(400, str(e)) from None
    return min(seconds, most)  # a longer wait waits as long as the server allows


def check_key(value: str | None, header: str) -> str | None:
    """An idempotency key from header ``header``: None when absent; a 400
    :class:`HttpError` when empty, longer than :data:`MAX_KEY` or not printable."""
    if value is None:
        return None
    key = value.strip()
    if not key or len(key) > MAX_KEY or not key.isprintable():
        raise HttpError(
            400,
            f"{header} must be 1 to {MAX_KEY} printable characters",
            "bad_idempotency_key",
        )
    return key


def parse_limit(value: str | None, default: int, most: int) -> int:
    """``?limit=`` as a whole number from 1 to ``most``."""
    if value is None:
        return default
    n = whole_number(value)
    if n is None or not 1 <= n <= most:
        raise HttpError(400, f"limit must be a whole number from 1 to {most}, not {value[:40]!r}")
    return n


def parse_cursor(value: str | None) -> int:
    """``?cursor=`` (a ``next_cursor`` this server gave) as an offset; 0 when absent."""
    if value is None:
        return 0
    n = whole_number(value)
    if n is None or n > MAX_CURSOR:
        raise HttpError(
            400,
            f"cursor {value[:40]!r} is not one this server gave "
            "(a whole number of at most 16 digits)",
        )
    return n


# An RFC 3339 date-time (the schema's "format": "date-time"), checked by fromisoformat.
_DATE_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})"
)
_EPOCH = datetime(1970, 1, 1)
# A key in a URL path: printable ASCII, not only blanks (the Idempotency-Key header's).
KEY_PATTERN = r"^[\x20-\x7e]*[\x21-\x7e][\x20-\x7e]*$"
_KEY = re.compile(KEY_PATTERN)


def parse_created(value: str | None, name: str) -> float | None:
    """``?created_after=`` / ``?created_before=``: an RFC 3339 time
    (``2026-11-25T10:00:00Z``, ``...+01:00``) as epoch seconds; None when absent."""
    if value is None:
        return None
    if _DATE_TIME.fullmatch(value):
        try:
            at = datetime.fromisoformat(value.upper())
        except ValueError:
            at = None
        offset = at.utcoffset() if at is not None else None
        if at is not None and offset is not None:
            # by hand: .timestamp() overflows near year 1 and 9999 with an offset
            return (at.replace(tzinfo=None) - _EPOCH - offset).total_seconds()
    raise HttpError(
        400,
        f"{name} {value[:40]!r} is not an RFC 3339 time (2026-11-25T10:00:00Z)",
    )


def check_path_key(value: str) -> str:
    """An idempotency key given in a URL path: 1 to :data:`MAX_KEY` printable ASCII
    characters, not only blanks (as the header takes them), stripped; else a 400."""
    if len(value) > MAX_KEY or not _KEY.fullmatch(value):
        raise HttpError(400, f"a key is 1 to {MAX_KEY} printable ASCII characters")
    return value.strip()
