"""Every format Python shares with the Lua scripts, defined once.

The Lua half is ``lua/_lib.lua``; ``tests/test_codec.py`` runs both sides against each
other. What lives here:

* field names of a workflow hash and of a definition hash;
* the task record, ``state|attempts|ready|begin|done|agent`` (:func:`parse_record`,
  :func:`pack_record`);
* a definition laid out as ``push.lua`` takes it (:func:`compile_workflow`);
* a workflow's input as stored, in one field, in pieces or in a key of its own
  (:func:`input_layout`, :func:`stored_input`);
* the claim reply row (:func:`decode_claim_row`);
* the event tuple ``[kind, wid, task index or -1, extra]`` and its batches
  (:func:`decode_batch`, :func:`brief_batch`);
* a workflow hash merged with its definition, as a status (:func:`parse_status`).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..definition import (
    DEFAULT_BACKOFF_MAX,
    DEFAULT_MAX_PAYLOAD,
    DEFAULT_MAX_TASKS,
    Workflow,
    resolve,
    validate,
    validate_steps,
)
from ..errors import DefinitionError
from ..flow import Concurrency
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
F_INPUT = "in"  # the workflow's input JSON, when it was given one (see input_layout)
# An input longer than one compact hash value is kept in pieces (fields in1, in2...) or,
# longer still, in a key of its own: then field `in` holds "#<pieces>" or INPUT_OWN_KEY.
INPUT_PIECE = 64  # bytes: Redis's default hash-max-listpack-value
INPUT_PIECES_MAX = 4
INPUT_OWN_KEY = "#"
LISTPACK_ENTRIES = 128  # Redis's default hash-max-listpack-entries
F_START_AT = "at"  # a scheduled workflow's start, epoch ms (P:scheduled holds it too)
F_DEADLINE = "dl"  # its deadline, ms after its start (P:deadlines holds the time)
F_DUE = "due"  # ... that time, epoch ms, once it started
F_REASON = "why"  # why it ended so, when the state alone does not say ("deadline")
F_TTL = "tl"  # ms it is kept once finished, when not the deployment's retention (-1: never)
F_TEMPLATE, F_TEMPLATE_VERSION = "tp", "tv"  # the template (and version) it runs
F_IDEM_KEY = "ik"  # its idempotency key (P:ik:<key> names it while it exists)
F_GATES = "g"  # JSON [[gate, limit], ...]: the concurrency slots it runs in
F_SCHEDULE, F_TICK = "sn", "tk"  # the schedule that started it, and the tick (ms)
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
D_TIMEOUT = "Y"  # an attempt's timeout, ms (absent: none)
D_DELAY = "H"  # how long it waits once it could run, ms (absent: none)
# A map's (engine.mapping): "<parent index>|<key>", window, on_empty, tolerate, max items.
D_MAP, D_WINDOW, D_ON_EMPTY, D_TOLERATE, D_MAX_ITEMS = "m", "X", "E", "O", "I"
# A map with seed 002's gather (MapSpec.gather): its list key (absent: the native list).
D_GATHER = "J"
# A map whose items run several steps: how many, the first steps (csv), the last steps
# (csv); each step s of map c has its own task fields (N, T, P, R, M, C, U, V, W) named
# with the prefix step_prefix(c, s), "s<c>.<s>" (parents and children: step numbers).
D_STEPS, D_FIRST_STEPS, D_LAST_STEPS = "S", "Q", "Z"
# Parents whose errors a task's claim returns (csv): a gather's maps that tolerate failed
# items ("<p>m"), the parents of a failure branch (one_failed, all_failed).
D_GATHERS = "K"
# A map's runtime fields in the workflow hash: elements stored, items in all (once
# expanded), started, in flight, succeeded, failed, cancelled.
M_STORED, M_TOTAL, M_STARTED, M_FLYING, M_OK, M_BAD, M_CANCELLED = "h", "n", "x", "y", "k", "z", "c"
# ... and, once it succeeded with failed items tolerated, their errors by index (JSON).
M_ERRORS = "q"
# ... and for a map with seed 002's gather, what its items are given as their parent's
# output: the map's parent's output less the list (written by expand.lua).
M_GIVEN = "j"
# An item k's fields in its map's hash (P:w:<wid>:m:<c>): its record is the field named k;
# output, error, failures and leases lost take the task suffixes; then its element JSON.
# A step s of item k: the same fields, named "k.s" (step_field); the item's sinks
# succeeded so far (I_STEPS_DONE) when it has several.
I_ELEMENT, I_STEPS_DONE = "p", "d"


def step_prefix(c: int | str, s: int | str) -> str:
    """The definition fields' prefix of step ``s`` of map ``c`` (``step_def`` in Lua)."""
    return f"s{c}.{s}"


