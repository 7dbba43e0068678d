"""Workflow definitions: the builder, validation, and the compact form pushed to Redis."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
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
from engine.spec.messages import at as _at
from engine.spec.messages import fail as _fail
from engine.spec.messages import one_line as one_line
from engine.spec.messages import show_value as show_value
from engine.spec.options import MAX_ATTEMPTS as MAX_ATTEMPTS
from engine.spec.options import MAX_TIMEOUT as MAX_TIMEOUT
from engine.spec.options import PRIORITY_RANGE as PRIORITY_RANGE
from engine.spec.options import TASK_CHECKS, TASK_OPTIONS, Form, is_seconds
from engine.spec.options import TaskDef as TaskDef
from engine.spec.rate_limits import RateLimit, rate_limits_from
from engine.spec.wait_tasks import WaitSpec, wait_of

DEFAULT_BACKOFF_MAX = 600.0  # seconds: retry delays double up to this
# Nesting, counted the same way in every format (JSON, YAML, a Python value): a list or
# mapping is one level, each one inside it one more.
MAX_DEPTH = 100  # levels of a value (a payload), counted from the value itself
FRAME_DEPTH = 10  # levels a workflow file may put around its values (tasks, map, steps...)
MAX_FILE_DEPTH = MAX_DEPTH + FRAME_DEPTH  # levels of a workflow file, from its top
MAX_NAME = 1000  # characters of a workflow, task or type name
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
_BAD = r"\u0000-\u001f\u007f-\u009f\u2028\u2029"
_BAD_NAME_CHAR = re.compile(f"[{_BAD}\\ud800-\\udfff]")
# a name check_name takes, as a regex (the HTTP API's schema for one): not blank, and no
# control characters or line breaks (its length is maxLength's; lone surrogates, which
# no regex engine of JSON Schema's can name and JSON's UTF-8 cannot carry, are refused
# too)
NAME_PATTERN = f"^[^{_BAD}]*[^{_BAD}\\s][^{_BAD}]*$"


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

        The keywords are the options of :data:`engine.spec.options.TASK_OPTIONS`, each
        with the type and default it declares (``tests/test_task_options.py``).
        """
        # every argument, by its option's name: nothing else is local yet
        t = task_of(locals())
        self.tasks.append(t)
        return t

    def __len__(self) -> int:
        return len(self.tasks)

    def __repr__(self) -> str:
        return f"Workflow({self.name!r}, {len(self.tasks)} tasks)"


def task_of(given: Mapping[str, Any]) -> TaskDef:
    """A task from :meth:`Workflow.task`'s arguments (``given``: by option name), each
    taken as its option's form says (:data:`engine.spec.options.TASK_OPTIONS`)."""
    name, where = given["name"], given["where"]
    attrs = {n: given[n] for n in _AS_GIVEN}
    for n, form, optional in _READ:
        value = given[n]
        if form is Form.NAMES:
            if value is not None or not optional:
                value = _task_names(value, n, name, where)
        elif value is None:
            pass
        elif form is Form.MAP:
            value = map_of(value, name)
        elif form is Form.WAIT:
            value = wait_of(value, _at(where) + f"task {show_value(name)}")
        elif form is Form.RUN:
            value = run_of(value, _at(where) + f"task {show_value(name)}")
        attrs[n] = value
    _map_options(attrs, given)
    return TaskDef(**attrs)


# A task's own options (not its map's): those taken as given, and those read by their form
# (name, form, whether None is their default), in the table's order.
_AS_GIVEN = tuple(
    o.name for o in TASK_OPTIONS
    if o.within is None and o.form in (Form.VALUE, Form.NAME, Form.TEXT, Form.SECONDS)
)  # fmt: skip
_READ = tuple(
    (o.name, o.form, o.default is None) for o in TASK_OPTIONS
    if o.within is None and o.name not in _AS_GIVEN
)  # fmt: skip


