"""Trigger rules: when a task runs, given how its parents ended. The reference semantics.

``engine/store/lua/lib/rules.lua`` (``rule_decide``) applies the same table in Redis, one
parent's end at a time; ``tests/test_rules.py`` runs both sides against each other, and
:func:`plan` (``redisflow plan``) runs it over a whole workflow before anything runs.

A parent ends in one of three classes: *succeeded*; *failed* (``failed`` or
``upstream_failed``); *skipped*. For a task with ``n`` parents of which ``s`` succeeded,
``f`` failed and ``k`` were skipped so far (``d = s + f + k`` have ended):

============================  ===================  ====================  ===================
rule                          runs when            upstream_failed when  skipped when
============================  ===================  ====================  ===================
all_success (the default)     s == n               f > 0                 d == n, f == 0
all_done                      d == n               –                     –
all_failed                    f == n               –                     s + k > 0
one_success                   s ≥ 1                d == n, s == 0,       d == n, s == 0,
                                                   f > 0                 f == 0
one_failed                    f ≥ 1                –                     d == n, f == 0
none_failed                   d == n, f == 0       f > 0                 –
none_failed_min_one_success   d == n, f == 0,      f > 0                 d == n, f == 0,
                              s ≥ 1                                      s == 0
============================  ===================  ====================  ===================

A decision is taken as soon as no parent still to end can change it (``one_success``
runs at its first succeeded parent; ``all_failed`` is skipped at its first parent that
did not fail), and never before: so a task ends in the same state whatever order its
parents end in.

Sugar: ``on_failure: [a, b]`` is ``after: [a, b]`` with ``one_failed``; ``finally: true``
is ``all_done`` (after every leaf task when it has no ``after``), and a ``finally`` task
never changes the workflow's result.

The workflow's result (:func:`workflow_result`): it fails when some task failed and
that failure is not *handled*; a failure is handled when a task downstream of it whose
rule exists for failures (``one_failed``, ``all_failed``, so ``on_failure`` too)
succeeded. Skipped and ``upstream_failed`` tasks never fail it by themselves (the
failure upstream does); a ``finally`` task's own failure is shown but ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ALL_SUCCESS = "all_success"
RULES = (
    ALL_SUCCESS,
    "all_done",
    "all_failed",
    "one_success",
    "one_failed",
    "none_failed",
    "none_failed_min_one_success",
)
DEFAULT_RULE = ALL_SUCCESS
FINALLY = "finally"  # the stored rule of a `finally: true` task: all_done, outside the result
HANDLER_RULES = frozenset({"one_failed", "all_failed"})  # tasks that exist for failures
RUN, UPSTREAM_FAILED, SKIPPED = "run", "upstream_failed", "skipped"
OUTCOMES = ("succeeded", "failed", "skipped")  # what --assume may say of a task


def outcome_class(state: str) -> str | None:
    """A parent's end as a rule counts it: ``s`` (succeeded), ``f`` (failed or
    upstream_failed), ``k`` (skipped); ``None`` while it has not ended (or cancelled)."""
    if state == "succeeded":
        return "s"
    if state in ("failed", UPSTREAM_FAILED):
        return "f"
    if state == SKIPPED:
        return "k"
    return None


def decide(rule: str, n: int, s: int, f: int, k: int) -> str | None:
    """What a task with ``rule`` and ``n`` parents does when ``s`` succeeded, ``f``
    failed and ``k`` were skipped: ``"run"``, ``"upstream_failed"``, ``"skipped"``, or
    ``None`` while the parents still to end could change the answer."""
    d = s + f + k
    if rule in ("all_done", FINALLY):
        return RUN if d == n else None
    if rule == "all_failed":
        if f == n:
            return RUN
        return SKIPPED if s + k > 0 else None
    if rule == "one_success":
        if s > 0:
            return RUN
        if d == n:
            return UPSTREAM_FAILED if f > 0 else SKIPPED
        return None
    if rule == "one_failed":
        if f > 0:
            return RUN
        return SKIPPED if d == n else None
    if rule == "none_failed":
        if f > 0:
            return UPSTREAM_FAILED
        return RUN if d == n else None
    if rule == "none_failed_min_one_success":
        if f > 0:
            return UPSTREAM_FAILED
        if d == n:
            return RUN if s > 0 else SKIPPED
        return None
    # all_success
    if f > 0:
        return UPSTREAM_FAILED
    if s == n:
        return RUN
    return SKIPPED if d == n else None


def counts(states: Sequence[str]) -> tuple[int, int, int]:
    """``(s, f, k)`` of parents in ``states``."""
    s = f = k = 0
    for st in states:
        c = outcome_class(st)
        if c == "s":
            s += 1
        elif c == "f":
            f += 1
        elif c == "k":
            k += 1
    return s, f, k


def public_rule(rule: str) -> str:
    """The rule a user wrote: ``finally`` tasks follow ``all_done``."""
    return "all_done" if rule == FINALLY else rule


def explain(rule: str, parent_states: Sequence[str], state: str | None = None) -> str:
    """The "why" of a task's state, e.g. ``all_success: 3/5 succeeded, 1 failed, 1
    pending``; with ``state`` (a decided task's), `` → upstream_failed`` after it."""
    n = len(parent_states)
    shown = public_rule(rule) + (" (finally)" if rule == FINALLY else "")
    if n == 0:
        return "no parents: runs at once"
    s, f, k = counts(parent_states)
    parts = [f"{s}/{n} succeeded"]
    if f:
        upstream = sum(1 for p in parent_states if p == UPSTREAM_FAILED)
        parts.append(f"{f} failed" + (f" ({upstream} upstream)" if upstream else ""))
    if k:
        parts.append(f"{k} skipped")
    pending = n - s - f - k
    if pending:
        parts.append(f"{pending} pending")
    text = f"{shown}: " + ", ".join(parts)
    verdict = decide(rule, n, s, f, k)
    if state in (UPSTREAM_FAILED, SKIPPED):
        return f"{text} → {state}"
    if verdict is None and state in (None, "waiting"):
        return f"{text} → waiting"
    if verdict == RUN and state in (None, "waiting"):
        return f"{text} → runs"
    return text


def simulate(
    parents: Sequence[Sequence[int]],
    rules: Sequence[str],
    outcome: Callable[[int], str],
    gate: Callable[[int, Sequence[str]], str | None] | None = None,
) -> list[str]:
    """Every task's final state when each task that runs ends as ``outcome(i)`` says
    (``succeeded``, ``failed`` or ``skipped``). ``parents[i]`` are task indexes.
    ``gate(i, states so far)``, when given, may decide a task its rule lets run before it
    runs (a condition: ``"skipped"``, or ``"failed"`` for one that cannot be evaluated;
    ``None``: it runs)."""
    n = len(parents)
    children: list[list[int]] = [[] for _ in range(n)]
    pending = [len(ps) for ps in parents]
    for i, ps in enumerate(parents):
        for p in ps:
            children[p].append(i)
    order = [i for i in range(n) if not parents[i]]
    states: list[str] = [""] * n
    at = 0
    while at < len(order):  # Kahn's order: every parent before its children
        i = order[at]
        at += 1
        if parents[i]:
            s, f, k = counts([states[p] for p in parents[i]])
            verdict = decide(rules[i], len(parents[i]), s, f, k)
            states[i] = outcome(i) if verdict == RUN else str(verdict)
        else:
            states[i] = outcome(i)
            verdict = RUN
        if gate is not None and verdict == RUN:
            states[i] = gate(i, states) or states[i]
        for c in children[i]:
            pending[c] -= 1
            if pending[c] == 0:
                order.append(c)
    if at != n:
        raise ValueError("the graph has a cycle")
    return states


def workflow_result(
    states: Sequence[str], parents: Sequence[Sequence[int]], rules: Sequence[str]
) -> tuple[str, list[int]]:
    """``("succeeded" | "failed", the unhandled failed tasks)`` of a finished workflow."""
    open_ = {i for i, st in enumerate(states) if st == "failed" and rules[i] != FINALLY}
    if not open_:
        return "succeeded", []
    seen: set[int] = set()
    stack = [i for i, st in enumerate(states) if st == "succeeded" and rules[i] in HANDLER_RULES]
    while stack and open_:
        for p in parents[stack.pop()]:
            if p not in seen:
                seen.add(p)
                open_.discard(p)
                stack.append(p)
    return ("failed", sorted(open_)) if open_ else ("succeeded", [])


# -- the planner --------------------------------------------------------------------------


@dataclass
class PlannedTask:
    """One task as :func:`plan` expects it to end."""

    name: str
    rule: str  # as written: a trigger rule, or "finally"
    parents: list[str]
    state: str  # succeeded | failed | skipped | upstream_failed
    runs: bool  # whether its handler would be called
    assumed: bool  # its outcome was given (--assume), not the default "succeeded"
    why: str

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


@dataclass
class Plan:
    """What would happen to a workflow if its tasks ended as assumed."""

    workflow: str
    tasks: list[PlannedTask]
    state: str  # the workflow's result
    unhandled: list[str] = field(default_factory=list)  # failures that fail it
    ignored: list[str] = field(default_factory=list)  # assumed tasks that would not run

    def task(self, name: str) -> PlannedTask:
        for t in self.tasks:
            if t.name == name:
                return t
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "workflow": self.workflow,
            "state": self.state,
            "unhandled": self.unhandled,
            "ignored": self.ignored,
            "tasks": [t.to_dict() for t in self.tasks],
        }


