"""Event tuples ``[kind, wid, task index or -1, extra]`` and their batches.

The Lua half is ``lua/lib/events.lua``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from engine.core.model import Event

# A batch: {"ts": ms, "ev": [[kind, wid, task index or -1, extra], ...]}, one per script
# call, in the stream (field "e") and on the event channel. Tasks claimed or succeeded one
# after another in a call, with the same extra, share one event ["tasks.<kind>", 0, -1,
# ["<wid>:<i>,<wid>:<i>...", extra]]; items of one map likewise ["item.<kind>", wid, -1,
# [c, [k, k...], extra...]]. Both are handed out one event per task or item.

TASK_KINDS = frozenset(
    {
        "claimed", "succeeded", "failed", "retrying", "rejected", "requeued",
        "upstream_failed", "skipped", "suspended",
    }
)  # fmt: skip
BATCH_FIELD = "e"


def shared_tasks(extra: list[Any]) -> Iterator[tuple[str, int]]:
    """``(wid, task index)`` of each task a shared ``tasks.<kind>`` event stands for."""
    for member in extra[0].split(","):
        wid, _, i = member.partition(":")
        yield wid, int(i)


def event_kind(kind: str, idx: int) -> str:
    """The public kind of a stored event: ``task.<kind>``, ``workflow.<kind>``, or
    ``agent.<what>`` as stored."""
    if kind.startswith(("agent.", "item.", "step.", "schedule.")):
        return kind
    if idx >= 0 and kind in TASK_KINDS:
        return "task." + kind
    return "workflow." + kind


def decode_batch(body: str | bytes, entry_id: str = "") -> list[Event]:
    """Turn one stored/published batch into events, in the order they happened."""
    data = json.loads(body)
    ts = data["ts"] / 1000.0
    out: list[Event] = []
    for kind, wid, idx, extra in data["ev"]:
        if kind.startswith("tasks."):
            what = kind[6:]
            x = _extra(what, extra[1])
            out += [Event("task." + what, w, ts, i, x, entry_id) for w, i in shared_tasks(extra)]
            continue
        public = event_kind(kind, idx)
        if public == "agent.leases_extended":  # Redis stood still: leases moved on
            data = {"gap_ms": extra[0], "agents": extra[1]}
            out.append(Event(public, "", ts, None, data, entry_id))
        elif public.startswith("agent."):
            out.append(Event(public, "", ts, None, {"agent": extra}, entry_id))
        elif public.startswith(("item.", "step.")):
            if type(extra[1]) is list:  # items of one map sharing one event
                for k in extra[1]:
                    data = _item_extra(kind, [extra[0], k, *extra[2:]])
                    out.append(Event(public, str(wid), ts, extra[0], data, entry_id))
            else:
                out.append(
                    Event(public, str(wid), ts, extra[0], _item_extra(kind, extra), entry_id)
                )
        elif public.startswith("task."):
            out.append(Event(public, str(wid), ts, idx, _extra(kind, extra), entry_id))
        elif public.startswith("schedule."):  # {"schedule": name, ...}; wid: its run or 0
            if isinstance(extra, list):  # [name, why]: paused by a failed run
                extra = {"schedule": extra[0], "why": extra[1]}
            out.append(Event(public, str(wid) if wid else "", ts, None, extra, entry_id))
        else:
            out.append(Event(public, str(wid), ts, None, _extra(kind, extra), entry_id))
    return out


def brief_batch(data: dict[str, Any]) -> Iterator[tuple[str, str, int]]:
    """``(public kind, workflow id or "", task index or -1)`` of each event of a decoded
    batch: cheap enough for thousands of events a second."""
    for kind, wid, idx, extra in data["ev"]:
        if kind.startswith("tasks."):
            public = "task." + kind[6:]
            for w, i in shared_tasks(extra):
                yield public, w, i
            continue
        public = event_kind(kind, idx)
        if public.startswith("agent."):
            yield public, "", -1
        elif public.startswith(("item.", "step.")):
            for _ in extra[1] if type(extra[1]) is list else (None,):
                yield public, str(wid), extra[0]
        elif public.startswith("task."):
            yield public, str(wid), idx
        elif public.startswith("schedule.") and not wid:  # a schedule's own: no workflow
            yield public, "", -1
        else:
            yield public, str(wid), -1


def _item_extra(kind: str, extra: list[Any]) -> dict[str, Any]:
    """An item event's extra: ``[map task index, item index, what its task event has]``;
    a step's: ``[map task index, item index, step number, ...]``."""
    data: dict[str, Any] = {"item": extra[1]}
    rest = extra[2:]
    what = kind.partition(".")[2]
    if kind.startswith("step."):
        data["step"] = rest[0]
        rest = rest[1:]
    if what in ("claimed", "requeued") and rest:
        data["agent"] = rest[0]
    elif what == "failed" and rest:
        data["error"] = rest[0]
    elif what == "retrying" and len(rest) == 2:
        data.update(failures=rest[0], delay_ms=rest[1])
    elif what == "rejected" and len(rest) == 2:
        data.update(agent=rest[0], attempt=rest[1])
    return data


def _extra(kind: str, extra: Any) -> dict[str, Any]:
    if extra is None:
        return {}
    if kind in ("claimed", "requeued"):
        return {"agent": extra}
    if kind == "failed":
        return {"error": extra}
    if kind in ("upstream_failed", "skipped"):  # decided when that parent ended
        return {"parent": extra}
    if kind == "retrying":
        return {"failures": extra[0], "delay_ms": extra[1]}
    if kind == "rejected":
        return {"agent": extra[0], "attempt": extra[1]}
    if kind == "expanded":
        return {"task": extra[0], "items": extra[1]}
    if kind == "pushed":
        if isinstance(extra, list):
            return {"name": extra[0], "by": extra[1]}
        return {"name": extra}
    if kind == "retention" and isinstance(extra, list):  # expire.lua: ms kept, -1 never
        return {"ttl_ms": extra[0], "by": extra[1]}
    if kind == "signal":  # signal.lua: [name, outcome, task or "", by, identity]
        return signal_extra(extra)
    if isinstance(extra, list):  # an operator's step: {count, who}
        return {"count": extra[0], "by": extra[1]}
    return {"count": extra}


def signal_extra(extra: list[Any]) -> dict[str, Any]:
    """A ``workflow.signal`` event's data: the signal's name, its outcome (``delivered``,
    ``kept``, ``duplicate:<first>``), the task it reached (absent: none), who sent it as
    they say (``by``) and as authenticated (``identity``; absent in events of an earlier
    release)."""
    data: dict[str, Any] = {"signal": extra[0], "outcome": extra[1]}
    if extra[2]:
        data["task"] = extra[2]
    data["by"] = extra[3]
    if len(extra) > 4 and extra[4]:
        data["identity"] = extra[4]
    return data


def iter_stream(entries: list[tuple[Any, dict[Any, Any]]]) -> Iterator[Event]:
    """Events of stream entries as returned by XRANGE/XREVRANGE/XREAD."""
    for entry_id, fields in entries:
        eid = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
        body = fields.get(BATCH_FIELD.encode()) or fields.get(BATCH_FIELD)
        if body is not None:
            yield from decode_batch(body, eid)
