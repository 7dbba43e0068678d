"""Every format Python shares with the Lua scripts, defined once.

The Lua half is ``lua/_lib.lua``; ``tests/test_codec.py`` runs both sides against each
other. What lives here:

* field names of a workflow hash and of a definition hash;
* the task record, ``state|attempts|ready|begin|done|agent`` (:func:`parse_record`,
  :func:`pack_record`);
* a definition laid out as ``push.lua`` takes it (:func:`compile_workflow`);
* the claim reply row (:func:`decode_claim_row`);
* the event tuple ``[kind, wid, task index or -1, extra]`` and its batches
  (:func:`decode_batch`, :func:`brief_batch`);
* a workflow hash merged with its definition, as a status (:func:`parse_status`).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..definition import (
    DEFAULT_BACKOFF_MAX,
    DEFAULT_MAX_PAYLOAD,
    DEFAULT_MAX_TASKS,
    Workflow,
    resolve,
    validate,
)
from ..errors import DefinitionError
from ..handlers import Task
from ..mapping import DEFAULT_MAX_ITEMS, DEFAULT_WINDOW, check_map
from ..model import (
    Event,
    TaskState,
    TaskStatus,
    WorkflowState,
    WorkflowStatus,
    WorkflowSummary,
    decode_json,
)
from ..rules import DEFAULT_RULE, FINALLY, HANDLER_RULES

_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
# what users give (inputs) must be JSON any reader takes: no NaN or Infinity
_encode_strict = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode

# -- workflow hash (P:w:<wid>) ------------------------------------------------------------
# Meta fields: name, state, definition digest, task count, tasks not terminal, succeeded,
# failed, skipped, created ms, finished ms; upstream_failed (written from the first one).
F_NAME, F_STATE, F_DIGEST, F_COUNT = "name", "st", "d", "n"
F_LEFT, F_OK, F_BAD, F_SKIP, F_CREATED, F_FINISHED = "left", "ok", "bad", "skip", "ct", "ft"
F_UPSTREAM = "uf"
F_INPUT = "in"  # the workflow's input JSON, when it was given one
SUMMARY_FIELDS = (
    F_NAME, F_STATE, F_COUNT, F_OK, F_BAD, F_SKIP, F_CREATED, F_FINISHED, F_UPSTREAM,
)  # fmt: skip
# Per task i: the record is the field named by the bare index; then these suffixes.
# `<i>w` counts its parents' ends: s + RULE_BASE * k + RULE_BASE**2 * f (succeeded,
# skipped, failed or upstream_failed so far); absent 0. A task with the default rule
# and one parent has none; with the default rule, f is never counted (its first failed
# parent decides it).
T_FAILURES, T_LOST, T_OUTPUT, T_ERROR, T_PARENTS_OK = "f", "l", "o", "e", "w"
RULE_BASE = 1 << 17  # above the most parents a task may have (definition.MAX_PARENTS)

# -- definition hash (P:d:<digest>) -------------------------------------------------------
# Whole-definition fields: users, retry backoff base ms, longest retry delay ms; the
# tasks that handle failures (rules one_failed, all_failed) and the finally tasks, as
# index csvs (absent: none; read only when a workflow with failures ends).
D_USERS, D_BACKOFF, D_BACKOFF_MAX = "r", "bk", "bm"
D_HANDLERS, D_FINALLY = "hf", "fy"
# Per task i, suffixes: name, type, payload JSON, priority, max attempts, children csv,
# parents csv, parents' names JSON, how many parents (when more than one; "<n>m" for a
# map, "<n>r" for a task with a rule other than all_success), that rule (absent:
# all_success, and then W has no "r": the default rule reads no field more).
D_NAME, D_TYPE, D_PAYLOAD, D_PRIORITY, D_ATTEMPTS = "N", "T", "P", "R", "M"
D_CHILDREN, D_PARENTS, D_PARENT_NAMES, D_WAIT_FOR, D_RULE = "C", "U", "V", "W", "G"
# A map's (engine.mapping): "<parent index>|<key>", window, on_empty, tolerate, max items.
D_MAP, D_WINDOW, D_ON_EMPTY, D_TOLERATE, D_MAX_ITEMS = "m", "X", "E", "O", "I"
# A map's runtime fields in the workflow hash: elements stored, items in all (once
# expanded), started, in flight, succeeded, failed, cancelled.
M_STORED, M_TOTAL, M_STARTED, M_FLYING, M_OK, M_BAD, M_CANCELLED = "h", "n", "x", "y", "k", "z", "c"
# An item k's fields in its map's hash (P:w:<wid>:m:<c>): its record is the field named k;
# output, error, failures and leases lost take the task suffixes; then its element JSON.
I_ELEMENT = "p"
# Per-task fields status() reads, definition's first.
TASK_FIELDS = (
    D_NAME, D_TYPE, D_PAYLOAD, D_PRIORITY, D_ATTEMPTS, D_CHILDREN, D_PARENTS, D_RULE,
    T_FAILURES, T_OUTPUT, T_ERROR,
)  # fmt: skip


def field(index: int, suffix: str = "") -> str:
    """The field of task ``index`` (its record without a suffix)."""
    return f"{index}{suffix}"


# -- the task record ----------------------------------------------------------------------

Record = tuple[str, str, str, str, str, str]
NO_RECORD: Record = ("waiting", "0", "", "", "", "")


def parse_record(value: str | None) -> Record:
    """A task's record as its parts: state, attempts (the fencing token), ready, begin and
    done times (ms after the workflow's creation, "" for none), agent. No record: a
    waiting task never started."""
    if not value:
        return NO_RECORD
    st, a, q, b, d, g = value.split("|", 5)
    return st, a, q, b, d, g


def pack_record(
    state: str,
    attempts: int | str,
    ready: Any = "",
    begin: Any = "",
    done: Any = "",
    agent: str = "",
) -> str:
    """The record field of a task (``trec`` in ``_lib.lua``); the agent comes last, so its
    id may hold any character."""
    return f"{state}|{attempts}|{ready}|{begin}|{done}|{agent}"


# -- a definition as push.lua takes it ----------------------------------------------------


@dataclass
class CompiledWorkflow:
    """A validated workflow in the flat form ``push.lua`` takes.

    ``definition`` holds what every workflow pushed with the same tasks shares (stored once
    per shard under ``digest``); only ``name`` is the workflow's own.
    """

    name: str
    digest: str
    definition: list[Any]

    @property
    def tasks(self) -> int:
        """How many tasks it has."""
        return int(self.definition[1])


def compile_workflow(
    wf: Workflow, max_payload: int = DEFAULT_MAX_PAYLOAD, max_tasks: int = DEFAULT_MAX_TASKS
) -> CompiledWorkflow:
    """Validate ``wf`` and lay it out as ``push.lua`` arguments (see its header)."""
    payloads = validate(wf, max_payload, max_tasks)
    for t in wf.tasks:
        if t.map is not None:
            where = t.where or wf.where
            check_map(t.map, t.name, t.after, f"{where}: " if where else "")
    ups, rules = resolve(wf)
    index = {t.name: i for i, t in enumerate(wf.tasks)}
    children: list[list[int]] = [[] for _ in wf.tasks]
    for i, after in enumerate(ups):
        for p in after:
            children[index[p]].append(i)
    static: list[Any] = []
    if wf.retry_backoff != 1.0:
        static += [D_BACKOFF, int(wf.retry_backoff * 1000)]
    if wf.retry_backoff_max != DEFAULT_BACKOFF_MAX:
        static += [D_BACKOFF_MAX, int(wf.retry_backoff_max * 1000)]
    handlers = [str(i) for i, r in enumerate(rules) if r in HANDLER_RULES]
    if handlers:
        static += [D_HANDLERS, ",".join(handlers)]
    finals = [str(i) for i, r in enumerate(rules) if r == FINALLY]
    if finals:
        static += [D_FINALLY, ",".join(finals)]
    init: list[Any] = []
    roots: list[Any] = []
    types: list[str] = []
    ready = pack_record("ready", 0, 0)
    for i, t in enumerate(wf.tasks):
        static += [f"{i}{D_NAME}", t.name]
        if t.type:
            static += [f"{i}{D_TYPE}", t.type]
        if payloads[i]:
            static += [f"{i}{D_PAYLOAD}", payloads[i]]
        if t.priority:
            static += [f"{i}{D_PRIORITY}", t.priority]
        if t.max_attempts != 1:
            static += [f"{i}{D_ATTEMPTS}", t.max_attempts]
        if children[i]:
            static += [f"{i}{D_CHILDREN}", ",".join(map(str, children[i]))]
        if t.map is not None:
            m = t.map
            static += [f"{i}{D_MAP}", f"{index[m.over]}|{m.key or ''}"]
            if m.concurrency != DEFAULT_WINDOW:
                static += [f"{i}{D_WINDOW}", m.concurrency]
            if m.on_empty != "succeed":
                static += [f"{i}{D_ON_EMPTY}", m.on_empty]
            if m.tolerate:
                static += [f"{i}{D_TOLERATE}", m.tolerate]
            if m.max_items != DEFAULT_MAX_ITEMS:
                static += [f"{i}{D_MAX_ITEMS}", m.max_items]
        after = ups[i]
        if after:
            static += [f"{i}{D_PARENTS}", ",".join(str(index[p]) for p in after)]
            static += [f"{i}{D_PARENT_NAMES}", _encode(after)]
            # a map or a rule says so where release_children already reads
            if t.map is not None:
                static += [f"{i}{D_WAIT_FOR}", f"{len(after)}m"]
            elif rules[i] != DEFAULT_RULE:
                static += [f"{i}{D_WAIT_FOR}", f"{len(after)}r", f"{i}{D_RULE}", rules[i]]
            elif len(after) > 1:
                static += [f"{i}{D_WAIT_FOR}", len(after)]
        else:
            init += [str(i), ready]
            roots += [i, t.type, t.priority]
        if t.type not in types:
            types.append(t.type)
    digest = definition_digest(static)
    definition: list[Any] = [digest, len(wf.tasks), len(roots) // 3, *roots, len(types), *types]
    definition += [len(static) // 2, *static, len(init) // 2, *init]
    return CompiledWorkflow(wf.name, digest, definition)


def definition_digest(static: Sequence[Any]) -> str:
    """The content address of a definition's static fields (as a JSON array: unambiguous)."""
    return hashlib.blake2b(_encode(list(static)).encode(), digest_size=12).hexdigest()


# -- the claim reply row ------------------------------------------------------------------


def decode_claim_row(row: Sequence[Any]) -> Task:
    """A task as ``start_task`` in ``_lib.lua`` returns it: ``{wid, idx, name, type,
    payload, attempt, parent names JSON, {their outputs}, workflow input JSON or ""}``,
    and for an item (idx ``"c.k"``) its element JSON last. (A hot path: one per task.)"""
    wid, idx, name, typ, payload, attempt, parent_names, outputs, given, *item = row
    parents = (
        {p: _decode_value(out) for p, out in zip(_names(parent_names), outputs, strict=True)}
        if outputs
        else {}
    )
    given_value = decode_json(given) if given else None
    if type(idx) is int:
        return Task(
            str(wid), idx, name, typ, _decode_value(payload), int(attempt), parents, given_value
        )
    c, _, k = str(idx).partition(".")
    task = Task(
        str(wid), int(c), name, typ, _decode_value(payload), int(attempt), parents, given_value
    )
    if k:
        task.item_index = int(k)
        task.item = decode_json(item[0])
    return task


# Claim rows repeat the same texts (a shared definition's payloads and parents' names,
# outputs like "null"): decode each once. Only immutable values are kept, so no handler
# can change what another task is given.
_CACHE_MAX = 4096
_decoded: dict[str, Any] = {}
_IMMUTABLE = (str, int, float, bool, type(None))


def _decode_value(text: str | None) -> Any:
    if not text:
        return None
    value = _decoded.get(text, _decoded)
    if value is not _decoded:
        return value
    value = decode_json(text)
    if isinstance(value, _IMMUTABLE):
        if len(_decoded) >= _CACHE_MAX:
            _decoded.clear()
        _decoded[text] = value
    return value


@functools.lru_cache(maxsize=_CACHE_MAX)
def _names(text: str) -> tuple[str, ...]:
    return tuple(json.loads(text))


def encode_input(value: Any, max_bytes: int = DEFAULT_MAX_PAYLOAD) -> str:
    """A workflow's input as stored (JSON; "" for none), or :class:`DefinitionError`
    naming what is wrong: not JSON, too deep, not valid text, or over ``max_bytes``."""
    if value is None:
        return ""
    try:
        text = _encode_strict(value)
        size = len(text.encode())
    except UnicodeEncodeError:  # a ValueError: first
        raise DefinitionError("input: holds text that is not valid Unicode") from None
    except (TypeError, ValueError) as e:
        raise DefinitionError(f"input: not JSON-serialisable ({e})") from None
    except RecursionError:
        raise DefinitionError("input: nested too deeply") from None
    if size > max_bytes:
        raise DefinitionError(f"input is {size} bytes, over the {max_bytes}-byte limit")
    return text


# -- events -------------------------------------------------------------------------------
# A batch: {"ts": ms, "ev": [[kind, wid, task index or -1, extra], ...]}, one per script
# call, in the stream (field "e") and on the event channel.

TASK_KINDS = frozenset(
    {
        "claimed", "succeeded", "failed", "retrying", "rejected", "requeued",
        "upstream_failed", "skipped",
    }
)  # fmt: skip
BATCH_FIELD = "e"


def event_kind(kind: str, idx: int) -> str:
    """The public kind of a stored event: ``task.<kind>``, ``workflow.<kind>``, or
    ``agent.<what>`` as stored."""
    if kind.startswith(("agent.", "item.")):
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
        public = event_kind(kind, idx)
        if public.startswith("agent."):
            out.append(Event(public, "", ts, None, {"agent": extra}, entry_id))
        elif public.startswith("item."):
            out.append(Event(public, str(wid), ts, extra[0], _item_extra(kind, extra), entry_id))
        elif public.startswith("task."):
            out.append(Event(public, str(wid), ts, idx, _extra(kind, extra), entry_id))
        else:
            out.append(Event(public, str(wid), ts, None, _extra(kind, extra), entry_id))
    return out


def brief_batch(data: dict[str, Any]) -> Iterator[tuple[str, str, int]]:
    """``(public kind, workflow id or "", task index or -1)`` of each event of a decoded
    batch: cheap enough for thousands of events a second."""
    for kind, wid, idx, extra in data["ev"]:
        public = event_kind(kind, idx)
        if public.startswith("agent."):
            yield public, "", -1
        elif public.startswith("item."):
            yield public, str(wid), extra[0]
        elif public.startswith("task."):
            yield public, str(wid), idx
        else:
            yield public, str(wid), -1


def _item_extra(kind: str, extra: list[Any]) -> dict[str, Any]:
    """An item event's extra: ``[map task index, item index, what its task event has]``."""
    data: dict[str, Any] = {"item": extra[1]}
    rest = extra[2:]
    if kind == "item.claimed" and rest:
        data["agent"] = rest[0]
    elif kind == "item.failed" and rest:
        data["error"] = rest[0]
    elif kind == "item.retrying" and len(rest) == 2:
        data.update(failures=rest[0], delay_ms=rest[1])
    elif kind == "item.rejected" and len(rest) == 2:
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
    if isinstance(extra, list):  # an operator's step: {count, who}
        return {"count": extra[0], "by": extra[1]}
    return {"count": extra}


def iter_stream(entries: list[tuple[Any, dict[Any, Any]]]) -> Iterator[Event]:
    """Events of stream entries as returned by XRANGE/XREVRANGE/XREAD."""
    for entry_id, fields in entries:
        eid = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
        body = fields.get(BATCH_FIELD.encode()) or fields.get(BATCH_FIELD)
        if body is not None:
            yield from decode_batch(body, eid)


# -- status -------------------------------------------------------------------------------


def _ms(value: Any) -> float | None:
    return None if value in (None, "") else int(value) / 1000.0


def parse_summary(wid: str, row: Sequence[Any]) -> WorkflowSummary:
    """A summary from the :data:`SUMMARY_FIELDS` of a workflow hash, in that order."""
    name, st, n, ok, bad, skip, ct, ft, uf = row
    return WorkflowSummary(
        id=str(wid),
        name=name,
        state=WorkflowState(st),
        total=int(n),
        succeeded=int(ok or 0),
        failed=int(bad or 0),
        skipped=int(skip or 0),
        created_at=int(ct) / 1000.0,
        finished_at=_ms(ft),
        upstream_failed=int(uf or 0),
    )


def parse_status(wid: str, raw: dict[str, str]) -> WorkflowStatus:
    """Build a :class:`WorkflowStatus` from a workflow hash merged with its definition's."""
    summary = parse_summary(wid, [raw.get(f) for f in SUMMARY_FIELDS])
    ct = int(raw[F_CREATED])
    n = summary.total
    # One pass over the fields, into one column per task field ("3f" -> column f, row 3)
    # and each task's record ("3").
    columns: dict[str, list[str | None]] = {f: [None] * n for f in TASK_FIELDS}
    records: list[str | None] = [None] * n
    for key, value in raw.items():
        if key.isdigit():
            records[int(key)] = value
            continue
        column = columns.get(key[-1])
        if column is not None and key[0].isdigit():
            column[int(key[:-1])] = value
    names = [v if v is not None else str(i) for i, v in enumerate(columns[D_NAME])]

    def at(v: str) -> float | None:
        return (ct + int(float(v))) / 1000.0 if v else None

    def idx_list(v: str | None) -> list[str]:
        return [names[int(x)] for x in v.split(",")] if v else []

    tasks = []
    counts = {s.value: 0 for s in TaskState}
    states = {s.value: s for s in TaskState}
    rows = zip(records, *(columns[f] for f in TASK_FIELDS), strict=True)
    for i, (rec, _, typ, payload, pri, most, kids, ups, rule, f, o, e) in enumerate(rows):
        st, a, q, b, d, g = parse_record(rec)
        state = states[st]
        counts[state.value] += 1
        tasks.append(
            TaskStatus(
                index=i,
                name=names[i],
                type=typ or "",
                state=state,
                priority=int(pri or 0),
                payload=decode_json(payload),
                parents=idx_list(ups),
                children=idx_list(kids),
                attempts=int(a or 0),
                failures=int(f or 0),
                max_attempts=int(most or 1),
                agent=g or None,
                output=decode_json(o),
                error=e,
                ready_at=at(q),
                started_at=at(b),
                finished_at=at(d),
                trigger=rule or DEFAULT_RULE,
            )
        )
    return WorkflowStatus(
        **summary.__dict__, counts=counts, tasks=tasks, input=decode_json(raw.get(F_INPUT) or None)
    )
