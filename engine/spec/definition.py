"""Workflow definitions: the builder, validation, and the compact form pushed to Redis."""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.core.rules import DEFAULT_RULE, FINALLY, OUTCOMES, RULES, Plan, plan_graph
from engine.errors import DefinitionError
from engine.spec.child_specs import ChildSpec, check_references, run_of
from engine.spec.conditions import NOT_GIVEN
from engine.spec.flow import Concurrency, concurrency_from
from engine.spec.limits import DEFAULT_MAX_PAYLOAD as DEFAULT_MAX_PAYLOAD
from engine.spec.limits import DEFAULT_MAX_TASKS as DEFAULT_MAX_TASKS
from engine.spec.limits import MAX_TTL as MAX_TTL
from engine.spec.mapping import MapSpec, OutputRef, map_of
from engine.spec.rate_limits import RateLimit, rate_limit_from, rate_limits_from
from engine.spec.wait_tasks import WAIT_TYPE, WaitSpec, wait_of

DEFAULT_BACKOFF_MAX = 600.0  # seconds: retry delays double up to this
PRIORITY_RANGE = (-999, 999)
# Nesting, counted the same way in every format (JSON, YAML, a Python value): a list or
# mapping is one level, each one inside it one more.
MAX_DEPTH = 100  # levels of a value (a payload), counted from the value itself
FRAME_DEPTH = 10  # levels a workflow file may put around its values (tasks, map, steps...)
MAX_FILE_DEPTH = MAX_DEPTH + FRAME_DEPTH  # levels of a workflow file, from its top
MAX_NAME = 1000  # characters of a workflow, task or type name
MAX_ATTEMPTS = 1_000_000
MAX_BACKOFF = 366 * 86400.0  # seconds
MAX_PARENTS = 100_000  # a task's parents (its rule's counters pack three counts in one field)
_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
# Payloads are JSON for handlers in any language: no NaN or Infinity.
_encode_payload = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode
_quote: Callable[[str], str] = json.encoder.encode_basestring  # type: ignore[attr-defined, unused-ignore]
# Names end up in keys, channels, JSON and one-line messages: no control characters, line
# breaks or lone surrogates (which cannot be encoded as UTF-8).
_BAD_NAME_CHAR = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


class _ShortRepr(reprlib.Repr):
    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 256:  # repr() of a long enough int raises (the digit limit)
            return f"<an integer of {x.bit_length()} bits>"
        return super().repr_int(x, level)


_REPR = _ShortRepr()
_REPR.maxstring = _REPR.maxother = 60


def show_value(value: Any) -> str:
    """A short one-line ``repr`` of any value, however big, deep or long, for messages."""
    try:
        return one_line(_REPR.repr(value))
    except Exception:  # a user's object whose __repr__ fails
        return f"<a {type(value).__name__}>"


def one_line(text: str) -> str:
    """``text`` with control characters, line breaks and lone surrogates escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


@dataclass
class TaskDef:
    """One task of a workflow definition.

    Attributes:
        name: unique within the workflow.
        payload: any JSON value, handed to the handler.
        type: agents serve tasks by type ("" is the default type).
        priority: higher runs first among ready tasks of the same type.
        after: names of the parent tasks, which must all succeed before this one runs.
        max_attempts: how many times a failing handler is tried.
        where: where the task was defined (file and line), for error messages.
        map: run once per element of a parent's output (see :mod:`engine.spec.mapping`).
        trigger: when it runs, by how its parents ended (:data:`engine.core.rules.RULES`;
            ``None``: ``all_success``).
        on_failure: the tasks it handles: it runs after them when one of them failed
            (``after`` these, ``trigger="one_failed"``).
        finally_: it runs once its parents are done, whatever happened, and never
            changes the workflow's result; without ``after``, after every leaf task.
        timeout: seconds an attempt may run; past it the engine fails the attempt (and
            retries it per ``max_attempts``) whatever its agent does.
        delay: seconds it waits, once its parents allow it to run, before it is ready;
            a root waits that long after the workflow starts.
        before: names of tasks that run after this one: ``a`` before
            ``b`` is ``b`` after ``a``; :func:`validate` adds the edges to their ``after``.
        when: a condition (CEL over ``input``, ``parents.<name>.output`` / ``.state``,
            ``run.id``): once its rule lets it run, it runs only if this is true, else it
            is ``skipped`` (:mod:`engine.spec.conditions`).
        wait: a wait task (:mod:`engine.spec.wait_tasks`): no handler; it waits for a signal or a
            time.
        run: a child run (:mod:`engine.runtime.child_runs`): no handler; it starts a run of a
            template and ends with its result.
        rate_limit: at most so many starts per period per key (:mod:`engine.spec.rate_limits`;
            a mapping ``{key, limit, per, burst}`` is checked into a RateLimit).
    """

    name: str
    payload: Any = None
    type: str = ""
    priority: int = 0
    after: list[str] = field(default_factory=list)
    max_attempts: int = 1
    where: str | None = None
    map: MapSpec | None = None
    trigger: str | None = None
    on_failure: list[str] | None = None
    finally_: bool = False
    timeout: float | None = None
    delay: float | None = None
    before: list[str] = field(default_factory=list)
    when: str | None = None
    wait: WaitSpec | None = None
    run: ChildSpec | None = None
    rate_limit: RateLimit | None = None

    def __getitem__(self, key: str) -> OutputRef:
        """One key of this task's output, to map over: ``map=split["sections"]``."""
        return OutputRef(self.name, key)


