"""Conditions: a task's ``when:``, a CEL expression over the run's input and its
parents' ends, decided by the agent that claims the task before its handler runs.

The expression is Common Expression Language (the ``common-expression-language``
package: Rust's ``cel`` through PyO3; no Python ``eval``). Its variables are bound, never
substituted into its text:

- ``input``: the run's input (``null`` for none);
- ``parents.<name>.output`` / ``parents.<name>.state``: a direct parent's output
  (``null`` when it has none) and how it ended (``succeeded``, ``failed``,
  ``upstream_failed``, ``skipped``); ``parents["a-b"]`` for a name that is not an
  identifier;
- ``run.id``: the run's workflow id.

It is compiled and checked when the workflow is pushed (:func:`check_when`): a syntax
error, an unknown variable, a parent that is not one of the task's parents, or
comprehensions (``all``, ``exists``, ``exists_one``, ``map``, ``filter``) nested more than
:data:`MAX_NESTING` deep (each level multiplies the work by its list's length) is refused
there. The claim row of a task with a condition brings the expression and its parents'
states (``lib/claim_row.lua``); :func:`gate` decides it: true runs the handler; false
reports the outcome ``skip`` (the task is ``skipped``, and its children decide by their
trigger rules); an expression that fails to evaluate, gives no boolean, or runs past its
budget fails the task without a retry. An agent evaluates in worker processes
(:mod:`engine.spec.condition_pool`), each evaluation under a wall-clock budget: CEL holds the
GIL while it runs, so in the agent's process a slow one would stall its lease heartbeat.
Programs are compiled once per expression text and kept.

A task's trigger rule decides first (it is not claimed unless its rule lets it run);
then its condition.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine.core.outcomes import FATAL, SKIP
from engine.errors import DefinitionError
from engine.spec.cel_worker import detail, judge
from engine.spec.cel_worker import short as _short
from engine.spec.condition_pool import ConditionPool, EvaluatorError, OverBudget

if TYPE_CHECKING:
    from engine.core.task import Task

VARIABLES = ("input", "parents", "run")
RUN_FIELDS = ("id",)
MAX_WHEN = 4096  # characters of an expression
# comprehensions one inside another: n items at each of d levels cost n**d evaluations
MAX_NESTING = 3

# A CEL source's tokens that matter here: string literals (skipped: a name inside one is
# no reference), comments (dropped), identifiers, and the punctuation after them.
_STRING = (
    r"""[rRbB]{0,2}(?:'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\""""
    r"""|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*")"""
)
_TOKEN = re.compile(
    rf"(?P<s>{_STRING})|(?P<c>//[^\n]*)|(?P<i>[A-Za-z_][A-Za-z0-9_]*)|(?P<p>\S)", re.S
)
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})


def _load() -> Any:
    try:
        import cel
    except ImportError:  # pragma: no cover - a dependency
        raise DefinitionError(
            "when: needs the common-expression-language package (pip install "
            "common-expression-language)"
        ) from None
    return cel


@functools.lru_cache(maxsize=1024)
def compile_when(text: str) -> Any:
    """The compiled program of expression ``text`` (kept: one compile per expression);
    ``ValueError`` for a syntax error."""
    return _load().compile(text)


def _literal(token: str) -> str | None:
    """The text of a plain CEL string literal, or None for one with escapes or a prefix."""
    if token[:1] in "'\"" and len(token) >= 2 and "\\" not in token:
        q = 3 if token[:3] in ("'''", '"""') else 1
        return token[q:-q]
    return None


