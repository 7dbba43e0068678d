"""The only code that talks to Redis.

* :mod:`.keys` — every key name;
* :mod:`.codec` — every format shared with the Lua scripts (fields, the task record,
  reply rows, event tuples, the definition as ``push.lua`` takes it);
* :mod:`.scripts` and ``lua/`` — the state transitions and how they are run;
* :mod:`.calls` — one typed function per script;
* :mod:`.reads` — every plain read.

:class:`Store` holds them, for one deployment (a namespace over its shards on one Redis).
"""

from __future__ import annotations

import redis

from . import clock
from .calls import Calls, Outcome
from .keys import DEFAULT_NAMESPACE, Keyspace, ShardKeys
from .logs import Logs
from .rate_limits import RateLimits
from .reads import Reads
from .schedules import Schedules
from .scripts import Scripts
from .templates import Templates


class Store:
    """Script calls and reads of one deployment, in named parts: ``store.<part>.<name>``
    says which file defines ``<name>``.

    Parts:
        calls: :class:`~.calls.Calls` (``calls.py``), one typed function per script:
            push, steering, claim, complete, leases, housekeeping, maps, waits, children.
        reads: :class:`~.reads.Reads` (``reads.py``), every plain read (status, lists,
            counters, agents, the event stream) and pub/sub subscriptions.
        schedules: :class:`~.schedules.Schedules` (``schedules.py``), schedule.lua,
            tick.lua and the schedules' reads.
        logs: :class:`~.logs.Logs` (``logs.py``), task logs, progress and history.
        templates: :class:`~.templates.Templates` (``templates.py``), named, versioned
            workflow files.
        rate_limits: :class:`~.rate_limits.RateLimits` (``rate_limits.py``), the rate
            limits by task type.

    Shared by the parts, and kept here (each part is handed those it uses):
        redis: the client; keys: the :class:`~.keys.Keyspace`; scripts: the
        :class:`~.scripts.Scripts` every call runs through (``scripts.batch()``: several
        calls in one round trip); event_cap: the event stream's cap, every script's
        second argument; :meth:`now_ms` and :meth:`server_time`: Redis's clock
        (:mod:`.clock`).
    """

    def __init__(
        self,
        client: redis.Redis,
        keys: Keyspace,
        event_cap: int,
        wait_replicas: int = 0,
        wait_timeout_ms: int = 1000,
    ) -> None:
        self.redis = client
        self.keys = keys
        self.event_cap = event_cap
        self.scripts = Scripts(client, wait_replicas, wait_timeout_ms)
        self.calls = Calls(client, keys, self.scripts, event_cap)
        self.reads = Reads(client, keys)
        self.schedules = Schedules(client, keys, self.scripts, event_cap)
        self.logs = Logs(client, keys, event_cap)
        self.templates = Templates(client, keys, self.scripts, event_cap)
        self.rate_limits = RateLimits(client, keys)

    def now_ms(self) -> int:
        """Redis's clock in ms."""
        return clock.now_ms(self.redis)

    def server_time(self) -> float:
        """Redis's clock, in epoch seconds (scripts timestamp with it too)."""
        return clock.server_time(self.redis)


__all__ = ["DEFAULT_NAMESPACE", "Keyspace", "Outcome", "ShardKeys", "Store"]
