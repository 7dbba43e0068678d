"""Sending signals to runs: what ``engine.signal``, ``redisflow signal`` and the HTTP
API share (checks before any write, then one atomic ``signal.lua`` call)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from engine.errors import DefinitionError
from engine.spec.definition import show_value
from engine.spec.wait_tasks import SignalResult, check_signal_name

if TYPE_CHECKING:
    from engine.runtime.deployment import Deployment

MAX_SIGNAL_ID = 200
MAX_COMMENT = 2000
MAX_BY = 200  # the sender's name as it says (``by``) and as authenticated (``identity``)
# A run's mailboxes (signals kept for its waits not reached yet) hold at most this many
# payloads of the deployment's size limit, in bytes (8 MiB by default); signal.lua also
# keeps at most 100 per name.
KEPT_PAYLOADS = 8


def kept_bytes(engine: Deployment) -> int:
    """The most bytes of signals a run keeps for its waits not reached yet."""
    return KEPT_PAYLOADS * engine.max_payload


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
    identity: str | None = None,
) -> SignalResult:
    """Send signal ``name`` to workflow ``wid`` (see :meth:`engine.Engine.signal`):
    ``identity`` is who sends it as authenticated (default: the engine's actor, the OS
    user), ``by`` as the sender says (default: ``identity``)."""
    check_signal_name(name)
    if signal_id is not None and (
        not isinstance(signal_id, str) or not 0 < len(signal_id) <= MAX_SIGNAL_ID
    ):
        raise DefinitionError(
            f"a signal id is text of 1 to {MAX_SIGNAL_ID} characters, not {show_value(signal_id)}"
        )
    if comment is not None and (not isinstance(comment, str) or len(comment) > MAX_COMMENT):
        raise DefinitionError(f"a comment is text of at most {MAX_COMMENT} characters")
    for what, value in (("by", by), ("identity", identity)):
        if value is not None and (not isinstance(value, str) or len(value) > MAX_BY):
            raise DefinitionError(f"a signal's {what} is text of at most {MAX_BY} characters")
    text = encode_payload(payload, engine.max_payload)
    ident = identity or engine.actor
    outcome, task = engine.store.calls.signal(
        wid, name, text, signal_id or "", by or ident, reject, comment or "",
        kept_bytes(engine), ident,
    )  # fmt: skip
    return SignalResult(str(wid), name, outcome, task or None)