class Workflow:
    """A workflow definition built in Python.

    Example:
        >>> wf = Workflow("TestWorkflow")
        >>> a = wf.task("TestNode1", payload="Node1")
        >>> b = wf.task("TestNode2", payload="Node2", after=[a])
    """

    def __init__(
        self,
        name: str,
        *,
        retry_backoff: float = 1.0,
        retry_backoff_max: float = DEFAULT_BACKOFF_MAX,
        where: str | None = None,
        deadline: float | None = None,
        ttl: float | None = None,
        concurrency: Concurrency | dict[str, Any] | None = None,
        input_schema: dict[str, Any] | bool | None = None,
        rate_limits: Mapping[str, RateLimit | dict[str, Any]] | None = None,
    ):
        self.name = name
        # a JSON Schema the run's input must fit (engine/spec/schemas.py)
        self.input_schema = input_schema
        self.ttl = ttl  # seconds a finished run is kept (default: the deployment's)
        # at most `limit` runs at once per value of an input field (engine/spec/flow.py)
        self.concurrency = concurrency
        # rate limits of its tasks by type, for those without their own (engine/spec/rate_limits.py)
        self.rate_limits = rate_limits
        self.retry_backoff = retry_backoff
        self.retry_backoff_max = retry_backoff_max
        self.deadline = deadline  # seconds from its start: past it the workflow fails
        self.where = where
        self.tasks: list[TaskDef] = []

    def task(
        self,
        name: str,
        payload: Any = None,
        *,
        type: str = "",
        priority: int = 0,
        after: Iterable[TaskDef | str] = (),
        before: Iterable[TaskDef | str] = (),
        max_attempts: int = 1,
        where: str | None = None,
        map: TaskDef | OutputRef | MapSpec | str | None = None,
        concurrency: int | None = None,
        max_items: int | None = None,
        on_empty: str | None = None,
        tolerate: int | str | None = None,
        steps: Workflow | Iterable[TaskDef] | None = None,
        timeout: float | None = None,
        delay: float | None = None,
        trigger: str | None = None,
        on_failure: Iterable[TaskDef | str] | None = None,
        finally_: bool = False,
        when: str | None = None,
        wait: WaitSpec | dict[str, Any] | None = None,
        run: ChildSpec | dict[str, Any] | str | None = None,
        rate_limit: RateLimit | dict[str, Any] | None = None,
    ) -> TaskDef:
        """Add a task and return it; pass it (or its name) in another task's ``after``.

        ``before`` names tasks that run after this one (defined before or after it):
        ``wf.task("fetch", before=["parse"])`` is ``parse`` after ``fetch``.

        With ``map`` (a parent, or one key of its output: ``split["sections"]``) the task
        runs once per element; ``concurrency``, ``max_items``, ``on_empty`` and
        ``tolerate`` tune it (see :mod:`engine.spec.mapping`). The mapped parent is added to
        ``after`` if missing. With ``steps`` (a :class:`Workflow` or its tasks) each item
        runs those steps as a small workflow of its own instead of this task's handler.
        ``timeout`` (seconds) bounds each attempt, enforced by the engine; ``delay``
        (seconds) holds it that long once it could run.

        ``trigger`` says when it runs by how its parents ended (``all_success`` by
        default; see :mod:`engine.core.rules`). ``on_failure=[a, b]`` makes it the failure
        branch of ``a`` and ``b``: it runs after them when one of them failed, and is
        skipped when none did. ``finally_=True`` runs it once its parents are done
        whatever happened (after every leaf task when it has no ``after``); it never
        changes the workflow's result. ``when`` (a CEL expression) is the condition it
        runs on once its rule lets it: false skips it (see :mod:`engine.spec.conditions`).

        ``wait`` makes it a wait task (:mod:`engine.spec.wait_tasks`), run by the engine with no
        handler: ``{"signal": "approve", "timeout": "2d"}``, ``{"sleep": "2h"}``,
        ``{"until": "2026-12-01T06:00Z"}``. ``run`` makes it start a child run of a
        template (:mod:`engine.runtime.child_runs`): ``"enrich"`` or ``{"template": "enrich",
        "input": {"id": "$input.id", "rows": "$fetch.rows"}}``.

        ``rate_limit`` (``{key, limit, per, burst}``) caps how fast its attempts start
        per key (:mod:`engine.spec.rate_limits`).
        """
        parents = _task_names(after, "after", name, where)
        children = _task_names(before, "before", name, where)
        spec = None
        if map is not None:
            spec = map_of(map, name)
            for option, value in (
                ("concurrency", concurrency),
                ("max_items", max_items),
                ("on_empty", on_empty),
                ("tolerate", tolerate),
            ):
                if value is not None:
                    setattr(spec, option, value)
            if spec.over not in parents:
                parents.append(spec.over)
            if steps is not None:
                spec.steps = list(steps.tasks if isinstance(steps, Workflow) else steps)
        elif steps is not None:
            raise _fail(where, f"task {show_value(name)}: steps need map= (what each item is)")
        handles = None if on_failure is None else _task_names(on_failure, "on_failure", name, where)
        t = TaskDef(
            name, payload, type, priority, parents, max_attempts, where, spec,
            trigger, handles, finally_, timeout, delay, children, when,
        )  # fmt: skip
        if wait is not None:
            t.wait = wait_of(wait, _at(where) + f"task {show_value(name)}")
        if run is not None:
            t.run = run_of(run, _at(where) + f"task {show_value(name)}")
        if rate_limit is not None:
            t.rate_limit = rate_limit  # type: ignore[assignment]  # validate() checks it
        self.tasks.append(t)
        return t

    def __len__(self) -> int:
        return len(self.tasks)

    def __repr__(self) -> str:
        return f"Workflow({self.name!r}, {len(self.tasks)} tasks)"


