"""A wait task's stored spec (``D_WAIT``) and signal records, as status shows them.

The Lua half is ``lua/lib/wait_tasks.lua``: it reads the same spec (``s`` signal, ``t``
timeout ms, ``o`` on_timeout, ``p`` sleep ms, ``u`` until epoch ms, ``m`` prompt) and
arms each timer at the task's ready time plus its timeout or sleep.
"""

from __future__ import annotations

import json
from typing import Any


def wait_due_ms(spec: dict[str, Any], ct_ms: int, ready_ms: int) -> int | None:
    """When a wait task's timer ends (epoch ms), from its spec, its workflow's creation
    time and its ready time (ms after creation); None: it has no timer."""
    if "u" in spec:
        return int(spec["u"])
    span = spec.get("p", spec.get("t"))
    if span is None:
        return None
    return ct_ms + ready_ms + int(span)


def wait_status(raw: str, ct_ms: int, ready: str, state: str) -> dict[str, Any]:
    """What a wait task waits for, in seconds, for :class:`~engine.core.model.TaskStatus`;
    ``due`` (epoch seconds) while it is suspended and has a timer."""
    spec = json.loads(raw)
    out: dict[str, Any] = {}
    if "s" in spec:
        out["signal"] = spec["s"]
        if "t" in spec:
            out["timeout"] = spec["t"] / 1000
            out["on_timeout"] = spec.get("o", "fail")
    elif "p" in spec:
        out["sleep"] = spec["p"] / 1000
    elif "u" in spec:
        out["until"] = spec["u"] / 1000
    if "c" in spec:
        out["child"] = spec["c"]
        if "v" in spec:
            out["version"] = spec["v"]
        if "i" in spec:
            out["input"] = spec["i"]
    if "m" in spec:
        out["prompt"] = spec["m"]
    if state == "suspended" and ready:
        due = wait_due_ms(spec, ct_ms, int(float(ready)))
        if due is not None:
            out["due"] = due / 1000
    return out


def signal_status(raw: str) -> dict[str, Any]:
    """What ended a wait task (its ``T_SIGNAL`` field), times in epoch seconds."""
    out: dict[str, Any] = json.loads(raw)
    if out.pop("late", False):  # a timer ended it (lib/wait_tasks.lua, fire_timers)
        out["timed_out"] = True
    if "at" in out:
        out["at"] = out["at"] / 1000
    return out
