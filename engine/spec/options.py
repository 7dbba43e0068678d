"""A task's options, declared once.

:data:`TASK_OPTIONS` lists every option a task takes: its keyword in
:meth:`engine.spec.definition.Workflow.task` and the type it takes there, its default,
its key in a workflow file, how a call or a file gives it (:class:`Form`), its own check
(run by :func:`engine.spec.definition.validate` for every task, in the table's order) and
the definition fields it is stored in (:mod:`engine.store.codec.fields`, by name). The
builder, the file loader, validation and the codec read it; :class:`TaskDef`, the value
the options fill, is beside it (``tests/test_task_options.py`` checks that the two, and
``Workflow.task``'s keywords, agree).

Adding an option: a row here and a field of :class:`TaskDef`, a keyword of
``Workflow.task``; a check if it needs one; then what it does (the codec lays a field
with ``store`` out by itself, after the fields of the options before it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from engine.spec.child_specs import ChildSpec, run_of
from engine.spec.mapping import MapSpec, OutputRef
from engine.spec.messages import at, fail, show_value
from engine.spec.rate_limits import RateLimit, rate_limit_from
from engine.spec.wait_tasks import WAIT_TYPE, WaitSpec, wait_of

PRIORITY_RANGE = (-999, 999)
MAX_ATTEMPTS = 1_000_000
MAX_TIMEOUT = 30 * 86400.0  # seconds: a task's timeout or delay (and a workflow's deadline)


@dataclass
class TaskDef:
    """One task of a workflow definition (its options: :data:`TASK_OPTIONS`).

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
            ``b`` is ``b`` after ``a``; ``validate`` adds the edges to their ``after``.
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


class Form(Enum):
    """How an option is given, which says how the builder and the loader read it."""

    VALUE = "value"  # as given
    NAME = "name"  # the task's name (a file: a missing or empty one is "")
    TEXT = "text"  # a string; a file's null is the default
    NAMES = "names"  # tasks or their names: a list of names
    SECONDS = "seconds"  # a number of seconds; a file may write a duration ("30s", "5m")
    MAP = "map"  # what it maps over (engine.spec.mapping): a parent, a key of its output
    STEPS = "steps"  # the tasks each item of its map runs (needs map)
    WAIT = "wait"  # a wait's spec (engine.spec.wait_tasks.wait_of)
    RUN = "run"  # a child run's spec (engine.spec.child_specs.run_of)


Check = Callable[[TaskDef, "str | None"], None]


@dataclass(frozen=True)
class TaskOption:
    """One option of a task (a row of :data:`TASK_OPTIONS`)."""

    name: str  # Workflow.task's keyword, and TaskDef's attribute (unless `within`)
    hint: str  # the type Workflow.task takes it as (its annotation, word for word)
    default: Any
    form: Form = Form.VALUE
    # its key in a native file ("": its name; None: not in files; "map.<k>": under map:)
    file: str | None = ""
    aliases: tuple[str, ...] = ()  # other keys a file may give it under
    within: str | None = None  # "map": held by the task's map (TaskDef has no attribute)
    check: Check | None = None  # its own check, per task (validate: in the table's order)
    fields: tuple[str, ...] = ()  # the definition fields it is stored in (their names)
    # its one field's value as stored (None: left out, as for the default); the codec
    # lays these out itself, in the table's order
    store: Callable[[TaskDef], Any] | None = None

    @property
    def key(self) -> str | None:
        """Its key in a workflow file (``None``: files do not give it; ``"map.<key>"``:
        a key of the task's ``map:`` mapping)."""
        return self.name if self.file == "" else self.file

    @property
    def attr(self) -> str | None:
        """TaskDef's attribute that holds it (``None``: it is the map's)."""
        return None if self.within is not None else self.name


def is_seconds(value: Any, low: float, high: float) -> bool:
    """Whether ``value`` is a number of seconds (no bool) in ``(low, high]``."""
    return not isinstance(value, bool) and isinstance(value, int | float) and low < value <= high


# -- each option's own check (validate runs them per task, in the table's order) -----------


def _check_priority(t: TaskDef, here: str | None) -> None:
    """An integer within :data:`PRIORITY_RANGE`."""
    lo, hi = PRIORITY_RANGE
    if isinstance(t.priority, bool) or not isinstance(t.priority, int):
        raise fail(
            here, f"task {t.name!r}: priority must be an integer, not {show_value(t.priority)}"
        )
    if not lo <= t.priority <= hi:
        raise fail(
            here, f"task {t.name!r}: priority {show_value(t.priority)} is outside {lo}..{hi}"
        )


