"""Wait tasks: a task that runs no handler but waits for a signal, a time, or a child run.

A wait task (``wait:`` in a workflow file, ``wf.task(..., wait=...)`` in Python) takes no
agent, no slot and no lease while it waits. Once its parents allow it to run it is
``suspended`` (:class:`engine.core.model.TaskState`), with what it waits for and until when:

- ``{signal: approve, timeout: 2d, on_timeout: fail|succeed|skip}``: until a signal of
  that name reaches the run (``engine.signal``, ``redisflow signal``, HTTP); the signal's
  payload becomes the task's output. A signal that comes before the task is reached is
  kept for it; a signal id sent again is applied once.
- ``{sleep: 2h}`` or ``{until: "2026-12-01T06:00Z"}``: a durable sleep, ended by the
  engine's clock (Redis's), whatever agents come and go.

The Lua half is ``store/lua/lib/wait_tasks.lua`` (activation, ends, timers) with the scripts
``signal.lua`` and ``waits.lua``; :mod:`engine.runtime.wait_keeper` runs the timers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engine.core.timing import parse_duration
from engine.errors import DefinitionError
from engine.spec.messages import refuse_unknown

WAIT_TYPE = "~wait"  # the reserved task type of wait tasks: no agent serves it
ON_TIMEOUT = ("fail", "succeed", "skip")
MAX_WAIT_S = 366 * 86400.0  # the longest timeout or sleep
MAX_SIGNAL_NAME = 200
WAIT_FIELDS = {"signal", "timeout", "on_timeout", "sleep", "until", "prompt"}


@dataclass
class WaitSpec:
    """What a wait task waits for: a ``signal`` (with an optional ``timeout`` in seconds
    and what a timeout does), or a durable ``sleep`` (seconds) or ``until`` (epoch
    seconds). ``prompt`` is shown to the operator who may approve or reject it."""

    signal: str | None = None
    timeout: float | None = None
    on_timeout: str = "fail"
    sleep: float | None = None
    until: float | None = None
    prompt: str | None = None
    # the engine's own: it ends at once with the run's input as its output (the steps manager's
    # job, which a task: step with no depends maps over); not a field of wait:
    input: bool = False

    @property
    def kind(self) -> str:
        """``signal`` or ``sleep`` (``until`` is a sleep to a time)."""
        return "signal" if self.signal is not None else "sleep"

    def encoded(self) -> str:
        """The definition's field for it (``D_WAIT``), read by ``lib/wait_tasks.lua``:
        ``{"s": signal, "t": timeout ms, "o": on_timeout}`` or ``{"p": sleep ms}`` or
        ``{"u": until epoch ms}``; ``"m"`` the prompt."""
        out: dict[str, Any] = {}
        if self.input:
            out["n"] = 1
        elif self.signal is not None:
            out["s"] = self.signal
            if self.timeout is not None:
                out["t"] = max(1, round(self.timeout * 1000))
                out["o"] = self.on_timeout
        elif self.sleep is not None:
            out["p"] = max(0, round(self.sleep * 1000))
        else:
            out["u"] = round((self.until or 0) * 1000)
        if self.prompt:
            out["m"] = self.prompt
        return json.dumps(out, separators=(",", ":"), ensure_ascii=False)


def _bad(where: str, message: str) -> DefinitionError:
    return DefinitionError(f"{where}: {message}" if where else message)


def _secs(value: Any, what: str, where: str) -> float:
    if isinstance(value, str):
        value = parse_duration(value, f"{where}: {what}" if where else what)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(
            where, f"{what} must be a number of seconds or a duration like 2h, not {value!r}"
        )
    if not 0 <= value <= MAX_WAIT_S:
        raise _bad(where, f"{what} must be from 0 to {MAX_WAIT_S:.0f} seconds, not {value!r}")
    return float(value)


def _when(value: Any, where: str) -> float:
    """``until:`` as epoch seconds: an ISO 8601 time (``Z`` or an offset; a time without
    one is UTC), a datetime, or a number of epoch seconds."""
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            raise _bad(
                where, f"wait: until must be a time like 2026-12-01T06:00Z, not {value!r}"
            ) from None
    elif isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    else:
        raise _bad(where, f"wait: until must be a time like 2026-12-01T06:00Z, not {value!r}")
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def check_signal_name(name: Any, where: str = "") -> str:
    """``name`` if it can name a signal; else :class:`DefinitionError`."""
    if not isinstance(name, str) or not name.strip():
        raise _bad(where, f"a signal name must be a non-empty string, not {name!r}")
    if len(name) > MAX_SIGNAL_NAME:
        raise _bad(where, f"a signal name is at most {MAX_SIGNAL_NAME} characters")
    if not name.isprintable() or ":" in name:
        raise _bad(where, f"signal name {name!r}: no control characters and no ':'")
    return name


def wait_of(value: Any, where: str = "") -> WaitSpec:
    """A task's ``wait:`` as written (a mapping, or a :class:`WaitSpec`), checked."""
    if isinstance(value, WaitSpec):
        spec = value
    elif isinstance(value, dict):
        refuse_unknown(value, WAIT_FIELDS, f"{where}: wait" if where else "wait")
        spec = WaitSpec(
            signal=value.get("signal"),
            timeout=value.get("timeout"),
            on_timeout=value.get("on_timeout", "fail"),
            sleep=value.get("sleep"),
            until=value.get("until"),
            prompt=value.get("prompt"),
        )
    else:
        raise _bad(
            where,
            "wait must be a mapping like {signal: approve, timeout: 2d} or {sleep: 2h}, "
            f"not {value!r}",
        )
    if spec.input and isinstance(value, WaitSpec):
        return spec
    kinds = [k for k in ("signal", "sleep", "until") if getattr(spec, k) is not None]
    if len(kinds) != 1:
        raise _bad(where, "wait needs exactly one of signal, sleep or until")
    if spec.signal is not None:
        spec.signal = check_signal_name(spec.signal, where)
        if spec.timeout is not None:
            spec.timeout = _secs(spec.timeout, "wait: timeout", where)
            if spec.timeout <= 0:
                raise _bad(where, "wait: timeout must be above 0")
        if spec.on_timeout not in ON_TIMEOUT:
            raise _bad(
                where,
                f"wait: on_timeout must be one of {', '.join(ON_TIMEOUT)}, not {spec.on_timeout!r}",
            )
    else:
        if spec.timeout is not None:
            raise _bad(where, "wait: timeout goes with a signal (a sleep ends by itself)")
        if spec.sleep is not None:
            spec.sleep = _secs(spec.sleep, "wait: sleep", where)
        else:
            spec.until = _when(spec.until, where)
    if spec.prompt is not None and not isinstance(spec.prompt, str):
        raise _bad(where, f"wait: prompt must be text, not {spec.prompt!r}")
    return spec


