"""Whether an agent could still get work: what ``Agent.run(until_idle=True)`` waits on.

An agent is idle for good when nothing it serves can come from the work it sees: its
queues are empty, and no running or paused workflow has a task of its types that has not
ended (waiting for its parents, ready, running elsewhere or held for a retry), counting
a map's items and their steps by the types they run. A workflow's tasks of those types
are found from its definition (read once per definition: definitions never change) and
their records read in one round trip per page of workflows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import redis

from engine.core.model import TERMINAL_TASK_STATES

from .codec import D_STEPS, D_TYPE, F_COUNT, F_DIGEST, parse_record, step_prefix
from .keys import ShardKeys

PAGE = 500  # workflows read per round trip
LIVE_STATES = ("running", "paused")
_TYPED = re.compile(rf"^(\d+){D_TYPE}$")
_ENDED = frozenset(str(s) for s in TERMINAL_TASK_STATES)


class IdleCheck:
    """Finds whether work of some types could still come in a shard (see the module)."""

    def __init__(self, client: redis.Redis, cache_size: int = 256) -> None:
        self.redis = client
        self.cache_size = cache_size
        self._tasks: dict[tuple[str, frozenset[str]], list[str]] = {}

    def could_come(self, shard: ShardKeys, types: Iterable[str]) -> bool:
        """True when a running or paused workflow of ``shard`` has a task of ``types``
        (an item or a step of one included) that has not ended."""
        wanted = frozenset(types)
        for state in LIVE_STATES:
            # ZSCAN: a workflow in the state all along is seen, whatever ends meanwhile
            page: list[str] = []
            for wid, _ in self.redis.zscan_iter(shard.by_state(state), count=PAGE):
                page.append(str(wid))
                if len(page) == PAGE:
                    if self._page_could_come(shard, page, wanted):
                        return True
                    page = []
            if page and self._page_could_come(shard, page, wanted):
                return True
        return False

    def _page_could_come(self, shard: ShardKeys, wids: list[str], types: frozenset[str]) -> bool:
        pipe = self.redis.pipeline(transaction=False)
        for wid in wids:
            pipe.hmget(shard.workflow(wid), [F_DIGEST, F_COUNT])
        heads = pipe.execute()
        pipe = self.redis.pipeline(transaction=False)
        asked = 0
        for wid, (digest, count) in zip(wids, heads, strict=True):
            if digest is None:
                continue  # gone meanwhile
            tasks = self._typed_tasks(shard, str(digest), int(count or 0), types)
            if tasks:
                pipe.hmget(shard.workflow(wid), tasks)
                asked += 1
        if not asked:
            return False
        for records in pipe.execute():
            for record in records:
                if parse_record(record)[0] not in _ENDED:
                    return True
        return False

    def _typed_tasks(
        self, shard: ShardKeys, digest: str, count: int, types: frozenset[str]
    ) -> list[str]:
        """The indexes of the definition's tasks that run (or whose items run) a type of
        ``types``."""
        key = (f"{shard.prefix}|{digest}", types)
        found = self._tasks.get(key)
        if found is not None:
            return found
        fields: dict[Any, Any] = self.redis.hgetall(shard.definition(digest))
        typed = {int(m.group(1)): str(v) for f, v in fields.items() if (m := _TYPED.match(str(f)))}
        found = []
        for i in range(count):
            run = {typed.get(i, "")}
            steps = int(fields.get(f"{i}{D_STEPS}") or 0)
            run.update(str(fields.get(f"{step_prefix(i, s)}{D_TYPE}", "")) for s in range(steps))
            if run & types:
                found.append(str(i))
        if len(self._tasks) >= self.cache_size:
            self._tasks.clear()
        self._tasks[key] = found
        return found