def _check_attempts(t: TaskDef, here: str | None) -> None:
    """``max_attempts``: an integer from 1 to :data:`MAX_ATTEMPTS`."""
    if isinstance(t.max_attempts, bool) or not isinstance(t.max_attempts, int):
        raise fail(here, f"task {t.name!r}: max_attempts must be an integer")
    if t.max_attempts < 1:
        raise fail(here, f"task {t.name!r}: max_attempts must be at least 1")
    if t.max_attempts > MAX_ATTEMPTS:
        raise fail(here, f"task {t.name!r}: max_attempts must be at most {MAX_ATTEMPTS}")


def _check_time(what: str, low: float) -> Check:
    """The check of ``timeout`` (``low`` 0: above 0) or ``delay`` (``low`` -1: from 0):
    seconds, at most :data:`MAX_TIMEOUT`."""
    above = "above 0" if low == 0 else "from 0"

    def check(t: TaskDef, here: str | None) -> None:
        secs = getattr(t, what)
        if secs is not None and not is_seconds(secs, low, MAX_TIMEOUT):
            raise fail(
                here,
                f"task {t.name!r}: {what} must be a number of seconds {above} and at most "
                f"{MAX_TIMEOUT:.0f}, not {show_value(secs)}",
            )

    check.__name__ = check.__qualname__ = f"_check_{what}"
    return check


def _check_kind(t: TaskDef, here: str | None) -> None:
    """A wait task or a child run (:func:`_check_wait`); any other keeps off the
    engine's own types (``~...``)."""
    if t.wait is not None or t.run is not None:
        _check_wait(t, here)
    elif type(t.type) is str and t.type.startswith("~"):
        raise fail(
            here, f"task {t.name!r}: type {t.type!r}: names starting with ~ are the engine's"
        )


def _check_wait(t: TaskDef, here: str | None) -> None:
    """A wait task (:mod:`engine.spec.wait_tasks`) or a child run
    (:mod:`engine.runtime.child_runs`) runs no handler: no type, map, timeout or delay; a
    wait no retries of its own."""
    if t.wait is not None and t.run is not None:
        raise fail(here, f"task {t.name!r}: wait and run are two kinds of task: give one")
    if t.run is not None:
        t.run = run_of(t.run, at(here) + f"task {t.name!r}")
    else:
        t.wait = wait_of(t.wait, at(here) + f"task {t.name!r}")
    for what, bad in (
        ("a type", t.type not in ("", WAIT_TYPE)),
        ("a map", t.map is not None),
        ("a timeout (give the wait one)", t.timeout is not None),
        ("a delay (use wait: sleep)", bool(t.delay)),
        ("max_attempts (retry it by hand)", t.max_attempts != 1 and t.run is None),
    ):
        if bad:
            raise fail(here, f"task {t.name!r}: a wait task runs no handler: it takes no {what}")


def _check_rate_limit(t: TaskDef, here: str | None) -> None:
    """A task's rate limit (normalized in place): not on a map or a wait task."""
    if getattr(t, "rate_limit", None) is not None:
        t.rate_limit = rate_limit_from(t.rate_limit, f"{at(here)}task {t.name!r}")
        if t.map is not None or t.wait is not None or t.run is not None:
            what = "a map" if t.map is not None else "a wait task (no agent starts it)"
            raise fail(here, f"task {t.name!r}: {what} cannot have a rate limit")


def _check_map(t: TaskDef, here: str | None) -> None:
    """A map takes no delay (its items start at once). What it maps over is checked
    when it is compiled (:func:`engine.spec.mapping.check_map`), once every task is."""
    if t.delay and t.map is not None:
        raise fail(here, f"task {t.name!r}: a map cannot have a delay (its items start at once)")


def _check_after(t: TaskDef, here: str | None) -> None:
    """``after``: a list of task names (which tasks they are is the graph's concern)."""
    if not isinstance(t.after, list):
        raise fail(here, f"task {t.name!r}: after must be a list of task names")
    for p in t.after:
        if not isinstance(p, str):
            raise fail(here, f"task {t.name!r}: a parent must be a task name, not {show_value(p)}")


def _ms(seconds: float | None) -> int | None:
    """Seconds as whole milliseconds, as stored (``None`` for none or 0)."""
    return round((seconds or 0) * 1000) or None


REQUIRED: Any = object()  # the default of an option every call gives (the task's name)


