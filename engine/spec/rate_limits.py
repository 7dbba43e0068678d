"""Per-key rate limits: at most ``limit`` starts per ``per`` for each rate key.

A task (``rate_limit: {key, limit, per, burst}``), a workflow or template (``rate_limits:
{<type>: {...}}``, for its tasks of that type) or the deployment
(:meth:`engine.Engine.put_rate_limit`, per task type) says how fast tasks may start.
The key names a *bucket*: ``input.<dotted field>`` (the run's input), ``payload.<dotted
field>`` (the task's payload) or a constant. One bucket is (task type, key value): every
task of that type with that key value shares it, whatever its workflow.

The buckets are GCRA (a token bucket kept as one time, the *theoretical arrival time*) on
Redis's clock, taken by the claim script (``lua/lib/rate_limits.lua``). Over any window of
``w`` ms at most ``burst + limit * w / per`` tasks of one bucket start.

Rate keys from the input are computed at push (here, :func:`rate_keys`) and stored with
the run (workflow field ``rk``), so the Lua never decodes an input; constants and payload
fields are resolved when the definition is compiled.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.errors import DefinitionError
from engine.spec.messages import refuse_unknown

MAX_LIMIT = 1_000_000
MAX_BURST = 1_000_000
MAX_KEY_BYTES = 512
UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
# a period's shape (its range, up to 366 days, is checked by period_ms): also the HTTP
# API's schema for one
PERIOD_PATTERN = r"^\s*(\d{1,9})?\s*(ms|s|m|h|d)\s*$"
_PERIOD = re.compile(PERIOD_PATTERN)
FIELDS = ("key", "limit", "per", "burst")
INPUT, PAYLOAD = "input.", "payload."


def period_ms(per: Any, where: str) -> int:
    """``per`` ("1s", "30s", "1m", "1h", "m"...) as milliseconds; else
    :class:`DefinitionError` naming ``where``."""
    m = _PERIOD.match(per) if isinstance(per, str) else None
    ms = UNITS[m.group(2)] * int(m.group(1) or "1") if m else 0
    if not m or ms <= 0 or ms > 366 * UNITS["d"]:
        raise DefinitionError(
            f"{where}: rate limit per must be a period like 1s, 1m or 1h (units ms, s, m, "
            f"h, d), not {per!r}"
        )
    return ms


@dataclass(frozen=True)
class RateLimit:
    """At most ``limit`` task starts per ``per`` for each value of ``key``, with up to
    ``burst`` at once after a quiet spell.

    ``key``: ``"input.<field>"`` (dotted, a field of the run's input), ``"payload.<field>"``
    (of the task's payload) or any other string, a constant (one bucket for the type).
    """

    key: str
    limit: int
    per: str = "1s"
    burst: int = 1

    def check(self, where: str) -> None:
        """Raise :class:`DefinitionError` naming ``where`` unless it is well formed."""
        for what, value, top in (
            ("limit", self.limit, MAX_LIMIT),
            ("burst", self.burst, MAX_BURST),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
                raise DefinitionError(
                    f"{where}: rate limit {what} must be a whole number from 1 to {top}, "
                    f"not {value!r}"
                )
        period_ms(self.per, where)
        if (
            not isinstance(self.key, str)
            or not self.key.strip()
            or len(self.key.encode()) > MAX_KEY_BYTES
        ):
            raise DefinitionError(
                f"{where}: rate limit key must be a non-empty string of at most "
                f"{MAX_KEY_BYTES} bytes (input.<field>, payload.<field> or a constant), "
                f"not {self.key!r}"
            )
        for prefix in (INPUT, PAYLOAD):
            if self.key.startswith(prefix) and not all(self.key[len(prefix) :].split(".")):
                raise DefinitionError(
                    f"{where}: rate limit key {self.key!r} must name a field after "
                    f"{prefix!r} (dotted: {prefix}customer.id)"
                )

    @property
    def per_ms(self) -> int:
        return period_ms(self.per, "rate limit")

    @property
    def from_input(self) -> bool:
        """Whether its key is a field of the run's input (known only at push)."""
        return self.key.startswith(INPUT)

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "limit": self.limit, "per": self.per, "burst": self.burst}


def _whole(value: Any) -> Any:
    """A number as written, a whole float as the integer it is (JSON's ``3.0`` is ``3``)."""
    return int(value) if type(value) is float and value.is_integer() else value


def rate_limit_from(value: Any, where: str) -> RateLimit | None:
    """A :class:`RateLimit` from what a file or a call says (a mapping ``{key, limit, per,
    burst}``, or a RateLimit), checked; None stays None."""
    if value is None:
        return None
    if isinstance(value, RateLimit):
        value.check(where)
        return value
    if not isinstance(value, Mapping):
        raise DefinitionError(
            f"{where}: rate_limit must be a mapping like {{key: input.customer, limit: 10, "
            f"per: 1s, burst: 1}}, not {value!r}"
        )
    refuse_unknown(value, FIELDS, f"{where}: rate_limit", all_named=True)
    for need, what in (("key", "whose bucket"), ("limit", "how many per period")):
        if need not in value:
            raise DefinitionError(f"{where}: rate_limit needs a {need} ({what})")
    key = value["key"]
    limit, burst = _whole(value["limit"]), _whole(value.get("burst", 1))
    r = RateLimit(key, limit, value.get("per", "1s"), burst)
    r.check(where)
    return r


def rate_limits_from(value: Any, where: str) -> dict[str, RateLimit]:
    """A workflow's (or template's) ``rate_limits: {<type>: {...}}``, checked."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DefinitionError(
            f"{where}: rate_limits must map task types to rate limits, not {value!r}"
        )
    out: dict[str, RateLimit] = {}
    for typ, spec in value.items():
        if not isinstance(typ, str):
            raise DefinitionError(f"{where}: rate_limits: a task type is a string, not {typ!r}")
        r = rate_limit_from(spec, f"{where}: rate_limits of type {typ!r}")
        if r is not None:
            out[typ] = r
    return out


def task_types(wf: Any) -> list[str]:
    """The task types of a workflow (before it is validated: what is not a type is left
    out), whose deployment's rate limits a push reads."""
    tasks = getattr(wf, "tasks", None)
    if not isinstance(tasks, list):
        return []
    return sorted({t for t in (getattr(x, "type", None) for x in tasks) if isinstance(t, str)})


def field_value(doc: Any, path: str) -> tuple[bool, Any]:
    """(found, value) of the dotted ``path`` in ``doc``."""
    value = doc
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return False, None
        value = value[part]
    return True, value


def key_text(value: Any) -> str:
    """A key's value as the bucket's name: a string as is, anything else as JSON."""
    return (
        value
        if isinstance(value, str)
        else json.dumps(value, sort_keys=True, separators=(",", ":"))
    )


def constant_key(r: RateLimit, payload: Any, task: str, where: str) -> str | None:
    """The bucket key of a task whose key does not come from the input (None when it
    does): the constant, or the payload field's value (:class:`DefinitionError` when the
    payload has no such field)."""
    if r.from_input:
        return None
    if not r.key.startswith(PAYLOAD):
        return check_key_bytes(r.key, task, where)
    found, value = field_value(payload, r.key[len(PAYLOAD) :])
    if not found:
        raise DefinitionError(
            f"{where}: task {task!r}: its payload has no field {r.key[len(PAYLOAD) :]!r}, "
            "which its rate limit key names"
        )
    return check_key_bytes(key_text(value), task, where)


def check_key_bytes(text: str, task: str, where: str) -> str:
    if len(text.encode()) > MAX_KEY_BYTES:
        raise DefinitionError(
            f"{where}: task {task!r}: its rate limit key is over {MAX_KEY_BYTES} bytes"
        )
    return text


def rate_keys(workflow: str, paths: list[tuple[int, str, str]], input: Any) -> dict[str, str]:
    """The bucket keys of one run's tasks whose key is an input field: {task index: key}.
    ``paths``: (index, task name, field path). Raises :class:`DefinitionError` when the
    input has no such field (nothing is pushed)."""
    out: dict[str, str] = {}
    for i, task, path in paths:
        found, value = field_value(input, path)
        if not found:
            raise DefinitionError(
                f"workflow {workflow!r}: its input has no field {path!r}, which the rate "
                f"limit key of task {task!r} names"
            )
        out[str(i)] = check_key_bytes(key_text(value), task, f"workflow {workflow!r}")
    return out


def encode_spec(r: RateLimit, constant: str | None) -> str:
    """Definition field ``<i>L`` (lua/lib/rate_limits.lua reads it): ``<emission interval
    us>|<burst>|<key>``, the key ``=<constant>`` or ``@`` (the run's field ``rk``)."""
    interval_us = -(-r.per_ms * 1000 // r.limit)  # rounded up: never faster than asked
    key = "@" if constant is None else "=" + constant
    return f"{interval_us}|{r.burst}|{key}"
