"""Sending signals to runs: what ``engine.signal``, ``redisflow signal`` and the HTTP
API share (checks before any write, then one atomic ``signal.lua`` call)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .definition import show_value
from .errors import DefinitionError
from .waits import SignalResult, check_signal_name

if TYPE_CHECKING:
    from .deployment import Deployment

MAX_SIGNAL_ID = 200
MAX_COMMENT = 2000


def encode_payload(payload: Any, max_bytes: int) -> str:
    """A signal's payload as JSON ("" for none); refused when it is not JSON or too big."""
    if payload is None:
        return ""
    try:
        text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as e:
        raise DefinitionError(f"a signal's payload must be JSON ({show_value(str(e))})") from None
    size = len(text.encode())
    if size > max_bytes:
        raise DefinitionError(
            f"a signal's payload is {size} bytes, over the {max_bytes}-byte limit"
        )
    return text


def send(
    engine: Deployment,
    wid: str | int,
    name: str,
    payload: Any = None,
    *,
    signal_id: str | None = None,
    reject: bool = False,
    comment: str | None = None,
    by: str | None = None,
) -> SignalResult:
    """Send signal ``name`` to workflow ``wid`` (see :meth:`engine.Engine.signal`)."""
    check_signal_name(name)
    if signal_id is not None and (
        not isinstance(signal_id, str) or not 0 < len(signal_id) <= MAX_SIGNAL_ID
    ):
        raise DefinitionError(
            f"a signal id is text of 1 to {MAX_SIGNAL_ID} characters, not {show_value(signal_id)}"
        )
    if comment is not None and (not isinstance(comment, str) or len(comment) > MAX_COMMENT):
        raise DefinitionError(f"a comment is text of at most {MAX_COMMENT} characters")
    text = encode_payload(payload, engine.max_payload)
    outcome, task = engine.store.signal(
        wid, name, text, signal_id or "", by or engine.actor, reject, comment or ""
    )
    return SignalResult(str(wid), name, outcome, task or None)