def references(text: str) -> tuple[list[str], list[str], set[str]]:
    """What ``text`` reads: the parents it names (``parents.x``, ``parents["x"]``), the
    fields of ``run`` it names, and the names macros bind (``l.all(x, ...)``)."""
    tokens = _tokens(text)
    parents: list[str] = []
    run: list[str] = []
    bound: set[str] = set()
    for k, (kind, tok) in enumerate(tokens):
        if kind != "i" or (k > 0 and tokens[k - 1][1] == "."):
            if kind == "i" and tok in _MACROS and k + 3 < len(tokens):
                if tokens[k + 1][1] == "(" and tokens[k + 2][0] == "i" and tokens[k + 3][1] == ",":
                    bound.add(tokens[k + 2][1])
            continue
        nxt = tokens[k + 1 : k + 4]
        if tok == "parents" and len(nxt) >= 2:
            if nxt[0][1] == "." and nxt[1][0] == "i":
                parents.append(nxt[1][1])
            elif nxt[0][1] == "[" and nxt[1][0] == "s" and len(nxt) == 3 and nxt[2][1] == "]":
                name = _literal(nxt[1][1])
                if name is not None:
                    parents.append(name)
        elif tok == "run" and len(nxt) >= 2 and nxt[0][1] == "." and nxt[1][0] == "i":
            run.append(nxt[1][1])
    return parents, run, bound


def _tokens(text: str) -> list[tuple[str | None, str]]:
    """``text``'s tokens (kind ``s``, ``i`` or ``p``, and text), comments left out."""
    return [(m.lastgroup, m.group()) for m in _TOKEN.finditer(text) if m.lastgroup != "c"]


def nesting(text: str) -> int:
    """How deep ``text`` nests comprehensions (``l.all(x, l.exists(y, ...))``: 2); a
    macro in another's receiver (``l.map(x, x).all(...)``) is not inside it."""
    tokens = _tokens(text)
    opened: list[bool] = []  # per open bracket: whether a macro's call opened it
    deepest = inside = 0
    for k, (kind, tok) in enumerate(tokens):
        if tok in "([{" and kind == "p":
            macro = (
                k >= 2 and tokens[k - 1][0] == "i" and tokens[k - 1][1] in _MACROS
                and tokens[k - 2][1] == "." and tok == "("
            )  # fmt: skip
            opened.append(macro)
            inside += macro
            deepest = max(deepest, inside)
        elif tok in ")]}" and kind == "p" and opened:
            inside -= opened.pop()
    return deepest


def _line(text: str) -> str:
    """``text`` on one line: runs of blanks and line breaks as one space, other control
    characters escaped (messages, status)."""
    text = " ".join(text.split())
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


@functools.lru_cache(maxsize=1024)
def _reads(text: str) -> tuple[tuple[str, ...], bool, bool]:
    """What a condition reads, once per expression: the parents it names (each once),
    whether it reads ``input``, whether it reads ``run``."""
    names, run, _ = references(text)
    reads_input = re.search(r"(?<![.\w])input\b", text) is not None
    return tuple(dict.fromkeys(names)), reads_input, bool(run)


def check_when(text: Any, task: str, parents: Sequence[str], where: str | None) -> str:
    """``text`` if it is a condition task ``task`` (with direct ``parents``) can have;
    else :class:`DefinitionError` in one line naming the task and what is wrong."""
    try:
        return _check_when(text, task, parents, where)
    except DefinitionError as e:
        raise DefinitionError(_line(str(e))) from None


def _check_when(text: Any, task: str, parents: Sequence[str], where: str | None) -> str:
    at = f"{where}: " if where else ""
    who = f"{at}task {task!r}: when"
    if not isinstance(text, str) or not text.strip():
        raise DefinitionError(f"{who} must be a CEL expression (a non-empty string)")
    if len(text) > MAX_WHEN:
        raise DefinitionError(f"{who} is {len(text)} characters long; at most {MAX_WHEN}")
    try:
        program = compile_when(text)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 - a syntax error (ValueError), a Rust panic
        detail = " ".join(str(e).split())
        detail = detail.replace(f"Failed to parse expression {text!r}: ", "")
        raise DefinitionError(f"{who}: {detail[:300]}") from None
    depth = nesting(text)
    if depth > MAX_NESTING:
        raise DefinitionError(
            f"{who} nests comprehensions (all, exists, exists_one, map, filter) {depth} deep; "
            f"at most {MAX_NESTING}: each level multiplies the work by its list's length"
        )
    names, run, bound = references(text)
    unknown = [v for v in program.variables() if v not in VARIABLES and v not in bound]
    if unknown:
        raise DefinitionError(
            f"{who}: unknown variable {unknown[0]!r} (one of: {', '.join(VARIABLES)})"
        )
    for p in names:
        if p not in parents:
            ups = ", ".join(parents) if parents else "none"
            raise DefinitionError(
                f"{who} reads parents.{p}, which is not a parent of {task!r} (its parents: "
                f"{ups}); add it to after"
            )
    for f in run:
        if f not in RUN_FIELDS:
            raise DefinitionError(f"{who} reads run.{f}; run has: {', '.join(RUN_FIELDS)}")
    return text