# -- the table ----------------------------------------------------------------------------
# Checked in this order; a definition's fields laid out in it (a definition's digest is of
# that layout, so a new option's row goes after those whose fields are stored today).
# Checked elsewhere by validate: name and type (unique names, types checked once), the
# payload (encoded once), before (turned into after), trigger / on_failure / finally (the
# rule they make together), when (with the parents), the map's own options (on compile).
TASK_OPTIONS: tuple[TaskOption, ...] = (
    TaskOption("name", "str", REQUIRED, Form.NAME, fields=("D_NAME",), store=lambda t: t.name),
    TaskOption(
        "type", "str", "", Form.TEXT, fields=("D_TYPE",),
        # a wait task's or a child run's is the engine's own, whatever it says
        store=lambda t: WAIT_TYPE if t.wait is not None or t.run is not None else t.type or None,
    ),
    TaskOption("payload", "Any", None, fields=("D_PAYLOAD",)),  # its JSON: validate's
    TaskOption(
        "priority", "int", 0, check=_check_priority, fields=("D_PRIORITY",),
        store=lambda t: t.priority or None,
    ),
    TaskOption(
        "max_attempts", "int", 1, check=_check_attempts, fields=("D_ATTEMPTS",),
        store=lambda t: None if t.max_attempts == 1 else t.max_attempts,
    ),
    TaskOption(
        "timeout", "float | None", None, Form.SECONDS, check=_check_time("timeout", 0),
        fields=("D_TIMEOUT",),
        store=lambda t: None if t.timeout is None else round(t.timeout * 1000),
    ),
    TaskOption(
        "delay", "float | None", None, Form.SECONDS, check=_check_time("delay", -1),
        fields=("D_DELAY",), store=lambda t: _ms(t.delay),
    ),
    TaskOption(
        "wait", "WaitSpec | dict[str, Any] | None", None, Form.WAIT, check=_check_kind,
        fields=("D_WAIT", "D_SIGNALS", "D_SIGNAL_WAITERS"),
    ),
    TaskOption(
        "run", "ChildSpec | dict[str, Any] | str | None", None, Form.RUN, check=_check_kind,
        fields=("D_WAIT",),
    ),
    TaskOption(
        "rate_limit", "RateLimit | dict[str, Any] | None", None, check=_check_rate_limit,
        fields=("D_RATE",),
    ),
    TaskOption(
        "map", "TaskDef | OutputRef | MapSpec | str | None", None, Form.MAP, check=_check_map,
        fields=("D_MAP", "D_GATHER"),
    ),
    TaskOption(
        "after", "Iterable[TaskDef | str]", (), Form.NAMES, check=_check_after,
        fields=("D_CHILDREN", "D_PARENTS", "D_PARENT_NAMES", "D_WAIT_FOR", "D_GATHERS"),
    ),
    TaskOption("before", "Iterable[TaskDef | str]", (), Form.NAMES),
    TaskOption("trigger", "str | None", None, fields=("D_RULE",)),
    TaskOption(
        "on_failure", "Iterable[TaskDef | str] | None", None, Form.NAMES,
        fields=("D_RULE", "D_HANDLERS"),
    ),
    TaskOption("finally_", "bool", False, file="finally", fields=("D_FINALLY",)),
    TaskOption("when", "str | None", None, fields=("D_WHEN",), store=lambda t: t.when),
    TaskOption(
        "concurrency", "int | None", None, file="map.concurrency", within="map",
        fields=("D_WINDOW",),
    ),
    TaskOption(
        "max_items", "int | None", None, file="map.max_items", within="map",
        fields=("D_MAX_ITEMS",),
    ),
    TaskOption(
        "on_empty", "str | None", None, file="map.on_empty", within="map", fields=("D_ON_EMPTY",)
    ),
    TaskOption(
        "tolerate", "int | str | None", None, file="map.tolerate", within="map",
        fields=("D_TOLERATE",),
    ),
    TaskOption(
        "steps", "Workflow | Iterable[TaskDef] | None", None, Form.STEPS, within="map",
        fields=("D_STEPS", "D_FIRST_STEPS", "D_LAST_STEPS"),
    ),
    TaskOption("where", "str | None", None, file=None),  # a file's is its file and line
)  # fmt: skip

BY_NAME = {o.name: o for o in TASK_OPTIONS}
# A native file's task: its keys (aliases too), each to its option.
# A native file's workflow keys (its tasks' are BY_KEY's)
WORKFLOW_KEYS = frozenset({
    "name", "tasks", "retry_backoff", "retry_backoff_max", "deadline", "ttl", "concurrency",
    "input_schema", "rate_limits",
})  # fmt: skip
BY_KEY = {k: o for o in TASK_OPTIONS if o.key and "." not in o.key for k in (o.key, *o.aliases)}
# A native file's map: its keys beyond `over` and `key`, each to its option.
MAP_KEYS = {
    k.removeprefix("map."): o
    for o in TASK_OPTIONS if o.key and o.key.startswith("map.")
    for k in (o.key, *o.aliases)
}  # fmt: skip
# Each option's own check, once each, in the table's order.
TASK_CHECKS: tuple[Check, ...] = tuple(
    dict.fromkeys(o.check for o in TASK_OPTIONS if o.check is not None)
)