def _map_options(attrs: dict[str, Any], given: Mapping[str, Any]) -> None:
    """The options a task's map holds (``within="map"``: window, items, steps...) set on
    its spec, and the parent it maps over added to its ``after`` if missing."""
    spec, steps = attrs["map"], given["steps"]
    if spec is None:
        if steps is not None:
            raise _fail(
                given["where"],
                f"task {show_value(given['name'])}: steps need map= (what each item is)",
            )
        return
    for o in TASK_OPTIONS:
        value = given[o.name]
        if o.within != "map" or value is None:
            continue
        if o.form is Form.STEPS:
            spec.steps = list(value.tasks if isinstance(value, Workflow) else value)
        else:
            setattr(spec, o.name, value)
    if spec.over not in attrs["after"]:
        attrs["after"].append(spec.over)


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

    One function per concern, in this order: the workflow's own fields, ``before`` turned
    into ``after``, each task in turn (:func:`_check_tasks`), then conditions, parents, the
    cycles and child runs' input references.

    Args:
        wf: the workflow.
        max_payload: the largest payload, in bytes of JSON.
        max_tasks: the most tasks a workflow may have.

    Returns the JSON text of every task's payload (``""`` for no payload), in task order.
    """
    where = wf.where if isinstance(wf.where, str) else None
    name = _check_workflow(wf, where, max_tasks)
    _add_before_edges(wf.tasks, where, name)
    payloads = _check_tasks(wf, where, name, max_payload)
    parents, rules = resolve(wf)
    _check_conditions(wf, parents, where)
    children = _check_parents(wf, parents, rules, where)
    _check_cycles(children, where, name)
    _check_run_references(wf, parents, where)
    return payloads


def _check_workflow(wf: Workflow, where: str | None, max_tasks: int) -> str:
    """The workflow's own fields (concurrency and rate limits normalized in place).
    Returns its name."""
    name = _check_workflow_name(wf, where)
    _check_task_count(wf, where, name, max_tasks)
    _check_backoff(wf, where, name)
    _check_lifetime(wf, where, name)
    _check_flow(wf, where, name)
    return name


def _check_workflow_name(wf: Workflow, where: str | None) -> str:
    if isinstance(wf.name, str) and not wf.name.strip():
        raise _fail(where, "the workflow has no name")
    return check_name(wf.name, "workflow name", where)


def _check_task_count(wf: Workflow, where: str | None, name: str, max_tasks: int) -> None:
    """Some tasks (a list), at most ``max_tasks``."""
    if not isinstance(wf.tasks, list) or not wf.tasks:
        raise _fail(where, f"workflow {name!r} has no tasks")
    if len(wf.tasks) > max_tasks:
        raise _fail(where, f"workflow {name!r} has {len(wf.tasks)} tasks; at most {max_tasks}")


def _check_backoff(wf: Workflow, where: str | None, name: str) -> None:
    """The delays between retries: numbers of seconds up to :data:`MAX_BACKOFF`."""
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


def _check_lifetime(wf: Workflow, where: str | None, name: str) -> None:
    """Its deadline (at most :data:`MAX_TIMEOUT`) and how long it is kept once finished
    (``ttl``, at most :data:`MAX_TTL`): seconds above 0."""
    for what, secs, high in (
        ("deadline", getattr(wf, "deadline", None), MAX_TIMEOUT),
        ("ttl", getattr(wf, "ttl", None), MAX_TTL),
    ):
        if secs is not None and not is_seconds(secs, 0, high):
            raise _fail(
                where,
                f"workflow {name!r}: {what} must be a number of seconds above 0 and at most "
                f"{high:.0f}, not {show_value(secs)}",
            )


def _check_flow(wf: Workflow, where: str | None, name: str) -> None:
    """Its concurrency and its rate limits by type (:mod:`engine.spec.flow`,
    :mod:`engine.spec.rate_limits`), normalized in place."""
    wf.concurrency = concurrency_from(
        getattr(wf, "concurrency", None), f"{_at(where)}workflow {name!r}"
    )
    wf.rate_limits = rate_limits_from(
        getattr(wf, "rate_limits", None), f"{_at(where)}workflow {name!r}"
    )


def _check_tasks(wf: Workflow, where: str | None, name: str, max_payload: int) -> list[str]:
    """Each task in turn: its name and type, each option's own check (in the order of
    :data:`engine.spec.options.TASK_OPTIONS`: priority, attempts, timeout, delay, kind,
    rate limit, map, parents), its payload, its rule. Returns the payloads' JSON texts."""
    seen: dict[str, TaskDef] = {}
    types: set[str] = set()
    payloads: list[str] = []
    for t in wf.tasks:
        if not isinstance(t, TaskDef):
            raise _fail(where, f"workflow {name!r}: not a task: {show_value(t)}")
        here = t.where if isinstance(t.where, str) else where
        _check_task_name(t, here, name, seen, types)
        for check in TASK_CHECKS:
            check(t, here)
        payloads.append("" if t.payload is None else _encoded_payload(t, here, max_payload))
        if t.trigger is not None or t.on_failure is not None or t.finally_ is not False:
            _check_rule(t, here)
    return payloads


def _check_conditions(wf: Workflow, parents: list[list[str]], where: str | None) -> None:
    """Tasks' conditions (``when``), compiled (:mod:`engine.spec.conditions`)."""
    if any(getattr(t, "when", None) is not None for t in wf.tasks):
        from engine.spec.conditions import check_conditions

        check_conditions(wf.tasks, parents, where)


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


def _check_parents(
    wf: Workflow, parents: list[list[str]], rules: list[str], where: str | None
) -> dict[str, list[str]] | None:
    """The edges: every parent a known task other than itself, listed once, at most
    :data:`MAX_PARENTS`; none after a finally task without ``after`` (that one runs
    last); a trigger rule only with parents. Returns each task's children, or ``None``
    when every parent is defined before its children (the usual way to write a DAG: the
    definition order is then a topological order, and no cycle can exist)."""
    last = {t.name for t, r in zip(wf.tasks, rules, strict=True) if r == FINALLY and not t.after}
    children: dict[str, list[str]] = {t.name: [] for t in wf.tasks}
    earlier: set[str] = set()
    ordered = True
    for t, ups in zip(wf.tasks, parents, strict=True):
        here = t.where if isinstance(t.where, str) else where
        if t.name in last:
            continue  # after known tasks that nothing else runs after: no cycle through it
        for p in ups:
            if p == t.name:
                raise _fail(here, f"task {t.name!r} depends on itself")
            if p not in children:
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
    return None if ordered else children


def _check_cycles(children: dict[str, list[str]] | None, where: str | None, name: str) -> None:
    """No cycle among the edges (``children``: ``None`` when none can exist)."""
    cycle = None if children is None else find_cycle(children)
    if cycle:
        shown = (
            cycle if len(cycle) <= 12 else [*cycle[:6], f"... {len(cycle) - 11} more", *cycle[-5:]]
        )
        raise _fail(where, f"workflow {name!r} has a cycle: {' -> '.join(shown)}")


def _check_run_references(wf: Workflow, parents: list[list[str]], where: str | None) -> None:
    """A child run's input references name tasks upstream of it (or input, payload)."""
    if not any(t.run is not None for t in wf.tasks):
        return
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
