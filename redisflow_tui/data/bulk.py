"""Bulk actions in words: the confirmation (exactly how many) and the outcome (how many
acted on, how many refused and why), over :mod:`engine.bulk`.

Like :mod:`.actions`, each function runs in a worker thread. The ids are chosen when the
confirmation is prepared, and exactly those are acted on once it is confirmed.
"""

from __future__ import annotations

from collections import Counter

from engine import Engine, bulk, plural

from .actions import Action

VERBS = {
    "retry": ("Retry", "retried", "their failed tasks run again, inputs unchanged"),
    "cancel": ("Cancel", "cancelled", "tasks not yet started are cancelled"),
    "pause": ("Pause", "paused", "ready tasks are held back"),
    "release": ("Release", "released", "held tasks go back to the queues"),
    "cleanup": (
        "Clean up",
        "cleaned up",
        "deleted with everything kept of them; this cannot be undone",
    ),
}
MOST_REASONS = 3


def plan_bulk(
    engine: Engine,
    action: str,
    ids: list[str] | None = None,
    flt: bulk.Filter | None = None,
    described: str = "",
) -> Action:
    """Prepare ``action`` over ``ids`` (marked rows) or over what ``flt`` matches now
    (``described``: the filter in words, e.g. ``failed workflows named "etl"``)."""
    bulk.check_action(action)
    verb, _, effect = VERBS[action]
    if ids is not None:
        chosen = bulk.Selection(list(dict.fromkeys(ids)), len(set(ids)))
        what = f"{plural(len(chosen.ids), 'marked workflow')}"
    else:
        chosen = bulk.select(engine, flt or bulk.Filter())
        what = f"{plural(len(chosen.ids), 'workflow')} ({described or 'all workflows'})"
    n = len(chosen.ids)
    body = (
        f"{what[0].upper()}{what[1:]}: {effect}. Each workflow is acted on by itself; one "
        "not in a state this applies to is refused and counted, with why."
    )
    if chosen.more:
        body += f" {chosen.more:,} more match beyond the {n:,} newest: act again for them."
    if n == 0:
        body = f"No workflow matches ({described or 'all workflows'}): nothing to do."
    ids_now = list(chosen.ids)

    def run(e: Engine) -> str:
        if not ids_now:
            return f"No workflow matches ({described or 'all workflows'}): nothing done"
        return outcome(bulk.apply(e, action, ids_now))

    return Action(
        f"{verb} {plural(n, 'workflow')}?", body, f"{verb} {n:,}", run, confirm=n > 0
    )  # fmt: skip


def outcome(report: bulk.Report) -> str:
    """``Retried 10 of 12 workflows; 2 refused: workflow 7 is running; ... (×2)``."""
    _, done, _ = VERBS[report.action]
    total = len(report.acted) + len(report.refused)
    text = f"{done.capitalize()} {len(report.acted):,} of {plural(total, 'workflow')}"
    if not report.refused:
        return text
    reasons = Counter(_general(why) for why in report.refused.values())
    shown = "; ".join(
        f"{why} (×{n})" if n > 1 else why for why, n in reasons.most_common(MOST_REASONS)
    )
    more = len(reasons) - MOST_REASONS
    return f"{text}; {len(report.refused):,} refused: {shown}" + (
        f"; and {more} other reasons" if more > 0 else ""
    )


def _general(reason: str) -> str:
    """A refusal without its workflow's id, so that alike ones group:
    ``workflow 7 is running; ...`` → ``running; ...``."""
    head, _, rest = reason.partition(" is ")
    if head.startswith("workflow ") and rest:
        return rest
    return reason