@dataclass
class SignalResult:
    """What a signal did: ``delivered`` (the wait task ``task`` ended with it),
    ``buffered`` (kept for a wait not reached yet) or ``duplicate`` (its id was applied
    before: ``outcome`` is that first outcome)."""

    workflow_id: str
    name: str
    outcome: str
    task: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _clock(epoch: float) -> str:
    return datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M:%S")


def wait_line(
    wait: dict[str, Any] | None,
    signal: dict[str, Any] | None,
    state: str,
    since: float | None = None,
) -> str:
    """One line on a wait task (:class:`~engine.core.model.TaskStatus`'s ``wait`` and
    ``signal``): what it waits for and until when while it waits; what ended it after."""
    if wait is None:
        return ""
    if signal is not None and state not in ("ready", "suspended", "waiting"):
        if signal.get("child"):
            return f"child run {signal['child']} ended at {_clock(signal['at'])}"
        if "child" in signal or signal.get("nochild"):  # ("child": "" before this release)
            return f"no child run started; ended at {_clock(signal['at'])}"
        if signal.get("timed_out"):
            return f"timed out at {_clock(signal['at'])}" if "at" in signal else "timed out"
        if "name" not in signal:
            return f"woke at {_clock(signal['at'])}" if "at" in signal else ""
        how = "rejected" if signal.get("rejected") else "signal " + str(signal["name"])
        by = f" by {signal['by']}" if signal.get("by") else ""
        if signal.get("identity") and signal["identity"] != signal.get("by"):
            by += f" (as {signal['identity']})"  # as authenticated: token label, OS user
        at = f" at {_clock(signal['at'])}" if "at" in signal else ""
        note = f": {signal['comment']}" if signal.get("comment") else ""
        return f"{how}{by}{at}{note}"
    if state not in ("ready", "suspended"):
        return ""
    if "signal" in wait:
        text = f"waits for signal {wait['signal']}"
    elif "child" in wait:
        text = f"waits for its child run of template {wait['child']}"
    elif "until" in wait:
        text = f"sleeps until {_clock(wait['until'])}"
    else:
        text = f"sleeps {wait['sleep']:g}s"
    if since is not None and state == "suspended":
        text += f" since {_clock(since)}"
    if "due" in wait and "signal" in wait:
        text += f", until {_clock(wait['due'])} (then {wait.get('on_timeout', 'fail')})"
    elif "due" in wait and "until" not in wait:
        text += f", wakes {_clock(wait['due'])}"
    if wait.get("prompt"):
        text += f" — {wait['prompt']}"
    return text
