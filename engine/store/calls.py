"""One typed function per Lua script: builds its KEYS and ARGV, runs it, decodes the reply.

Every script takes the shard prefix and the event stream's cap first (``_lib.lua``);
refusals come back as the engine's exceptions (:func:`~.scripts.script_error`). Calls an
agent sends together in one round trip are built as :class:`~.scripts.Call` objects and
run in a :class:`~.scripts.ScriptBatch`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from ..handlers import Task
from .codec import CompiledWorkflow, decode_claim_row
from .keys import Keyspace, ShardKeys
from .scripts import Call, ScriptBatch, Scripts

# An outcome an agent reports: wid, idx, attempt (the fencing token), "ok"|"err", value
# (output JSON, "" for none; or the error text).
Outcome = tuple[str, int, int, str, str]


def _rows(reply: Any) -> list[Task]:
    return [decode_claim_row(r) for r in reply]


def _ints(reply: Any) -> list[int]:
    return [int(x) for x in reply]


def _int(reply: Any) -> int:
    return int(reply)


def _ids(reply: Any) -> list[str]:
    return [str(i) for i in reply]


class Calls:
    """The scripts of one deployment (a keyspace on one Redis)."""

    def __init__(self, client: redis.Redis, keys: Keyspace, event_cap: int) -> None:
        self.redis = client
        self.keys = keys
        self.event_cap = event_cap
        self.scripts = Scripts(client)

    def _common(self, shard: ShardKeys) -> list[Any]:
        return [shard.prefix, self.event_cap]

    def batch(self) -> ScriptBatch:
        """Several calls in one round trip."""
        return self.scripts.batch()

    # -- pushing --------------------------------------------------------------------------

    def push_call(self, shard: ShardKeys, batch: Sequence[CompiledWorkflow]) -> Call[list[str]]:
        """push.lua: store ``batch`` in ``shard``; its reply is the new workflow ids."""
        numbers: dict[str, int] = {}
        defs: list[Any] = []
        rows: list[Any] = []
        for c in batch:
            n = numbers.get(c.digest)
            if n is None:
                n = numbers[c.digest] = len(numbers) + 1
                defs.extend(c.definition)
            rows += (n, c.name)
        args = [*self._common(shard), self.keys.shards, shard.shard, len(numbers), *defs]
        args += [len(batch), *rows]
        return Call("push", [shard.seq], args, _ids)

    # -- steering one workflow ------------------------------------------------------------

    def _control(self, name: str, wid: str | int, *extra: Any) -> int:
        shard = self.keys.shard_of(wid)
        args = [*self._common(shard), str(wid), *extra]
        return self.scripts.run(Call(name, [shard.workflow(wid)], args, _int))

    def pause(self, wid: str | int) -> int:
        """pause.lua: how many ready tasks were held back."""
        return self._control("pause", wid)

    def release(self, wid: str | int) -> int:
        """release.lua: how many held tasks went back to the queues."""
        return self._control("release", wid)

    def cancel(self, wid: str | int) -> int:
        """cancel.lua: how many tasks were cancelled."""
        return self._control("cancel", wid)

    def retry(self, wid: str | int, indexes: Sequence[int] = ()) -> int:
        """retry.lua: how many tasks were reset (all failed ones without ``indexes``)."""
        return self._control("retry", wid, *indexes)

    def cleanup(self, wid: str | int) -> None:
        """cleanup.lua: delete a finished workflow."""
        self._control("cleanup", wid)

    # -- agents ---------------------------------------------------------------------------

    def register(self, shard: ShardKeys, agent: str, info: str, lease_ms: int) -> list[Task]:
        """register.lua: the agent is online; returns the tasks it takes back."""
        args = [*self._common(shard), agent, info, lease_ms]
        return self.scripts.run(Call("register", [shard.agents], args, _rows))

    def claim_call(
        self, shard: ShardKeys, agent: str, types: Sequence[str], count: int
    ) -> Call[list[Task]]:
        """claim.lua: up to ``count`` tasks over ``types`` (the best by priority, then age);
        refused with :class:`~engine.LeaseLostError` when the agent holds no lease."""
        args = [*self._common(shard), agent, count]
        return Call("claim", [shard.queue(t) for t in types], args, _rows)

    def complete_call(
        self, shard: ShardKeys, agent: str, outcomes: Sequence[Outcome]
    ) -> Call[list[int]]:
        """complete.lua: per outcome 1 (recorded) or 0 (rejected by the fencing token)."""
        args: list[Any] = [*self._common(shard), agent, len(outcomes)]
        for wid, idx, attempt, how, value in outcomes:
            args += [wid, idx, attempt, how, value]
        return Call("complete", [shard.stats], args, _ints)

    def heartbeat(self, shard: ShardKeys, agent: str, lease_ms: int) -> bool:
        """heartbeat.lua: False when the lease had expired (the agent must register)."""
        args = [*self._common(shard), agent, lease_ms]
        return bool(self.scripts.run(Call("heartbeat", [shard.agents_live], args, _int)))

    def stop(self, shard: ShardKeys, agent: str, unstarted: Sequence[Task] = ()) -> None:
        """stop.lua: the agent leaves; ``unstarted`` tasks go back without an attempt."""
        args: list[Any] = [*self._common(shard), agent]
        for t in unstarted:
            args += (f"{t.workflow_id}:{t.index}", t.attempt)
        self.scripts.run(Call("stop", [shard.agents_live], args, _int))

    def reap(self, shard: ShardKeys, retention_ms: int, max_lost: int, limit: int) -> list[int]:
        """reap.lua: {agents reaped, tasks requeued, retries promoted, workflows cleaned}."""
        args = [*self._common(shard), retention_ms, max_lost, limit]
        return self.scripts.run(Call("reap", [shard.agents_live], args, _ints))
