"""A definition laid out as ``push.lua`` takes it, and its digest.

The Lua half is ``lua/lib/definition.lua`` (reading it) and ``lua/lib/push.lua``
(storing it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from engine.core.rules import DEFAULT_RULE, FINALLY, HANDLER_RULES
from engine.spec.definition import (
    DEFAULT_BACKOFF_MAX,
    DEFAULT_MAX_PAYLOAD,
    DEFAULT_MAX_TASKS,
    Workflow,
    resolve,
    validate,
    validate_steps,
)
from engine.spec.flow import Concurrency
from engine.spec.mapping import DEFAULT_MAX_ITEMS, DEFAULT_WINDOW, check_map
from engine.spec.options import BY_NAME, TASK_OPTIONS
from engine.spec.rate_limits import RateLimit, constant_key, encode_spec
from engine.spec.schemas import compile_schema
from engine.spec.wait_tasks import WAIT_TYPE

from . import fields as field_names
from .fields import (
    D_BACKOFF,
    D_BACKOFF_MAX,
    D_CHILDREN,
    D_DELAY,
    D_FINALLY,
    D_FIRST_STEPS,
    D_GATHER,
    D_GATHERS,
    D_HANDLERS,
    D_LAST_STEPS,
    D_MAP,
    D_MAX_ITEMS,
    D_ON_EMPTY,
    D_PARENT_NAMES,
    D_PARENTS,
    D_PAYLOAD,
    D_RATE,
    D_RULE,
    D_SIGNAL_WAITERS,
    D_SIGNALS,
    D_STEPS,
    D_TIMEOUT,
    D_TOLERATE,
    D_WAIT,
    D_WAIT_FOR,
    D_WHEN,
    D_WINDOW,
    F_DEADLINE,
    F_DEPTH,
    F_GATES,
    F_PARENT,
    F_RATE_KEYS,
    F_ROOT,
    F_SCHEDULE,
    F_TEMPLATE,
    F_TEMPLATE_VERSION,
    F_TICK,
    F_TTL,
    _encode,
    step_prefix,
)
from .record import pack_record


@dataclass
class CompiledWorkflow:
    """A validated workflow in the flat form ``push.lua`` takes.

    ``definition`` holds what every workflow pushed with the same tasks shares (stored once
    per shard under ``digest``) and its tasks' payloads: those are not part of the digest
    (only which tasks have one is), so runs that differ in payloads alone share a
    definition, and a run whose payloads differ from the stored ones keeps them in its own
    hash (push.lua). ``payload_sig`` tells payloads apart without comparing them.
    """

    name: str
    digest: str
    definition: list[Any]
    # at most `limit` runs at once per value of an input field (engine/spec/flow.py)
    concurrency: Concurrency | None = None
    # the validator of its input_schema: every run's input must fit (engine/spec/schemas.py)
    input_schema: Any = None
    # the templates (and versions) its run: tasks start: checked to exist at push
    runs: list[tuple[str, int | None]] = field(default_factory=list)
    # tasks whose rate limit key is an input field: (index, name, dotted path), the keys
    # computed per run at push (engine.spec.rate_limits.rate_keys)
    rate_keys: list[tuple[int, str, str]] | None = None
    # the payloads' JSON texts joined (a JSON text holds no raw control character)
    payload_sig: str = ""
    # where the static fields are in ``definition`` (their count first): another entry
    # of the same digest in one push call leaves them out
    static_span: tuple[int, int] = (0, 0)

    @property
    def tasks(self) -> int:
        """How many tasks it has."""
        return int(self.definition[1])


# A definition with more fields than this (field and value count apart) is sent packed.
PACKED_FIELDS = 4000


def compile_workflow(
    wf: Workflow,
    max_payload: int = DEFAULT_MAX_PAYLOAD,
    max_tasks: int = DEFAULT_MAX_TASKS,
    type_limits: Mapping[str, RateLimit] | None = None,
) -> CompiledWorkflow:
    """Validate ``wf`` and lay it out as ``push.lua`` arguments (see its header).

    ``type_limits``: the deployment's rate limits by task type, for tasks that have none
    of their own nor from their workflow's ``rate_limits``."""
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
    waiters: dict[str, list[str]] = {}
    runs: list[tuple[str, int | None]] = []  # the templates its run: tasks start
    rate_keys: list[tuple[int, str, str]] = []
    own: list[Any] = []  # the tasks' payloads: per run (a map's items share its map's)
    for i, t in enumerate(wf.tasks):
        if t.map is None and payloads[i]:
            static += _task_fields(str(i), t, "", children[i])
            own += [f"{i}{D_PAYLOAD}", payloads[i]]
        else:
            static += _task_fields(str(i), t, payloads[i], children[i])
        if t.run is not None:
            static += [f"{i}{D_WAIT}", _encode(t.run.encoded())]
            runs.append((t.run.template, t.run.version))
        elif t.wait is not None:
            static += [f"{i}{D_WAIT}", t.wait.encoded()]
            if t.wait.signal is not None:
                waiters.setdefault(t.wait.signal, []).append(str(i))
        limit = _rate_limit_of(wf, t, type_limits)
        if limit is not None:
            key = constant_key(limit, t.payload, t.name, t.where or wf.where or "")
            static += [f"{i}{D_RATE}", encode_spec(limit, key)]
            if key is None:
                rate_keys.append((i, t.name, limit.key[len("input.") :]))
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
            static += [f"{i}{D_PARENT_NAMES}", _names_json(after)]
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
            roots += [i, t.type if t.wait is None and t.run is None else WAIT_TYPE, t.priority]
        if t.type not in types and t.wait is None and t.run is None:
            types.append(t.type)
    if waiters:  # which wait tasks a signal of each name reaches (signal.lua)
        static += [D_SIGNALS, _encode(list(waiters))]
        for name, at in waiters.items():
            static += [f"{D_SIGNAL_WAITERS}{name}", ",".join(at)]
    if wf.deadline is not None:  # ms after its start; push.lua arms it
        init += [F_DEADLINE, round(wf.deadline * 1000)]
    if wf.ttl is not None:  # ms it is kept once finished (workflow_ended in lib/ends.lua)
        init += [F_TTL, round(wf.ttl * 1000)]
    static_json = _encode(static)
    # which tasks have a payload is part of the definition, not what the payloads are
    digest = _digest(static_json + _encode(own[::2])) + _features(wf, static)
    definition: list[Any] = [digest, len(wf.tasks), len(roots) // 3, *roots, len(types), *types]
    static_at = len(definition)
    if len(static) + len(own) > PACKED_FIELDS:
        # one argument each, JSON arrays: packing a million arguments one by one costs
        # the client more than Redis spends storing them
        definition += [-1, static_json]
        span = (static_at, len(definition))
        definition += [-1, _encode(own)]
    else:
        definition += [len(static) // 2, *static]
        span = (static_at, len(definition))
        definition += [len(own) // 2, *own]
    definition += [len(init) // 2, *init]
    gate = wf.concurrency if isinstance(wf.concurrency, Concurrency) else None
    schema = getattr(wf, "input_schema", None)
    validator = None
    if schema is not None:
        where = f"{wf.where}: " if wf.where else ""
        validator = compile_schema(schema, f"{where}workflow {wf.name!r}")
    return CompiledWorkflow(
        wf.name, digest, definition, gate, validator, runs, rate_keys or None,
        "\x1f".join(own[1::2]), span,
    )  # fmt: skip


def _rate_limit_of(
    wf: Workflow, t: Any, type_limits: Mapping[str, RateLimit] | None
) -> RateLimit | None:
    """A task's rate limit: its own, else its workflow's for its type, else the
    deployment's for its type (not for a map, a wait task or a child run: validate
    refuses one of their own)."""
    if t.rate_limit is not None:
        return cast(RateLimit, t.rate_limit)
    if t.map is not None or t.wait is not None or t.run is not None:
        return None
    r = cast("Mapping[str, RateLimit]", wf.rate_limits or {}).get(t.type)
    if r is None and type_limits:
        r = type_limits.get(t.type)
    return r


def run_options(
    *,
    template: str | None = None,
    version: int | None = None,
    key: str | None = None,
    gates: Sequence[tuple[str, int]] = (),
    schedule: str | None = None,
    tick_ms: int | None = None,
    parent: str | None = None,
    depth: int = 0,
    root: str | None = None,
    rate_keys: dict[str, str] | None = None,
) -> str:
    """A pushed workflow's options as push.lua takes them (JSON; "" for none).
    ``rate_keys``: its tasks' rate limit keys from its input ({task index: key})."""
    o: dict[str, Any] = {}
    if template is not None:
        o[F_TEMPLATE], o[F_TEMPLATE_VERSION] = template, version or 0
    if key is not None:
        o["key"] = key
    if gates:
        o[F_GATES] = [[g, limit] for g, limit in gates]
    if schedule is not None:
        o[F_SCHEDULE], o[F_TICK] = schedule, tick_ms or 0
    if parent is not None:
        o[F_PARENT], o[F_DEPTH] = parent, depth
        if root is not None:
            o[F_ROOT] = root
    if rate_keys:
        o[F_RATE_KEYS] = rate_keys
    return json.dumps(o, separators=(",", ":")) if o else ""


def _task_fields(pre: str, t: Any, payload: str, kids: list[int]) -> list[Any]:
    """The definition fields every task (and every step of a map) has, named with
    ``pre``: those of the options stored in one field each (name, type, priority,
    attempts, timeout, delay, condition: :data:`engine.spec.options.TASK_OPTIONS`'s
    ``store``), in the table's order, with the payload's JSON after the type and the
    children after the attempts, where every definition stored so far has them (its digest
    is of that layout)."""
    out: list[Any] = []
    for option, store, name in _STORED:
        value = store(t)
        if value is not None:
            out += [f"{pre}{name}", value]
        if option is _TYPE:
            if payload:
                out += [f"{pre}{D_PAYLOAD}", payload]
        elif option is _ATTEMPTS and kids:
            out += [f"{pre}{D_CHILDREN}", ",".join(map(str, kids))]
    return out


# The options stored in one field each, with that field's name, in the table's order.
_STORED = tuple(
    (o, o.store, str(getattr(field_names, o.fields[0])))
    for o in TASK_OPTIONS if o.store is not None
)  # fmt: skip
_TYPE, _ATTEMPTS = BY_NAME["type"], BY_NAME["max_attempts"]


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
# brings parents' errors, "Y" a timeout, "H" a delay, "J" a map with the steps manager's gather,
# "F" a condition (its claim brings it and the parents' states), "L" a rate limit. A
# step reads those fields only when its definition has them (a missing field is a scan of
# the whole definition hash).
FEATURE_FIELDS = (D_GATHERS, D_TIMEOUT, D_DELAY, D_GATHER, D_WHEN, D_RATE)


def _features(wf: Workflow, static: Sequence[Any]) -> str:
    names = {f[-1] for f in static[::2] if f[:1].isdigit() or f[:1] == "s"}
    used = "".join(f for f in FEATURE_FIELDS if f in names)
    return f"+{used}" if used else ""


def definition_digest(static: Sequence[Any]) -> str:
    """The content address of a definition's static fields (as a JSON array: unambiguous)."""
    return _digest(_encode(list(static)))


_QUOTED = re.compile(r'["\\]')


def _names_json(names: list[str]) -> str:
    """``names`` as a JSON array, as ``_encode`` writes it: a name holds no control
    character (check_name), so one without a quote or a backslash is written as it is."""
    if any(_QUOTED.search(n) for n in names):
        return _encode(names)
    return '["' + '","'.join(names) + '"]'


def _digest(static_json: str) -> str:
    """96 bits of BLAKE2b in URL-safe base64: 16 characters (24 in hex), read by every
    run's hash (field ``d``), so 8 bytes of each run's memory. No character of it is a
    "+", which starts the features after it (``has_feature`` in ``lib/definition.lua``)."""
    raw = hashlib.blake2b(static_json.encode(), digest_size=12).digest()
    return base64.urlsafe_b64encode(raw).decode()