def _at(where: str | None) -> str:
    return f"{where}: " if where else ""


def _fail(where: str | None, message: str) -> DefinitionError:
    return DefinitionError(one_line(f"{_at(where)}{message}"))


def _task_names(value: Any, what: str, task: str, where: str | None) -> list[str]:
    """The names in ``value`` (a task, a name, or a list of them) for a task's ``what``
    (``after``, ``before``, ``on_failure``); else :class:`DefinitionError`."""
    if isinstance(value, TaskDef | str):
        value = [value]
    try:
        return [v.name if isinstance(v, TaskDef) else v for v in value]
    except TypeError:
        raise _fail(
            where,
            f"task {show_value(task)}: {what} must be a list of tasks, not {show_value(value)}",
        ) from None


def check_name(value: Any, what: str, where: str | None, empty: bool = False) -> str:
    """``value`` if it is a usable name (``what`` says whose); else raise
    :class:`DefinitionError`. ``empty``: the empty string is allowed (the default type)."""
    if not isinstance(value, str):
        raise _fail(where, f"{what} must be a string, not {show_value(value)} (quote it)")
    if not value.strip() and not (empty and value == ""):
        raise _fail(where, f"{what} is empty" if not value else f"{what} is only blanks")
    if len(value) > MAX_NAME:
        raise _fail(where, f"{what} is {len(value)} characters long; at most {MAX_NAME}")
    bad = _BAD_NAME_CHAR.search(value)
    if bad:
        raise _fail(
            where,
            f"{what} {show_value(value)} holds {show_value(bad.group())} at {bad.start()}: "
            "no control characters, line breaks or lone surrogates",
        )
    return value


