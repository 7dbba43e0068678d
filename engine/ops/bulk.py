"""Steering many workflows at once: a filter (as ``redisflow list`` takes it) or a list of
ids, one action, and a report of exactly which workflows were acted on and which were
refused, and why.

Each workflow is steered by its own atomic script (the same call as steering it alone):
a bulk action is not one transaction. The ids are selected first (:func:`select`), so a
confirmation can say how many, and then exactly those are acted on (:func:`apply`); a
workflow whose state changed in between is refused with the reason its script gave.

    >>> chosen = select(engine, Filter(template="nightly", state="failed"))
    >>> report = apply(engine, "retry", chosen.ids)
    >>> report.acted, report.refused
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engine.core.model import WorkflowState
from engine.errors import DefinitionError, NotFoundError, StateError

if TYPE_CHECKING:
    from engine.client import Engine

ACTIONS = ("retry", "cancel", "pause", "release", "cleanup")
MAX_SELECTED = 10_000  # the most workflows one bulk action selects by filter
_PAGE = 1_000


@dataclass(frozen=True)
class Filter:
    """Which workflows: the filters of ``redisflow list`` (all optional, combined)."""

    state: str | None = None
    name: str | None = None
    template: str | None = None
    created_after: float | datetime | None = None
    created_before: float | datetime | None = None

    def __post_init__(self) -> None:
        states = {s.value for s in WorkflowState}
        if self.state is not None and self.state not in states:
            raise DefinitionError(f"state {self.state!r} is not one of {', '.join(states)}")

    def empty(self) -> bool:
        """Whether the filter matches every workflow."""
        return all(
            v is None
            for v in (
                self.state, self.name, self.template, self.created_after, self.created_before
            )
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """The filter's given fields (for JSON answers)."""
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class Selection:
    """The ids a filter matched (newest first), and how many matched in all."""

    ids: list[str]
    matched: int

    @property
    def more(self) -> int:
        """How many matched beyond those selected (past the limit)."""
        return max(0, self.matched - len(self.ids))


@dataclass
class Report:
    """What one bulk action did: per workflow, acted on (with the action's count: tasks
    reset, held, released or cancelled) or refused (with the reason)."""

    action: str
    acted: dict[str, int] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "acted": [{"id": wid, "count": n} for wid, n in self.acted.items()],
            "refused": [{"id": wid, "reason": why} for wid, why in self.refused.items()],
        }


def check_action(action: str) -> str:
    """``action`` if it is one of :data:`ACTIONS`, else a :class:`DefinitionError`."""
    if action not in ACTIONS:
        raise DefinitionError(f"no bulk action {action[:40]!r}: one of {', '.join(ACTIONS)}")
    return action


def select(engine: Engine, flt: Filter, limit: int = MAX_SELECTED) -> Selection:
    """The ids of the workflows ``flt`` matches now, newest first, at most ``limit``."""
    if not 0 < limit <= MAX_SELECTED:
        raise DefinitionError(f"a bulk limit is 1 to {MAX_SELECTED}, not {limit}")
    ids: list[str] = []
    while len(ids) < limit:
        want = min(_PAGE, limit - len(ids))
        page = engine.list_ids(
            flt.state, flt.name, len(ids), want, flt.template,
            created_after=flt.created_after, created_before=flt.created_before,
        )  # fmt: skip
        ids += page
        if len(page) < want:
            break
    ids = list(dict.fromkeys(ids))  # a page boundary moved by a new workflow: seen once
    matched = len(ids) if len(ids) < limit else max(len(ids), _count(engine, flt))
    return Selection(ids, matched)


def check_known(engine: Engine, flt: Filter) -> None:
    """Raise :class:`NotFoundError` when ``flt`` names a template or a workflow name that
    nothing known has (no template of that name nor any run of one kept; no workflow of
    that name kept): a typo, not a filter that happens to match nothing now. Meant for a
    selection that came back empty (two reads at most)."""
    if flt.template is not None and not _template_known(engine, flt.template):
        raise NotFoundError(
            f"template {flt.template!r} matches nothing known: no template has that name "
            "and no run of one is kept"
        )
    if flt.name is not None and not engine.count(name=flt.name):
        raise NotFoundError(
            f"name {flt.name!r} matches nothing known: no workflow of that name is kept"
        )


def _template_known(engine: Engine, name: str) -> bool:
    if engine.count(template=name):
        return True
    try:
        engine.template(name)
    except NotFoundError:
        return False
    return True


def _count(engine: Engine, flt: Filter) -> int:
    return engine.count(
        flt.state, flt.name, flt.template, flt.created_after, flt.created_before
    )  # fmt: skip


def apply(
    engine: Engine, action: str, ids: Iterable[str], tasks: Sequence[str] | None = None
) -> Report:
    """Steer each workflow of ``ids`` with ``action``, each by its own atomic call; a
    refusal (not in a state the action applies to, not found, a task name it lacks) is
    recorded with its reason and the others go on. ``tasks``: with ``retry``, only
    these failed tasks. Errors of Redis itself are raised (those before stand)."""
    check_action(action)
    report = Report(action)
    for wid in dict.fromkeys(ids):
        try:
            if action == "retry":
                n: int | None = engine.retry(wid, tasks)
            elif action == "cleanup":
                n = engine.cleanup(wid)  # type: ignore[func-returns-value]
            else:
                n = getattr(engine, action)(wid)
        except (StateError, NotFoundError, DefinitionError) as e:
            report.refused[wid] = str(e)
            continue
        report.acted[wid] = n or 0
    return report