def plan_graph(
    name: str,
    names: Sequence[str],
    parents: Sequence[Sequence[int]],
    rules: Sequence[str],
    assume: Mapping[str, str],
    gate: Callable[[int, Sequence[str]], str | None] | None = None,
    whys: Mapping[int, tuple[str | None, str]] | None = None,
) -> Plan:
    """:func:`engine.spec.definition.plan` on a resolved graph: task names, parent indexes,
    stored rules, and the assumed outcome of some tasks (the others succeed); ``gate``
    and ``whys``: conditions (:func:`engine.spec.conditions.plan_gate`)."""
    index = {t: i for i, t in enumerate(names)}
    forced = {index[t]: o for t, o in assume.items()}
    states = simulate(parents, rules, lambda i: forced.get(i, "succeeded"), gate)
    whys = whys or {}
    result, unhandled = workflow_result(states, parents, rules)
    tasks = []
    ignored = []
    for i, t in enumerate(names):
        ups = [states[p] for p in parents[i]]
        runs = not parents[i] or decide(rules[i], len(ups), *counts(ups)) == RUN
        why = explain(rules[i], ups, None if runs else states[i])
        if i in whys:  # its condition, decided when its rule let it run
            gated, text = whys[i]
            why = f"{why}; {text}"
            runs = runs and gated is None
        if i in forced and not runs:
            ignored.append(t)
        tasks.append(
            PlannedTask(
                name=t,
                rule=rules[i],
                parents=[names[p] for p in parents[i]],
                state=states[i],
                runs=runs,
                assumed=i in forced and runs,
                why=why,
            )
        )
    return Plan(name, tasks, result, [names[i] for i in unhandled], ignored)