def depth_past(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and mappings more than ``limit`` levels deep (a
    scalar: 0 levels), found without recursion and stopping as soon as it does."""
    if not isinstance(value, list | dict):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        items = value.values() if isinstance(value, dict) else value
        stack.extend((v, depth + 1) for v in items if isinstance(v, list | dict))
    return False


def _payload_problem(payload: Any, max_nodes: int) -> str | None:
    """Why a payload cannot be JSON within limits, found without recursion: too deep,
    or more values than ``max_nodes`` (a value takes at least one byte of JSON, and shared
    references in Python could otherwise expand without end)."""
    if not isinstance(payload, list | dict):
        return None
    stack: list[tuple[Any, int]] = [(payload, 1)]
    nodes = 0
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"is nested more than {MAX_DEPTH} levels deep (or contains itself)"
        items = value.values() if isinstance(value, dict) else value
        nodes += len(items)
        if nodes > max_nodes:
            return f"has more than {max_nodes} values, over the {max_nodes}-byte limit"
        stack.extend((v, depth + 1) for v in items if isinstance(v, list | dict))
    return None


def _encoded_payload(t: TaskDef, here: str | None, max_payload: int) -> str:
    problem = _payload_problem(t.payload, max_payload)
    if problem:
        raise _fail(here, f"task {t.name!r}: payload {problem}")
    try:
        payload = t.payload
        if type(payload) is str:  # the common cases, without the encoder's set-up per call
            text = _quote(payload)
        elif type(payload) is int:
            text = str(payload)
        else:
            text = _encode_payload(payload)
        size = len(text.encode())
    except UnicodeEncodeError:
        raise _fail(
            here, f"task {t.name!r}: payload holds a lone surrogate (not Unicode)"
        ) from None
    except (TypeError, ValueError, RecursionError) as e:
        raise _fail(
            here, f"task {t.name!r}: payload is not JSON-serialisable ({show_value(str(e))})"
        ) from None
    if size > max_payload:
        raise _fail(
            here, f"task {t.name!r}: payload is {size} bytes, over the {max_payload}-byte limit"
        )
    return text


def validate(
    wf: Workflow, max_payload: int = DEFAULT_MAX_PAYLOAD, max_tasks: int = DEFAULT_MAX_TASKS
) -> list[str]:
    """Check a definition; raise :class:`DefinitionError` naming what and where.

    One function per concern, in this order: the workflow's own fields, then each task in
    turn (its name and type, priority, attempts, timeout and delay, kind, rate limit,
    parents, payload, rule), then the graph (parents known, no cycle), conditions and
    child runs' input references.

    Args:
        wf: the workflow.
        max_payload: the largest payload, in bytes of JSON.
        max_tasks: the most tasks a workflow may have.

    Returns the JSON text of every task's payload (``""`` for no payload), in task order.
    """
    where = wf.where if isinstance(wf.where, str) else None
    name = _check_workflow(wf, where, max_tasks)
    _add_before_edges(wf.tasks, where, name)
    seen: dict[str, TaskDef] = {}
    types: set[str] = set()
    payloads: list[str] = []
    for t in wf.tasks:
        if not isinstance(t, TaskDef):
            raise _fail(where, f"workflow {name!r}: not a task: {show_value(t)}")
        here = t.where if isinstance(t.where, str) else where
        _check_task_name(t, here, name, seen, types)
        _check_priority(t, here)
        _check_attempts(t, here)
        _check_times(t, here)
        _check_kind(t, here)
        _check_task_rate_limit(t, here)
        _check_after(t, here)
        payloads.append("" if t.payload is None else _encoded_payload(t, here, max_payload))
        if t.trigger is not None or t.on_failure is not None or t.finally_ is not False:
            _check_rule(t, here)
    parents, rules = resolve(wf)
    if any(getattr(t, "when", None) is not None for t in wf.tasks):
        from engine.spec.conditions import check_conditions

        check_conditions(wf.tasks, parents, where)
    _check_graph(wf, parents, rules, seen, where, name)
    if any(t.run is not None for t in wf.tasks):
        _check_run_references(wf, parents, where)
    return payloads


def _seconds(value: Any, low: float, high: float) -> bool:
    """Whether ``value`` is a number of seconds (no bool) in ``(low, high]``."""
    return (
        not isinstance(value, bool) and isinstance(value, int | float) and low < value <= high
    )


def _check_workflow(wf: Workflow, where: str | None, max_tasks: int) -> str:
    """The workflow's own fields: name, tasks (some, not too many), retry backoff,
    deadline, ttl, concurrency and rate limits (these two normalized in place). Returns
    its name."""
    if isinstance(wf.name, str) and not wf.name.strip():
        raise _fail(where, "the workflow has no name")
    name = check_name(wf.name, "workflow name", where)
    if not isinstance(wf.tasks, list) or not wf.tasks:
        raise _fail(where, f"workflow {name!r} has no tasks")
    if len(wf.tasks) > max_tasks:
        raise _fail(where, f"workflow {name!r} has {len(wf.tasks)} tasks; at most {max_tasks}")
    for what, value in (
        ("retry_backoff", wf.retry_backoff),
        ("retry_backoff_max", wf.retry_backoff_max),
    ):
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 <= value <= MAX_BACKOFF
        ):
            raise _fail(
                where,
                f"workflow {name!r}: {what} must be a number of seconds from 0 to "
                f"{MAX_BACKOFF:.0f}, not {show_value(value)}",
            )
    deadline = getattr(wf, "deadline", None)
    if deadline is not None and not _seconds(deadline, 0, MAX_TIMEOUT):
        raise _fail(
            where,
            f"workflow {name!r}: deadline must be a number of seconds above 0 and at most "
            f"{MAX_TIMEOUT:.0f}, not {show_value(deadline)}",
        )
    ttl = getattr(wf, "ttl", None)
    if ttl is not None and not _seconds(ttl, 0, MAX_TTL):
        raise _fail(
            where,
            f"workflow {name!r}: ttl must be a number of seconds above 0 and at most "
            f"{MAX_TTL:.0f}, not {show_value(ttl)}",
        )
    wf.concurrency = concurrency_from(
        getattr(wf, "concurrency", None), f"{_at(where)}workflow {name!r}"
    )
    wf.rate_limits = rate_limits_from(
        getattr(wf, "rate_limits", None), f"{_at(where)}workflow {name!r}"
    )
    return name


def _check_task_name(
    t: TaskDef, here: str | None, workflow: str, seen: dict[str, TaskDef], types: set[str]
) -> None:
    """A task's name (given, valid, not taken: ``seen`` gets it) and type (valid; each
    type checked once, ``types`` remembers it)."""
    if isinstance(t.name, str) and t.name == "":
        raise _fail(here, f"a task of workflow {workflow!r} has no name")
    check_name(t.name, "task name", here)
    if t.name in seen:
        first = seen[t.name].where
        also = f" (first defined at {first})" if first else ""
        raise _fail(here, f"duplicate task name {t.name!r}{also}")
    seen[t.name] = t
    if type(t.type) is not str or t.type not in types:
        types.add(check_name(t.type, f"task {t.name!r}: type", here, empty=True))


def _check_priority(t: TaskDef, here: str | None) -> None:
    """An integer within :data:`PRIORITY_RANGE`."""
    lo, hi = PRIORITY_RANGE
    if isinstance(t.priority, bool) or not isinstance(t.priority, int):
        raise _fail(
            here, f"task {t.name!r}: priority must be an integer, not {show_value(t.priority)}"
        )
    if not lo <= t.priority <= hi:
        raise _fail(
            here, f"task {t.name!r}: priority {show_value(t.priority)} is outside {lo}..{hi}"
        )


def _check_attempts(t: TaskDef, here: str | None) -> None:
    """``max_attempts``: an integer from 1 to :data:`MAX_ATTEMPTS`."""
    if isinstance(t.max_attempts, bool) or not isinstance(t.max_attempts, int):
        raise _fail(here, f"task {t.name!r}: max_attempts must be an integer")
    if t.max_attempts < 1:
        raise _fail(here, f"task {t.name!r}: max_attempts must be at least 1")
    if t.max_attempts > MAX_ATTEMPTS:
        raise _fail(here, f"task {t.name!r}: max_attempts must be at most {MAX_ATTEMPTS}")


def _check_times(t: TaskDef, here: str | None) -> None:
    """``timeout`` above 0, ``delay`` from 0, both at most :data:`MAX_TIMEOUT`."""
    for what, secs, low in (("timeout", t.timeout, 0), ("delay", t.delay, -1)):
        if secs is not None and not _seconds(secs, low, MAX_TIMEOUT):
            above = "above 0" if low == 0 else "from 0"
            raise _fail(
                here,
                f"task {t.name!r}: {what} must be a number of seconds {above} and at most "
                f"{MAX_TIMEOUT:.0f}, not {show_value(secs)}",
            )


def _check_kind(t: TaskDef, here: str | None) -> None:
    """A wait task or a child run (:func:`_check_wait`); any other keeps off the
    engine's own types (``~...``)."""
    if t.wait is not None or t.run is not None:
        _check_wait(t, here)
    elif type(t.type) is str and t.type.startswith("~"):
        raise _fail(
            here, f"task {t.name!r}: type {t.type!r}: names starting with ~ are the engine's"
        )