def step_field(k: int | str, s: int | str) -> str:
    """The record field of step ``s`` of item ``k`` in its map's hash."""
    return f"{k}.{s}"


# Per-task fields status() reads, definition's first.
TASK_FIELDS = (
    D_NAME, D_TYPE, D_PAYLOAD, D_PRIORITY, D_ATTEMPTS, D_CHILDREN, D_PARENTS, D_RULE,
    D_TIMEOUT, D_DELAY, T_FAILURES, T_OUTPUT, T_ERROR,
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
    """The record field of a task (``trec`` in ``lib/record.lua``); the agent comes last, so its
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
    # at most `limit` runs at once per value of an input field (engine/flow.py)
    concurrency: Concurrency | None = None

    @property
    def tasks(self) -> int:
        """How many tasks it has."""
        return int(self.definition[1])


def compile_workflow(
    wf: Workflow, max_payload: int = DEFAULT_MAX_PAYLOAD, max_tasks: int = DEFAULT_MAX_TASKS
) -> CompiledWorkflow:
    """Validate ``wf`` and lay it out as ``push.lua`` arguments (see its header)."""
    payloads = validate(wf, max_payload, max_tasks)
    step_payloads: dict[str, list[str]] = {}
    for t in wf.tasks:
        if t.map is not None:
            where = t.where or wf.where
            check_map(t.map, t.name, t.after, f"{where}: " if where else "")
            if t.map.steps is not None:
                step_payloads[t.name] = validate_steps(t, where, max_payload)
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
        static += _task_fields(str(i), t, payloads[i], children[i])
        delay = round((t.delay or 0) * 1000)
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
            if m.gather is not None:
                static += [f"{i}{D_GATHER}", m.gather]
            if m.steps is not None:
                static += _compile_steps(i, m.steps, step_payloads[t.name], types)
        after = ups[i]
        gathered = [
            f"{index[p]}m"
            for p in after
            if (pm := wf.tasks[index[p]].map) is not None and pm.tolerate
        ]
        if rules[i] in HANDLER_RULES:  # a failure branch gets its parents' errors
            gathered += [str(index[p]) for p in after if wf.tasks[index[p]].map is None]
        if gathered:
            static += [f"{i}{D_GATHERS}", ",".join(gathered)]
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
        elif delay:  # held in P:delayed from the workflow's start
            init += [str(i), pack_record("ready", 0, delay)]
            roots += [f"{i}@{delay}", t.type, t.priority]
        else:
            init += [str(i), ready]
            roots += [i, t.type, t.priority]
        if t.type not in types:
            types.append(t.type)
    if wf.deadline is not None:  # ms after its start; push.lua arms it
        init += [F_DEADLINE, round(wf.deadline * 1000)]
    if wf.ttl is not None:  # ms it is kept once finished (workflow_ended in lib/ends.lua)
        init += [F_TTL, round(wf.ttl * 1000)]
    digest = definition_digest(static) + _features(wf, static)
    definition: list[Any] = [digest, len(wf.tasks), len(roots) // 3, *roots, len(types), *types]
    definition += [len(static) // 2, *static, len(init) // 2, *init]
    gate = wf.concurrency if isinstance(wf.concurrency, Concurrency) else None
    return CompiledWorkflow(wf.name, digest, definition, gate)


def run_options(
    *,
    template: str | None = None,
    version: int | None = None,
    key: str | None = None,
    gates: Sequence[tuple[str, int]] = (),
    schedule: str | None = None,
    tick_ms: int | None = None,
) -> str:
    """A pushed workflow's options as push.lua takes them (JSON; "" for none)."""
    o: dict[str, Any] = {}
    if template is not None:
        o[F_TEMPLATE], o[F_TEMPLATE_VERSION] = template, version or 0
    if key is not None:
        o["key"] = key
    if gates:
        o[F_GATES] = [[g, limit] for g, limit in gates]
    if schedule is not None:
        o[F_SCHEDULE], o[F_TICK] = schedule, tick_ms or 0
    return json.dumps(o, separators=(",", ":")) if o else ""


def _task_fields(pre: str, t: Any, payload: str, kids: list[int]) -> list[Any]:
    """The definition fields every task (and every step of a map) has, named with
    ``pre``: name, type, payload, priority, attempts, children, timeout, delay."""
    out: list[Any] = [f"{pre}{D_NAME}", t.name]
    if t.type:
        out += [f"{pre}{D_TYPE}", t.type]
    if payload:
        out += [f"{pre}{D_PAYLOAD}", payload]
    if t.priority:
        out += [f"{pre}{D_PRIORITY}", t.priority]
    if t.max_attempts != 1:
        out += [f"{pre}{D_ATTEMPTS}", t.max_attempts]
    if kids:
        out += [f"{pre}{D_CHILDREN}", ",".join(map(str, kids))]
    if t.timeout is not None:
        out += [f"{pre}{D_TIMEOUT}", round(t.timeout * 1000)]
    delay = round((t.delay or 0) * 1000)
    if delay:
        out += [f"{pre}{D_DELAY}", delay]
    return out


def _compile_steps(c: int, steps: list[Any], payloads: list[str], types: list[str]) -> list[Any]:
    """The definition fields of map ``c``'s steps (see D_STEPS); their types join
    ``types``."""
    at = {s.name: j for j, s in enumerate(steps)}
    kids: list[list[int]] = [[] for _ in steps]
    for j, s in enumerate(steps):
        for p in s.after:
            kids[at[p]].append(j)
    first = [str(j) for j, s in enumerate(steps) if not s.after]
    last = [str(j) for j in range(len(steps)) if not kids[j]]
    out: list[Any] = [
        f"{c}{D_STEPS}", len(steps), f"{c}{D_FIRST_STEPS}", ",".join(first),
        f"{c}{D_LAST_STEPS}", ",".join(last),
    ]  # fmt: skip
    for j, s in enumerate(steps):
        pre = step_prefix(c, j)
        out += _task_fields(pre, s, payloads[j], kids[j])
        if s.after:
            out += [f"{pre}{D_PARENTS}", ",".join(str(at[p]) for p in s.after)]
            out += [f"{pre}{D_PARENT_NAMES}", _encode(s.after)]
            if len(s.after) > 1:
                out += [f"{pre}{D_WAIT_FOR}", len(s.after)]
        if s.type not in types:
            types.append(s.type)
    return out


# What a definition uses beyond the plain path, as letters after a "+" at the end of its
# digest (so of its key's name, which every step has in hand): "K" a task whose claim
# brings parents' errors, "Y" a timeout, "H" a delay, "J" a map with seed 002's gather. A
# step reads those fields only when its definition has them (a missing field is a scan of
# the whole definition hash).
FEATURE_FIELDS = (D_GATHERS, D_TIMEOUT, D_DELAY, D_GATHER)


def _features(wf: Workflow, static: Sequence[Any]) -> str:
    names = {str(f)[-1] for f in static[::2] if str(f)[:1].isdigit() or str(f)[:1] == "s"}
    used = "".join(f for f in FEATURE_FIELDS if f in names)
    return f"+{used}" if used else ""


def definition_digest(static: Sequence[Any]) -> str:
    """The content address of a definition's static fields (as a JSON array: unambiguous)."""
    return hashlib.blake2b(_encode(list(static)).encode(), digest_size=12).hexdigest()


# -- the claim reply row ------------------------------------------------------------------


def decode_claim_row(row: Sequence[Any]) -> Task:
    """A task as ``start_task`` in ``lib/claim_row.lua`` returns it: ``{wid, idx, name, type,
    payload, attempt, parent names JSON, {their outputs}, workflow input JSON or ""}``,
    then for an item (idx ``"c.k"``, or ``"c.k.s"`` for its step s) its element JSON
    ("" for a plain task), then, when there are any, extras as a JSON object: the
    attempt's ``timeout`` ms, a gather's ``errors`` of tolerated items. (A hot path: one
    per task.)"""
    wid, idx, name, typ, payload, attempt, parent_names, outputs, given, *rest = row
    parents = (
        {p: _decode_value(out) for p, out in zip(_names(parent_names), outputs, strict=True)}
        if outputs
        else {}
    )
    given_value = decode_json(given) if given else None
    if type(idx) is int:
        task = Task(
            str(wid), idx, name, typ, _decode_value(payload), int(attempt), parents, given_value
        )
    else:
        c, _, k = str(idx).partition(".")
        task = Task(
            str(wid), int(c), name, typ, _decode_value(payload), int(attempt), parents, given_value
        )
        k, _, s = k.partition(".")
        task.item_index = int(k)
        task.item = decode_json(rest[0])
        if s:
            task.step = int(s)
    if len(rest) > 1:  # extras: the attempt's timeout, a gather's errors of tolerated items
        extras = decode_json(rest[1])
        if "timeout" in extras:
            task.timeout = extras["timeout"] / 1000
        if "errors" in extras:
            task._errors = {
                p: {int(k): e for k, e in errs.items()} if isinstance(errs, dict) else errs
                for p, errs in extras["errors"].items()
            }
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


def input_layout(text: str, tasks: int) -> tuple[str, list[str], str | None]:
    """How ``push.lua`` stores input JSON ``text`` of a workflow of ``tasks`` tasks
    (``input_layout`` in ``lib/input.lua``): the value of field ``in``, the pieces (fields
    ``in1``, ``in2``...) and the value of the input's own key (None: none).

    Up to :data:`INPUT_PIECE` bytes the JSON is ``in`` itself. Longer, it is cut into
    pieces of at most that many bytes, each ending before a UTF-8 continuation byte (so
    each piece is text of its own), ``in`` saying how many: ``"#<n>"``, which no JSON
    can be. A longer value would turn the whole workflow hash from a compact listpack
    into a hashtable, several times bigger. Past :data:`INPUT_PIECES_MAX` pieces, or
    when the pieces would take a workflow's hash past :data:`LISTPACK_ENTRIES` fields
    once it has run (11 of its own, a record and an output per task), the JSON goes to
    a key of its own (``ShardKeys.workflow_input``) and ``in`` is :data:`INPUT_OWN_KEY`.
    """
    data = text.encode()
    size = len(data)
    if size <= INPUT_PIECE:
        return text, [], None
    if size > INPUT_PIECE * INPUT_PIECES_MAX:
        return INPUT_OWN_KEY, [], text
    pieces: list[str] = []
    start = 0
    while start < size:
        end = start + INPUT_PIECE
        back = 0
        while end < size and back < 3 and data[end] & 0xC0 == 0x80:
            end -= 1
            back += 1
        pieces.append(data[start:end].decode())
        start = end
    if len(pieces) > INPUT_PIECES_MAX or 11 + 2 * tasks + len(pieces) > LISTPACK_ENTRIES:
        return INPUT_OWN_KEY, [], text
    return f"#{len(pieces)}", pieces, None


def stored_input(raw: Mapping[str, str], own: str | None = None) -> str:
    """The input JSON ("" for none) of a workflow hash's fields ``raw``, its pieces
    joined (``read_input`` in ``lib/input.lua``); ``own`` is the value of the input's own key,
    read when field ``in`` is :data:`INPUT_OWN_KEY` (see :func:`input_layout`)."""
    head = raw.get(F_INPUT) or ""
    if not head.startswith("#"):
        return head
    if head == INPUT_OWN_KEY:
        return own or ""
    return "".join(raw[f"{F_INPUT}{k}"] for k in range(1, int(head[1:]) + 1))


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


def parse_status(wid: str, raw: dict[str, str], own_input: str | None = None) -> WorkflowStatus:
    """Build a :class:`WorkflowStatus` from a workflow hash merged with its definition's
    (and its input's own key, when it has one: see :func:`input_layout`)."""
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
    for i, (rec, _, typ, payload, pri, most, kids, ups, rule, limit, delay, f, o, e) in enumerate(
        rows
    ):
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
                timeout=int(limit) / 1000 if limit else None,
                delay=int(delay) / 1000 if delay else None,
            )
        )
    start = raw.get(F_START_AT)
    return WorkflowStatus(
        **summary.__dict__,
        counts=counts,
        tasks=tasks,
        input=decode_json(stored_input(raw, own_input) or None),
        start_at=int(start) / 1000.0 if start else None,
        reason=raw.get(F_REASON),
        deadline=int(due) / 1000.0 if (due := raw.get(F_DUE)) else None,
    )
