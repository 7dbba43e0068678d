"""A workflow hash merged with its definition, as a status or a summary.

Read by :mod:`engine.store.reads`; the hash's fields are :mod:`.fields`'.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.core.model import (
    TaskState,
    TaskStatus,
    WorkflowState,
    WorkflowStatus,
    WorkflowSummary,
    decode_json,
)
from engine.core.rules import DEFAULT_RULE

from .fields import (
    D_NAME,
    D_WHEN,
    F_CREATED,
    F_DEPTH,
    F_DUE,
    F_PARENT,
    F_REASON,
    F_ROOT,
    F_START_AT,
    F_TEMPLATE,
    SUMMARY_FIELDS,
    T_WHY,
    TASK_FIELDS,
)
from .input import stored_input
from .record import parse_record
from .waits import signal_status, wait_status


def parse_summary(wid: str, row: Sequence[Any]) -> WorkflowSummary:
    """A summary from the :data:`SUMMARY_FIELDS` of a workflow hash, in that order."""
    name, st, n, ok, bad, skip, ct, fd, uf, ft = row
    finished = int(ct) + int(fd) if fd else (int(ft) if ft else None)
    return WorkflowSummary(
        id=str(wid),
        name=name,
        state=WorkflowState(st),
        total=int(n),
        succeeded=int(ok or 0),
        failed=int(bad or 0),
        skipped=int(skip or 0),
        created_at=int(ct) / 1000.0,
        finished_at=None if finished is None else finished / 1000.0,
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
    for i, row in enumerate(rows):
        rec, _, typ, payload, pri, most, kids, ups, rule, limit, delay, f, o, e, w, sg, u = row
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
                when=raw.get(f"{i}{D_WHEN}"),
                skip_reason=raw.get(f"{i}{T_WHY}"),
                wait=wait_status(w, ct, q, st) if w else None,
                signal=signal_status(sg) if sg else None,
                child=u,
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
        parent=raw.get(F_PARENT),
        depth=int(raw.get(F_DEPTH) or 0),
        root=raw.get(F_ROOT),
        template=raw.get(F_TEMPLATE),
    )