def _check_task_rate_limit(t: TaskDef, here: str | None) -> None:
    """A task's rate limit (normalized in place): not on a map or a wait task; and a
    map takes no delay (its items start at once)."""
    if getattr(t, "rate_limit", None) is not None:
        t.rate_limit = rate_limit_from(t.rate_limit, f"{_at(here)}task {t.name!r}")
        if t.map is not None or t.wait is not None or t.run is not None:
            what = "a map" if t.map is not None else "a wait task (no agent starts it)"
            raise _fail(here, f"task {t.name!r}: {what} cannot have a rate limit")
    if t.delay and t.map is not None:
        raise _fail(here, f"task {t.name!r}: a map cannot have a delay (its items start at once)")


def _check_after(t: TaskDef, here: str | None) -> None:
    """``after``: a list of task names (which tasks they are is the graph's concern)."""
    if not isinstance(t.after, list):
        raise _fail(here, f"task {t.name!r}: after must be a list of task names")
    for p in t.after:
        if not isinstance(p, str):
            raise _fail(here, f"task {t.name!r}: a parent must be a task name, not {show_value(p)}")


def _check_graph(
    wf: Workflow,
    parents: list[list[str]],
    rules: list[str],
    names: dict[str, TaskDef],
    where: str | None,
    name: str,
) -> None:
    """The edges: every parent a known task other than itself, listed once, at most
    :data:`MAX_PARENTS`; none after a finally task without ``after`` (that one runs
    last); a trigger rule only with parents; no cycle."""
    last = {t.name for t, r in zip(wf.tasks, rules, strict=True) if r == FINALLY and not t.after}
    children: dict[str, list[str]] = {n: [] for n in names}
    # When every parent is defined before its child (the usual way to write a DAG) the
    # definition order is a topological order and no cycle can exist.
    earlier: set[str] = set()
    ordered = True
    for t, ups in zip(wf.tasks, parents, strict=True):
        here = t.where if isinstance(t.where, str) else where
        if t.name in last:
            continue  # after known tasks that nothing else runs after: no cycle through it
        for p in ups:
            if p == t.name:
                raise _fail(here, f"task {t.name!r} depends on itself")
            if p not in names:
                how = "on_failure names" if t.on_failure is not None else "depends on"
                raise _fail(here, f"task {t.name!r} {how} unknown task {show_value(p)}")
            if p in last:
                raise _fail(
                    here,
                    f"task {t.name!r} runs after {p!r}, a finally task without 'after': "
                    "that one runs last (give it 'after' to run it earlier)",
                )
            children[p].append(t.name)
            ordered = ordered and p in earlier
        if len(set(ups)) != len(ups):
            raise _fail(here, f"task {t.name!r} lists a parent twice")
        if len(ups) > MAX_PARENTS:
            raise _fail(here, f"task {t.name!r} has {len(ups)} parents; at most {MAX_PARENTS}")
        if not ups and t.trigger not in (None, DEFAULT_RULE):
            raise _fail(here, f"task {t.name!r}: trigger {t.trigger} needs parents (after: [...])")
        earlier.add(t.name)
    cycle = None if ordered else find_cycle(children)
    if cycle:
        shown = (
            cycle if len(cycle) <= 12 else [*cycle[:6], f"... {len(cycle) - 11} more", *cycle[-5:]]
        )
        raise _fail(where, f"workflow {name!r} has a cycle: {' -> '.join(shown)}")


