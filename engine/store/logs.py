"""Task logs, progress and history in Redis: the agent's two scripts (``tasklog.lua``,
``rollup.lua``) and the plain reads of what they wrote (keys: :mod:`.keys`)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any, cast

import redis

from engine.store.blocking import block_slice_ms

from .keys import Keyspace, ShardKeys
from .scripts import Call

# One entry of a tasklog call: wid, task key, attempt, task name, lines JSON ("" for
# none), progress JSON ("" for none).
LogEntry = tuple[str, str, int, str, str, str]
# One entry of the log stream: its id and its fields (k, a, n, x).
StreamEntry = tuple[str, dict[str, str]]


def _int(reply: Any) -> int:
    return int(reply)


class Logs:
    """Calls and reads of task logs, progress and history: the ``logs`` part of
    :class:`~engine.store.Store`."""

    def __init__(self, client: redis.Redis, keys: Keyspace, event_cap: int):
        self.redis = client
        self.keys = keys
        self.event_cap = event_cap

    def tasklog_call(self, shard: ShardKeys, entries: Sequence[LogEntry], budget: int) -> Call[int]:
        """tasklog.lua: keep ``entries`` (those of workflows that still exist; lines
        over the shard's ``budget`` bytes refused, 0: none); how many were kept."""
        args: list[Any] = [shard.prefix, self.event_cap, budget, len(entries)]
        for entry in entries:
            args += entry
        return Call("tasklog", [shard.logs_budget], args, _int)

    def rollup_call(self, minutes: dict[int, dict[str, int]]) -> Call[int]:
        """rollup.lua: add each minute's counters to its minute and hour hashes (shard 0)."""
        shard = self.keys.shard(0)
        args: list[Any] = [shard.prefix, self.event_cap, len(minutes)]
        for minute, fields in sorted(minutes.items()):
            args += [minute, len(fields)]
            for f, n in fields.items():
                args += [f, n]
        first = min(minutes) if minutes else 0
        return Call("rollup", [shard.history_minute(first)], args, _int)

    def log_entries(self, wid: str | int, after: str = "-", count: int = 1000) -> list[StreamEntry]:
        """Entries of workflow ``wid``'s task log after id ``after`` (``-``: from the
        first), at most ``count``."""
        key = self.keys.shard_of(wid).task_logs(wid)
        start = "-" if after in ("-", "0", "") else f"({after}"
        rows = self.redis.xrange(key, start, "+", count=count)
        return [(str(i), cast("dict[str, str]", f)) for i, f in cast("list[Any]", rows)]

    def wait_log_entries(
        self, wid: str | int, after: str, block_ms: int, count: int = 1000
    ) -> list[StreamEntry]:
        """Entries after id ``after`` (``$``: from now; ``-``: from the first), waiting up
        to ``block_ms`` for one when there is none (in slices shorter than the client's
        read timeout)."""
        key = self.keys.shard_of(wid).task_logs(wid)
        if after == "$":  # pinned now: a slice must not skip what comes between two
            last = cast("list[Any]", self.redis.xrevrange(key, count=1))
            after = str(last[0][0]) if last else "0-0"
        elif after in ("-", "0", ""):
            after = "0-0"
        slice_ms = block_slice_ms(self.redis)
        deadline = time.monotonic() + block_ms / 1000
        while True:
            left_ms = max(1, math.ceil((deadline - time.monotonic()) * 1000))
            reply = self.redis.xread({key: after}, count=count, block=min(left_ms, slice_ms))
            if reply or left_ms <= slice_ms:
                break
        out: list[StreamEntry] = []
        for _, rows in cast("list[Any]", reply or []):
            out += [(str(i), cast("dict[str, str]", f)) for i, f in rows]
        return out

    def progress_of(self, wid: str | int) -> dict[str, str]:
        """Task key -> its latest progress JSON, for workflow ``wid``."""
        key = self.keys.shard_of(wid).progress(wid)
        return cast("dict[str, str]", self.redis.hgetall(key))

    def log_usage(self) -> tuple[int, int]:
        """Task log bytes kept and flushes refused over the budget, over every shard."""
        pipe = self.redis.pipeline(transaction=False)
        for shard in self.keys.all_shards():
            pipe.hmget(shard.logs_budget, ["bytes", "dropped"])
        kept = dropped = 0
        for b, d in pipe.execute():
            kept += int(b or 0)
            dropped += int(d or 0)
        return kept, dropped

    def history_totals(self) -> dict[str, int]:
        """The history counters since the deployment began, summed over the shards."""
        pipe = self.redis.pipeline(transaction=False)
        for shard in self.keys.all_shards():
            pipe.hgetall(shard.history_total)
        out: dict[str, int] = {}
        for raw in pipe.execute():
            for f, v in raw.items():
                out[f] = out.get(f, 0) + int(v)
        return out

    def history_buckets(self, hours: bool, first: int, last: int) -> list[dict[str, str]]:
        """The history hashes of minutes (or ``hours``) ``first`` to ``last``, summed
        over the shards, oldest first (one dict per bucket; empty where none)."""
        pipe = self.redis.pipeline(transaction=False)
        shards = self.keys.all_shards()
        for b in range(first, last + 1):
            for shard in shards:
                pipe.hgetall(shard.history_hour(b) if hours else shard.history_minute(b))
        replies = pipe.execute()
        out: list[dict[str, str]] = []
        for k in range(last - first + 1):
            merged: dict[str, int] = {}
            for raw in replies[k * len(shards) : (k + 1) * len(shards)]:
                for f, v in raw.items():
                    merged[f] = merged.get(f, 0) + int(v)
            out.append({f: str(v) for f, v in merged.items()})
        return out