def activation(
    input: Any, parents: Mapping[str, Any], states: Mapping[str, str], run_id: str
) -> dict[str, Any]:
    """The variables a condition sees."""
    return {
        "input": input,
        "parents": {p: {"output": out, "state": states.get(p, "succeeded")}
                    for p, out in parents.items()},
        "run": {"id": run_id},
    }  # fmt: skip


def explain(text: str, variables: Mapping[str, Any]) -> str:
    """Why a condition was false: the expression and the values it read."""
    names, reads_input, reads_run = _reads(text)
    read: list[str] = []
    if reads_input:
        read.append(f"input={_short(variables['input'])}")
    for p in names:
        par = variables["parents"].get(p)
        if par is not None:
            read.append(f"parents.{p}.state={par['state']}")
            read.append(f"parents.{p}.output={_short(par['output'])}")
    if reads_run:
        read.append(f"run.id={variables['run']['id']}")
    return _line(f"when {text} was false" + (f" ({', '.join(read)})" if read else ""))


def _verdict(text: str, kind: str, value: Any) -> bool:
    """The condition's value from :func:`engine.spec.cel_worker.judge`'s answer; ``ValueError``
    when it failed or gave no boolean."""
    if kind == "ok":
        return bool(value)
    if kind == "value":
        raise ValueError(_line(f"when {text}: gave {value}, not true or false"))
    raise ValueError(_line(f"when {text}: {value}"))


def evaluate(text: str, variables: Mapping[str, Any]) -> bool:
    """The condition's value, evaluated in this process with no time limit (the planner);
    ``ValueError`` when it fails or gives no boolean."""
    try:
        program = compile_when(text)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 - a syntax error (ValueError), a Rust panic
        raise ValueError(_line(f"when {text}: {detail(e)}")) from None
    return _verdict(text, *judge(program, dict(variables)))


def gate(task: Task, pool: ConditionPool | None = None) -> tuple[str, str] | None:
    """Decide the condition of a claimed task that has one: ``None`` to run its handler,
    ``("skip", why)`` when it is false, ``("fatal", error)`` when it cannot be evaluated
    or runs past the ``pool``'s budget (evaluated there; in this process without one),
    ``("err", error)`` when no evaluator answered (the attempt fails and is retried)."""
    text = task._when
    if text is None:
        return None
    try:
        variables = activation(task.input, task.parents, task._states or {}, task.workflow_id)
        if pool is None:
            holds = evaluate(text, variables)
        else:
            holds = _verdict(text, *pool.evaluate(text, variables))
        if holds:
            return None
        return SKIP, explain(text, variables)
    except OverBudget:
        budget = pool.budget_s if pool is not None else 0
        return FATAL, _line(
            f"when {text}: exceeded its {budget:g}s budget (evaluation stopped; not retried)"
        )
    except EvaluatorError as e:
        return "err", _line(f"when {text}: not decided: {e}")
    except Exception as e:  # noqa: BLE001 - the task fails, never the agent
        return FATAL, str(e) if isinstance(e, ValueError) else _line(f"when {text}: {e!r}")