def _check_run_references(wf: Workflow, parents: list[list[str]], where: str | None) -> None:
    """A child run's input references name tasks upstream of it (or input, payload)."""
    ups_of = {t.name: ups for t, ups in zip(wf.tasks, parents, strict=True)}
    for t in wf.tasks:
        if t.run is not None:
            seen_up: set[str] = set()
            stack = list(ups_of[t.name])
            while stack:
                p = stack.pop()
                if p not in seen_up:
                    seen_up.add(p)
                    stack.extend(ups_of.get(p, []))
            here = t.where if isinstance(t.where, str) else where
            check_references(t.run, t.name, seen_up, here or "")


def _check_wait(t: TaskDef, here: str | None) -> None:
    """A wait task (:mod:`engine.spec.wait_tasks`) or a child run
    (:mod:`engine.runtime.child_runs`) runs no handler: no type, map, timeout or delay; a
    wait no retries of its own."""
    if t.wait is not None and t.run is not None:
        raise _fail(here, f"task {t.name!r}: wait and run are two kinds of task: give one")
    if t.run is not None:
        t.run = run_of(t.run, _at(here) + f"task {t.name!r}")
    else:
        t.wait = wait_of(t.wait, _at(here) + f"task {t.name!r}")
    for what, bad in (
        ("a type", t.type not in ("", WAIT_TYPE)),
        ("a map", t.map is not None),
        ("a timeout (give the wait one)", t.timeout is not None),
        ("a delay (use wait: sleep)", bool(t.delay)),
        ("max_attempts (retry it by hand)", t.max_attempts != 1 and t.run is None),
    ):
        if bad:
            raise _fail(here, f"task {t.name!r}: a wait task runs no handler: it takes no {what}")


