"""Workflows by creation time, found without a time index of their own.

The indexes ordered by workflow sequence (``P:all``, ``P:wn:<name>``, ``P:wt:<template>``)
are ordered by creation time too: a shard hands out sequence numbers in the order its
pushes run, and each push stamps its workflow's ``ct`` with Redis's clock then. So the
ranks of the workflows created in ``[after, before)`` are found by searching the index,
reading the ``ct`` of a few members per step: :data:`PROBES` evenly spaced ranks a step,
two round trips (their ids, then their ``ct``), so a shard of a million workflows takes
four steps. Nothing is stored per workflow for it.

Should the server's clock step back between two pushes, workflows pushed around the step
can be placed a little out of their time order: a window edge then lands near, not at,
the exact workflow.
"""

from __future__ import annotations

from typing import cast

import redis

from .codec import F_CREATED
from .keys import ShardKeys

PROBES = 32  # ranks read per search step


def first_at(client: redis.Redis, shard: ShardKeys, index: str, at_ms: int) -> int:
    """The rank of the first workflow of sequence-ordered ``index`` (of ``shard``)
    created at or after ``at_ms``; the index's size when there is none."""
    lo, hi = 0, int(client.zcard(index))
    while hi - lo > PROBES:
        step = (hi - lo) / (PROBES + 1)
        ranks = sorted({lo + int(step * j) for j in range(1, PROBES + 1)})
        pipe = client.pipeline(transaction=False)
        for r in ranks:
            pipe.zrange(index, r, r)
        wids = [got[0] if got else "" for got in pipe.execute()]
        new_lo, new_hi = lo, hi
        for r, ct in zip(ranks, _created(client, shard, wids), strict=True):
            if ct is None:
                continue  # cleaned up meanwhile: its neighbours decide
            if ct < at_ms:
                new_lo = r + 1
            else:
                new_hi = r
                break
        if (new_lo, new_hi) == (lo, hi):  # every probe gone: read the window whole
            break
        lo, hi = new_lo, new_hi
    return _scan(client, shard, index, lo, hi, at_ms)


def _created(client: redis.Redis, shard: ShardKeys, wids: list[str]) -> list[int | None]:
    """The creation ms of each workflow (None: it no longer exists)."""
    pipe = client.pipeline(transaction=False)
    for wid in wids:
        pipe.hget(shard.workflow(wid), F_CREATED)
    return [None if ct is None else int(ct) for ct in pipe.execute()]


def _scan(client: redis.Redis, shard: ShardKeys, index: str, lo: int, hi: int, at: int) -> int:
    """:func:`first_at` by reading ranks ``lo..hi-1`` in slices."""
    while lo < hi:
        wids = cast("list[str]", client.zrange(index, lo, min(hi, lo + 500) - 1))
        if not wids:
            return lo
        for n, ct in enumerate(_created(client, shard, wids)):
            if ct is not None and ct >= at:
                return lo + n
        lo += len(wids)
    return hi


def window(
    client: redis.Redis,
    shard: ShardKeys,
    index: str,
    after_ms: int | None,
    before_ms: int | None,
) -> tuple[int, int]:
    """The ranks ``[start, end)`` of ``index``'s workflows created at or after
    ``after_ms`` and before ``before_ms`` (either may be None: no bound)."""
    start = 0 if after_ms is None else first_at(client, shard, index, after_ms)
    if before_ms is None:
        end = int(client.zcard(index))
    else:
        end = first_at(client, shard, index, before_ms)
    return start, max(start, end)