def check_conditions(
    tasks: Sequence[Any], parents: Sequence[Sequence[str]], where: str | None
) -> None:
    """Check every task's ``when`` (tasks and their resolved parents, in order): refused
    on a map, a wait or a ``run:`` task (none runs a handler), else :func:`check_when`."""
    for t, ups in zip(tasks, parents, strict=True):
        text = getattr(t, "when", None)
        if text is None:
            continue
        here = t.where if isinstance(t.where, str) else where
        at = f"{here}: " if here else ""
        if t.map is not None:
            raise DefinitionError(
                f"{at}task {t.name!r}: a map cannot have when (put the condition on its "
                "parent or on a task before it)"
            )
        if getattr(t, "wait", None) is not None or getattr(t, "run", None) is not None:
            raise DefinitionError(
                f"{at}task {t.name!r}: a wait or run: task cannot have when (no agent "
                "claims it to decide it: put the condition on a task before it)"
            )
        check_when(text, t.name, ups, here)


# -- the planner: the branch a condition takes, given assumed outputs and input ----------

NOT_GIVEN: Any = object()  # no input given to the planner


# rules that may run a task before all its parents have ended (engine.core.rules.decide)
EARLY_RULES = frozenset({"one_success", "one_failed"})


def plan_gate(
    tasks: Sequence[Any],
    parents: Sequence[Sequence[int]],
    rules: Sequence[str],
    outputs: Mapping[str, Any],
    input: Any = NOT_GIVEN,
) -> tuple[Any, dict[int, tuple[str | None, str]]]:
    """For :func:`engine.core.rules.plan_graph`: a gate that decides each conditional task's
    condition from its parents' planned states, their assumed ``outputs`` (by task name)
    and the assumed ``input``; and per task it looked at, what it decided (``None``:
    runs) and why (filled as it goes). A condition that reads an output or an input not
    given is not decided: it is taken as true and its ``why`` says what to give; so is one
    that reads parents of a task whose rule may run it before they have all ended
    (``one_success``, ``one_failed``: what it reads then depends on timing)."""
    names = [t.name for t in tasks]
    whys: dict[int, tuple[str | None, str]] = {}

    def gate(i: int, states: Sequence[str]) -> str | None:
        text = getattr(tasks[i], "when", None)
        if text is None:
            return None
        read, reads_input, _ = _reads(text)
        shown = _line(text)
        ups = {names[p]: p for p in parents[i]}
        missing = [
            f"--output {p}=JSON"
            for p in read
            if p in ups and states[ups[p]] == "succeeded" and p not in outputs
        ]
        if input is NOT_GIVEN and reads_input:
            missing.append("--input JSON")
        if read and rules[i] in EARLY_RULES and len(ups) > 1:
            early = f"{rules[i]} may run it before the parents it reads have ended"
            whys[i] = None, f"when {shown}: not decided, taken as true ({early})"
            return None
        if missing:
            whys[i] = None, f"when {shown}: not decided, taken as true (give {', '.join(missing)})"
            return None
        variables = activation(
            None if input is NOT_GIVEN else input,
            {p: outputs.get(p) if states[k] == "succeeded" else None for p, k in ups.items()},
            {p: states[k] for p, k in ups.items()},
            "1",
        )
        try:
            if evaluate(text, variables):
                whys[i] = None, f"when {shown} is true"
                return None
        except ValueError as e:
            whys[i] = "failed", f"{e} → failed"
            return "failed"
        whys[i] = "skipped", explain(text, variables)
        return "skipped"

    return gate, whys


def join_traps(
    tasks: Sequence[Any], parents: Sequence[Sequence[str]], rules: Sequence[str]
) -> list[str]:
    """Tasks that join a conditional branch but keep ``all_success`` (Airflow's join
    trap): when the branch is skipped, so are they. One line each, for ``redisflow plan``."""
    conditional = {t.name for t in tasks if getattr(t, "when", None) is not None}
    out = []
    for t, ups, rule in zip(tasks, parents, rules, strict=True):
        branch = [p for p in ups if p in conditional]
        if len(ups) >= 2 and branch and rule == "all_success":
            out.append(
                f"task {t.name!r} joins {branch[0]!r}, which has a condition, with the default "
                "rule all_success: it is skipped whenever that branch is (trigger: "
                "none_failed_min_one_success runs it after whichever branch ran)"
            )
    return out