def _add_before_edges(tasks: list[TaskDef], where: str | None, name: str) -> None:
    """Turn every ``before`` into the ``after`` it stands for (``a`` before ``b``: ``a``
    joins ``b``'s ``after``, once: validating again adds nothing). Refuses a ``before``
    that is not a list of names, names an unknown task or the task itself, or names one
    task twice; cycles are found with every other edge."""
    by_name: dict[str, TaskDef] = {}
    for t in tasks:
        if isinstance(t, TaskDef) and isinstance(t.name, str):
            by_name.setdefault(t.name, t)
    for t in tasks:
        if not isinstance(t, TaskDef):
            continue  # validate names it
        later = getattr(t, "before", None)
        if not later:
            continue
        here = t.where if isinstance(t.where, str) else where
        if not isinstance(later, list) or not all(isinstance(c, str) for c in later):
            raise _fail(here, f"task {show_value(t.name)}: before must be a list of task names")
        if len(set(later)) != len(later):
            raise _fail(here, f"task {show_value(t.name)} lists a task twice in before")
        for c in later:
            if c == t.name:
                raise _fail(here, f"task {show_value(t.name)} runs before itself")
            child = by_name.get(c)
            if child is None:
                raise _fail(
                    here,
                    f"task {show_value(t.name)} runs before unknown task {show_value(c)} "
                    f"(workflow {name!r})",
                )
            if not isinstance(child.after, list):
                continue  # validate names it
            if t.name not in child.after:
                child.after.append(t.name)


MAX_STEPS = 100  # steps per item of a map
MAX_TIMEOUT = 30 * 86400.0  # seconds: a task's timeout


def validate_steps(t: TaskDef, where: str | None, max_payload: int) -> list[str]:
    """Check the steps of map task ``t`` as a workflow of their own (names, types,
    payloads, ``after`` within the steps, no cycle, no map in a step); raise
    :class:`DefinitionError` naming the map. Returns the steps' payloads' JSON texts."""
    steps = t.map.steps if t.map is not None else None
    at = f"(in the steps of map task {t.name!r})"
    if not isinstance(steps, list) or not steps:
        raise _fail(where, f"task {t.name!r}: steps must be a non-empty list of tasks")
    for s in steps:
        if isinstance(s, TaskDef) and getattr(s, "rate_limit", None) is not None:
            raise _fail(s.where or where, f"step {s.name!r}: a rate limit is not supported {at}")
        if isinstance(s, TaskDef) and s.delay:
            raise _fail(s.where or where, f"step {s.name!r}: a delay is not supported {at}")
        if isinstance(s, TaskDef) and getattr(s, "when", None) is not None:
            raise _fail(s.where or where, f"step {s.name!r}: when is not supported {at}")
        if isinstance(s, TaskDef) and (s.wait is not None or s.run is not None):
            raise _fail(s.where or where, f"step {s.name!r}: a wait is not supported {at}")
        if isinstance(s, TaskDef) and (
            s.trigger not in (None, "all_success") or s.on_failure or s.finally_
        ):
            raise _fail(
                s.where or where,
                f"step {s.name!r}: trigger rules, on_failure and finally are not supported in "
                f"a map's steps {at}",
            )
        if isinstance(s, TaskDef) and s.map is not None:
            raise _fail(
                s.where or where,
                f"step {s.name!r} maps over {s.map.over!r}: a map inside a map's steps "
                f"is not supported {at}",
            )
    sub = Workflow(f"{t.name}", where=where)
    sub.tasks = steps
    try:
        return validate(sub, max_payload, MAX_STEPS)
    except DefinitionError as e:
        raise DefinitionError(f"{e} {at}") from None


def _check_rule(t: TaskDef, here: str | None) -> None:
    """Refuse a task's ``trigger``, ``on_failure`` and ``finally`` unless they make sense
    together (the names they give are checked with every parent's, once all are known)."""
    who = f"task {t.name!r}"
    if t.trigger is not None and (not isinstance(t.trigger, str) or t.trigger not in RULES):
        raise _fail(
            here, f"{who}: unknown trigger {show_value(t.trigger)} (one of: {', '.join(RULES)})"
        )
    if not isinstance(t.finally_, bool):
        raise _fail(here, f"{who}: finally must be true or false, not {show_value(t.finally_)}")
    if t.map is not None:
        raise _fail(
            here,
            f"{who}: a map runs over its parent's output, so it takes the default trigger "
            "(no trigger, on_failure or finally)",
        )
    if t.finally_ and t.trigger not in (None, "all_done"):
        raise _fail(here, f"{who}: finally runs once its parents are done (all_done), "
                    f"not {t.trigger}: give one of them")  # fmt: skip
    if t.on_failure is None:
        return
    handles = t.on_failure
    if not isinstance(handles, list) or not all(isinstance(p, str) for p in handles):
        raise _fail(here, f"{who}: on_failure must be a list of task names")
    if not handles:
        raise _fail(here, f"{who}: on_failure names no task")
    if t.trigger is not None:
        raise _fail(
            here,
            f"{who}: on_failure runs it when one of them failed (trigger one_failed): "
            f"give on_failure or trigger {t.trigger}, not both",
        )
    if t.finally_:
        raise _fail(here, f"{who}: give on_failure or finally, not both")
    if t.name in handles:
        raise _fail(here, f"{who}: on_failure names itself")
    extra = [p for p in t.after if p not in handles]
    if extra:
        raise _fail(
            here,
            f"{who}: after names {extra[0]!r}, which is not in on_failure: a failure "
            "handler runs after the tasks it handles only (list them in on_failure)",
        )


