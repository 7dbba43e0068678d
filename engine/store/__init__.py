"""The only code that talks to Redis.

* :mod:`.keys` — every key name;
* :mod:`.codec` — every format shared with the Lua scripts (fields, the task record,
  reply rows, event tuples, the definition as ``push.lua`` takes it);
* :mod:`.scripts` and ``lua/`` — the state transitions and how they are run;
* :mod:`.calls` — one typed function per script;
* :mod:`.reads` — every plain read.

:class:`Store` is both, for one deployment (a namespace over its shards on one Redis).
"""

from __future__ import annotations

import redis

from .calls import Calls, Outcome
from .keys import DEFAULT_NAMESPACE, Keyspace, ShardKeys
from .logs import LogStore
from .rate_limits import RateLimits  # noqa: E402
from .reads import Reads
from .schedules import ScheduleStore
from .templates import Templates  # noqa: E402


class Store(Calls, Reads, ScheduleStore, LogStore):
    """Script calls and reads of one deployment."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keyspace,
        event_cap: int,
        wait_replicas: int = 0,
        wait_timeout_ms: int = 1000,
    ) -> None:
        Calls.__init__(self, client, keys, event_cap, wait_replicas, wait_timeout_ms)
        Reads.__init__(self, client, keys)
        self.templates = Templates(client, keys, self.scripts, event_cap)
        self.rate_limits = RateLimits(client, keys)


__all__ = ["DEFAULT_NAMESPACE", "Keyspace", "Outcome", "ShardKeys", "Store"]