def resolve(wf: Workflow) -> tuple[list[list[str]], list[str]]:
    """Every task's parents and rule as stored, sugar expanded: ``on_failure: [a, b]`` is
    ``after: [a, b]`` with ``one_failed``; ``finally`` is the rule ``finally`` (all_done,
    outside the result). For a validated workflow (:func:`validate`).

    A ``finally`` task without ``after`` runs once every other task has ended. Its parents
    are the tasks that could end last: the leaves, and every task all of whose children
    have other parents too (such a child can be decided without it, e.g. upstream_failed
    by another parent). Any other task has a child that waits for it alone, and so on down
    to one of those: none can still be running once they have all ended.
    """
    tasks = wf.tasks
    if not any(t.trigger is not None or t.on_failure is not None or t.finally_ for t in tasks):
        return [t.after for t in tasks], [DEFAULT_RULE] * len(tasks)
    parents: list[list[str]] = []
    rules: list[str] = []
    last: list[int] = []
    for i, t in enumerate(tasks):
        if t.on_failure is not None:
            parents.append(list(t.on_failure))
            rules.append("one_failed")
        elif t.finally_:
            parents.append(t.after)
            rules.append(FINALLY)
            if not t.after:
                last.append(i)
        else:
            parents.append(t.after)
            rules.append(t.trigger or DEFAULT_RULE)
    if last:
        lasts = {tasks[i].name for i in last}
        alone: set[str] = set()  # tasks some child waits for alone
        for ups in parents:
            if len(ups) == 1:
                alone.add(ups[0])
        ends = [t.name for t in tasks if t.name not in lasts and t.name not in alone]
        for i in last:
            parents[i] = ends
    return parents, rules


def plan(
    wf: Workflow,
    assume: Mapping[str, str] | None = None,
    outputs: Mapping[str, Any] | None = None,
    input: Any = NOT_GIVEN,
) -> Plan:
    """What would happen if the tasks named in ``assume`` ended as it says
    (``succeeded``, ``failed`` or ``skipped``) and every other task that runs succeeded:
    which tasks run, which are skipped or upstream_failed, and the workflow's result.
    Conditions (``when``) are decided from the assumed ``outputs`` (by task name) and
    ``input`` where they can (:func:`engine.spec.conditions.plan_gate`).
    Nothing runs and nothing is written. Raises :class:`DefinitionError` for an invalid
    workflow, or an ``assume`` naming an unknown task or outcome."""
    validate(wf)
    parents, rules = resolve(wf)
    names = [t.name for t in wf.tasks]
    index = {n: i for i, n in enumerate(names)}
    given = dict(assume or {})
    for name, outcome in given.items():
        if name not in index:
            raise DefinitionError(one_line(f"assume: workflow {wf.name!r} has no task {name!r}"))
        if outcome not in OUTCOMES:
            raise DefinitionError(
                one_line(
                    f"assume: {name}={show_value(outcome)}: an outcome is one of "
                    f"{', '.join(OUTCOMES)}"
                )
            )
    ups = [[index[p] for p in ps] for ps in parents]
    if not any(getattr(t, "when", None) is not None for t in wf.tasks):
        return plan_graph(wf.name, names, ups, rules, given)
    from engine.spec.conditions import plan_gate

    for name in outputs or {}:
        if name not in index:
            raise DefinitionError(one_line(f"output: workflow {wf.name!r} has no task {name!r}"))
    gate, whys = plan_gate(wf.tasks, ups, rules, dict(outputs or {}), input)
    return plan_graph(wf.name, names, ups, rules, given, gate, whys)


def find_cycle(children: dict[str, list[str]]) -> list[str] | None:
    """A cycle of the graph as a closed path (``[a, b, a]``), or ``None`` for a DAG.

    Iterative depth-first search, so a chain of 100,000 tasks does not hit the recursion
    limit.
    """
    done: set[str] = set()
    for root in children:
        if root in done:
            continue
        path = [root]
        on_path = {root}
        stack = [iter(children[root])]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                node = path.pop()
                on_path.discard(node)
                done.add(node)
            elif nxt in on_path:
                return path[path.index(nxt) :] + [nxt]
            elif nxt not in done:
                path.append(nxt)
                on_path.add(nxt)
                stack.append(iter(children[nxt]))
    return None
