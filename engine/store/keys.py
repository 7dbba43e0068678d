"""The whole Redis key schema of redisflow, in one place.

Every key starts with the namespace (default ``rf``) and ``:`` (``!`` for the sealed keys
below) and carries the hash tag of its *shard*, ``{<namespace>:<shard>}``, so every Lua
script touches the keys of one shard only and a shard can live on one Redis Cluster slot.
One shard is the default.

Per shard ``S`` (``P = <namespace>:{<namespace>:S}``):

============================  ======  =====================================================
key                           type    holds
============================  ======  =====================================================
``P:seq``                     string  last workflow sequence number of this shard
``P:w:<wid>``                 hash    one workflow: meta fields and every task's runtime
                                      fields (see ``codec/fields.py`` for the field names)
``P:d:<digest>``              hash    one workflow definition, shared by every workflow
                                      pushed with the same tasks: each task's static
                                      fields, and ``r``, how many workflows use it; the
                                      payloads of the first run pushed with it (a run
                                      with others keeps them in ``P:w:<wid>``, ``pp``
                                      set here once one does)
``P:q:<type>``                zset    ready tasks of one type, ``<wid>:<idx>``, scored by
                                      priority then workflow age (lowest pops first)
``P:delayed``                 zset    tasks waiting out a retry backoff, scored by due ms;
                                      and ``~<bucket>`` of rate-limit buckets with ready
                                      tasks and no token, scored by their next token ms
``P:rq:<bucket>``             zset    ready tasks of one rate-limit bucket (``<len(type)>:
                                      <type>:<key>``), scored as in ``P:q:<type>``; while
                                      it has tasks, ``~<bucket>`` stands for them in
                                      ``P:q:<type>`` (scored as its head) or ``P:delayed``
``P:rb:<bucket>``             hash    that bucket: ``t`` its theoretical arrival time (us),
                                      ``e`` emission interval (us), ``b`` burst; expires
                                      when it is full again (docs/rate-limits.md)
``P:rl``                      hash    (shard 0) the deployment's rate limits: task type ->
                                      JSON ``{key, limit, per, burst}``
``P:scheduled``               zset    workflows pushed to start later, scored by start ms
``P:timeouts``                zset    ``<wid>:<idx>:<attempt>`` of running attempts of
                                      tasks with a timeout, scored by their deadline ms
``P:deadlines``               zset    workflows with a deadline, scored by it (ms)
``P:all``                     zset    every workflow id, scored by sequence number
``P:ws:<state>``              zset    workflow ids in one state; running/paused scored by
                                      creation ms, finished states by finish ms
``P:wn:<name>``               zset    workflow ids of one name, scored by sequence number
``P:names``                   zset    workflow names, scored by how many workflows exist
``P:stats``                   hash    counters: ``t:<task state>``, ``w:<workflow state>``
                                      (how many are in it now), ``t:pushed``, ``w:pushed``,
                                      ``n:succeeded``, ``n:failed`` (tasks that ever ended
                                      so: they only grow)
``P:types``                   set     every task type ever pushed (queue discovery)
``P:agents``                  hash    agent id -> JSON (types, concurrency, lease, host, pid)
``P:agents:seen``             zset    agent id -> last heartbeat ms (kept after death)
``P:agents:live``             zset    agent id -> lease deadline ms (removed when reaped)
``P:agents:state``            hash    agent id -> online | stopped | dead
``P:agents:drain``            hash    agent id -> ms an operator asked it to drain (its
                                      heartbeat reads it; cleared when it stops)
``P:run:<agent>``             set     ``<wid>:<idx>`` of the tasks the agent is running
``P:events``                  stream  capped lifecycle log, one entry per script call
``P:expand``                  zset    ``<wid>:<i>`` of maps whose items are being expanded,
                                      scored by when it began (housekeeping finishes it)
``P:w:<wid>:in``              string  the workflow's input JSON, when too long to keep in
                                      pieces in its hash (``codec.input_layout``)
``P:w:<wid>:m:<i>``           hash    map i's items: record, element, output, error...
                                      (field names: ``codec/fields.py``)
``P:w:<wid>:l:<i>``           list    map i's elements not started yet, in order
``P:w:<wid>:f:<i>``           set     map i's items in flight (ready or running)
``P:w:<wid>:x:<i>``           set     map i's items that failed
``P:w:<wid>:log``             stream  what its tasks' handlers wrote: one entry per
                                      flush of one attempt, ``k`` task key, ``a`` attempt,
                                      ``n`` task name, ``x`` lines (JSON ``[[ts, source,
                                      text], ...]``); the hash's ``lb`` counts its bytes
``P:w:<wid>:p``               hash    task key -> its latest progress JSON ``{"f": 0.4,
                                      "m": "rows 4,000/10,000", "a": attempt, "t": ts}``
``P:logs``                    hash    ``bytes``: task log bytes kept in this shard (the
                                      budget's measure), ``dropped``: flushes refused
                                      over the budget
``P:hm:<minute>``             hash    history of one minute (epoch s // 60), kept a day:
                                      ``<kind>|<name>|<stat>`` counters, kind ``y`` a
                                      task type (agents flush them), ``t`` a template
                                      (workflow ends); stat ``ok``, ``bad``, ``ms`` (sum
                                      of run ms), ``w`` (sum of queue wait ms), ``b<k>``
                                      (run times in bucket k), ``q<k>`` (waits in k)
``P:hh:<hour>``               hash    the same per hour (epoch s // 3600), kept 8 days
``P:htot``                    hash    the same since the deployment began (never
                                      expires; /metrics' histograms and counters)
``P:pt:<token>``              string  the ids a push call created, for 10 minutes: the
                                      same call sent again returns them, writes nothing
``P:s:<name>``                hash    one schedule (in shard ``crc32(name) % N``, its runs
                                      too): ``spec`` (JSON), ``v`` (its version), ``nt``
                                      next tick ms, ``nx`` its due ms (jitter applied),
                                      ``lt`` last tick, ``cur`` latest run id, ``paused``
                                      "1"/"0", ``pof`` "1" for pause_on_failure, ``ls`` /
                                      ``le`` last run's final state and end ms, counters
                                      ``runs`` ``skipped`` ``missed`` ``buffered``
``P:sdue``                    zset    schedule name -> ``nx`` (absent while paused or
                                      ended): what schedulers wait on; /metrics reads the
                                      schedule lag from it
``P:stk:<name>``              zset    the schedule's ticks fired (or skipped), ms: one run
                                      per tick; the newest 10,000 kept
``P:snames``                  zset    schedule names, scored by creation ms
``P:ik:<key>``                string  the workflow pushed with idempotency key <key>
                                      (deleted with it)
``P:cc``                      hash    gate -> how many workflows run holding it
                                      (concurrency keys: ``c/<workflow>/<value>``;
                                      a schedule's runs: ``s/<schedule>``)
``P:cq:<gate>``               zset    workflows ``queued`` for the gate, scored by id
``P:wt:<template>``           zset    workflow ids run from a template, scored by id
``P:truns``                   hash    template -> how many runs were pushed here
``P:expire``                  zset    finished workflows with a retention of their own
                                      (field ``tl``), scored by when they go (``+inf``:
                                      ``tl`` -1, kept until cleaned up by hand)
``P:hk``                      string  the agent that does this shard's housekeeping, for
                                      a few housekeeping rounds (reap.lua renews it)
``P:lclk``                    string  Redis's clock (ms) at the shard's last register,
                                      heartbeat or housekeeping call: a longer gap than
                                      they leave moves every lease on (lease_clock)
``P:sweep``                   hash    finished state -> the finish time up to which the
                                      deployment's retention has looked
``P:timers``                  zset    ``<wid>:<idx>`` of suspended wait tasks with a
                                      timer (a signal's timeout, a sleep), scored by when
                                      it ends (ms; engine/spec/wait_tasks.py)
``P:spawn``                   zset    ``<wid>:<idx>`` of ``run:`` tasks whose child run is
                                      to start, scored by when a keeper may take it (a
                                      keeper that takes one leases it 30 s)
``P:cends``                   zset    child runs (of this shard) that ended, to report to
                                      their parent task; scored likewise
``P:orphans``                 zset    child runs whose parent ended first (cancelled, past
                                      its deadline): the keeper cancels them
``P:w:<wid>:ch``              hash    a run's child runs: task index -> child run id
``P:w:<wid>:dc``              set     a root run's child runs, every level: the parent
                                      task ``<wid>:<idx>:<attempt>`` that started each,
                                      counted before it starts (``child.lua``, at most
                                      ``max_descendants``); deleted with the root
``P:w:<wid>:sig``             hash    a workflow's signals: ``id:<signal id>`` each id's
                                      first outcome, ``bytes`` the size of its mailboxes
                                      (``q:<name>``: an earlier release's mailbox, one
                                      JSON list, moved to ``sq:<name>`` when touched)
``P:w:<wid>:sq:<name>``       list    its mailbox of signal ``<name>``: those kept for a
                                      wait not reached yet, oldest first, each ``<JSON
                                      record>\n<payload>``; deleted when the run ends
============================  ======  =====================================================

Templates live in shard 0 (``T = <namespace>:{<namespace>:0}``):

============================  ======  =====================================================
``T:tpl:<name>``              hash    a template's versions: ``v`` the latest; per version
                                      n: ``<n>`` the file's text, ``<n>f`` its source,
                                      ``<n>h`` the text's SHA-1, ``<n>t`` put ms
``T:tpls``                    zset    template names, scored by their last put ms
``T:http``                    hash    the HTTP server's counters: ``rejected:<reason>``,
                                      ``accepted:<trigger>``, ``duplicate:<trigger>``
============================  ======  =====================================================

Sealed keys hold what only the operator role may read or change (``redisflow acl`` gives
``~<namespace>!*`` to the operator alone: readers and agents get ``~<namespace>:*``). They
carry shard 0's hash tag, so they share its slot (``S = <namespace>!{<tag of shard 0>}``):

============================  ======  =====================================================
``S:trig:<name>``             hash    a webhook trigger: template, auth scheme, secret,
                                      idempotency header (``store/triggers.py``)
``S:trigs``                   zset    trigger names, scored by creation ms
============================  ======  =====================================================

Before sealed keys, triggers were ``T:trig:<name>`` and ``T:trigs``: such a trigger
refuses every delivery until it is put again (its secret was readable by every role).

The deployment's layout lives beside shard 0, under the fixed tag ``{<namespace>:0}``
(``C = <namespace>:{<namespace>:0}``), written once by the first client that sets it and
read by every client (``engine/store/layout.py``):

============================  ======  =====================================================
``C:layout``                  hash    ``shards``: the shard count and each shard's hash
                                      tag, ``"<n> <tag0> <tag1> ..."``
============================  ======  =====================================================

On a single Redis shard S's tag is ``<namespace>:S``; on a Redis Cluster the first
client picks tags (``<namespace>:S`` or ``<namespace>:S.<k>``) whose slots spread the
shards evenly over the masters, and every client after it reads them.

Channels (pub/sub, fire-and-forget hints): ``P:wake:<type>`` contentless wake-ups for
agents; ``P:ev`` the same JSON event batches that go into the stream; ``P:sched`` a
schedule's name when it is put, paused, unpaused or removed (schedulers wake up).

Workflow ids are decimal integers. Shard ``S`` of ``N`` hands out ``S, S+N, S+2N, ...``
so ``shard = wid % N`` needs no lookup.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from ..errors import NotFoundError

DEFAULT_NAMESPACE = "rf"
# Sealed keys start with the namespace and this (never ':'): ``redisflow acl`` refuses a
# namespace holding it, so one namespace's sealed pattern matches no other's keys.
SEALED = "!"


def bucket_id(task_type: str, key: str) -> str:
    """A rate-limit bucket's name: ``<len(type)>:<type>:<key>`` (unambiguous whatever the
    type and key hold; ``bucket_of`` in lua/lib/rate_limits.lua)."""
    return f"{len(task_type.encode())}:{task_type}:{key}"


@dataclass(frozen=True)
class ShardKeys:
    """Key names of one shard."""

    namespace: str
    shard: int
    tag: str = ""  # the hash tag's text ("" for the default, "<namespace>:<shard>")

    @property
    def hash_tag(self) -> str:
        """The text of the shard's hash tag (what decides its cluster slot): ``ns:S``."""
        return self.tag or f"{self.namespace}:{self.shard}"

    @property
    def prefix(self) -> str:
        """The common prefix, hash tag included: ``ns:{ns:S}``."""
        return f"{self.namespace}:{{{self.hash_tag}}}"

    def workflow(self, wid: int | str) -> str:
        return f"{self.prefix}:w:{wid}"

    def definition(self, digest: str) -> str:
        return f"{self.prefix}:d:{digest}"

    def queue(self, task_type: str) -> str:
        return f"{self.prefix}:q:{task_type}"

    def wake(self, task_type: str) -> str:
        return f"{self.prefix}:wake:{task_type}"

    def by_state(self, state: str) -> str:
        return f"{self.prefix}:ws:{state}"

    def by_name(self, name: str) -> str:
        return f"{self.prefix}:wn:{name}"

    def running_of(self, agent_id: str) -> str:
        return f"{self.prefix}:run:{agent_id}"

    def idem(self, key: str) -> str:
        return f"{self.prefix}:ik:{key}"

    @property
    def gates(self) -> str:
        return f"{self.prefix}:cc"

    def gate_queue(self, gate: str) -> str:
        return f"{self.prefix}:cq:{gate}"

    def by_template(self, template: str) -> str:
        return f"{self.prefix}:wt:{template}"

    @property
    def template_runs(self) -> str:
        return f"{self.prefix}:truns"

    @property
    def expire(self) -> str:
        return f"{self.prefix}:expire"

    @property
    def sweep(self) -> str:
        """Where the deployment's retention has looked up to, per finished state."""
        return f"{self.prefix}:sweep"

    @property
    def timers(self) -> str:
        """Suspended wait tasks' timers (engine/spec/wait_tasks.py)."""
        return f"{self.prefix}:timers"

    @property
    def spawn(self) -> str:
        """``run:`` tasks whose child run is to start (engine/runtime/child_runs.py)."""
        return f"{self.prefix}:spawn"

    @property
    def orphans(self) -> str:
        """Child runs whose parent ended first: to cancel."""
        return f"{self.prefix}:orphans"

    def children(self, wid: int | str) -> str:
        """A run's child runs, by task index."""
        return f"{self.prefix}:w:{wid}:ch"

    def descendants(self, wid: int | str) -> str:
        """A root run's child runs, every level (the parent tasks that started them)."""
        return f"{self.prefix}:w:{wid}:dc"

    def signals(self, wid: int | str) -> str:
        """A workflow's signals kept for waits not reached yet, and signal ids seen."""
        return f"{self.prefix}:w:{wid}:sig"

    def mailbox(self, wid: int | str, name: str) -> str:
        """A workflow's signals ``name`` kept for a wait not reached yet (a list)."""
        return f"{self.prefix}:w:{wid}:sq:{name}"

    def template(self, name: str) -> str:
        """A template's hash (shard 0 holds them)."""
        return f"{self.prefix}:tpl:{name}"

    @property
    def templates(self) -> str:
        return f"{self.prefix}:tpls"

    @property
    def rate_limits(self) -> str:
        """The deployment's rate limits by task type (shard 0 holds them)."""
        return f"{self.prefix}:rl"

    def rate_queue(self, task_type: str, key: str) -> str:
        """The ready tasks of one rate-limit bucket (k_rate_queue)."""
        return f"{self.prefix}:rq:{bucket_id(task_type, key)}"

    def bucket(self, task_type: str, key: str) -> str:
        """One rate-limit bucket's state (k_bucket)."""
        return f"{self.prefix}:rb:{bucket_id(task_type, key)}"

    def workflow_input(self, wid: int | str) -> str:
        """The key of a workflow's input too long for pieces in its hash (k_input)."""
        return f"{self.workflow(wid)}:in"

    # A map c's keys beside its workflow hash (k_items, k_pending, k_flying, k_failed in
    # lib/keys.lua).

    def map_items(self, wid: int | str, c: int | str) -> str:
        return f"{self.workflow(wid)}:m:{c}"

    def map_pending(self, wid: int | str, c: int | str) -> str:
        return f"{self.workflow(wid)}:l:{c}"

    def map_flying(self, wid: int | str, c: int | str) -> str:
        return f"{self.workflow(wid)}:f:{c}"

    def map_failed(self, wid: int | str, c: int | str) -> str:
        return f"{self.workflow(wid)}:x:{c}"

    # Task logs and progress beside the workflow hash, deleted with it (k_logs,
    # k_progress in lib/keys.lua); the shard's log budget; history buckets.

    def task_logs(self, wid: int | str) -> str:
        return f"{self.workflow(wid)}:log"

    def progress(self, wid: int | str) -> str:
        return f"{self.workflow(wid)}:p"

    @property
    def logs_budget(self) -> str:
        return f"{self.prefix}:logs"

    def history_minute(self, minute: int) -> str:
        return f"{self.prefix}:hm:{minute}"

    def history_hour(self, hour: int) -> str:
        return f"{self.prefix}:hh:{hour}"

    @property
    def history_total(self) -> str:
        return f"{self.prefix}:htot"

    # Schedules (engine/store/schedules.py; k_schedule, k_sticks in lib/keys.lua).

    def schedule(self, name: str) -> str:
        return f"{self.prefix}:s:{name}"

    def schedule_ticks(self, name: str) -> str:
        return f"{self.prefix}:stk:{name}"

    @property
    def schedules_due(self) -> str:
        """Schedule name -> next due ms (schedulers wait on it; /metrics reads the lag)."""
        return f"{self.prefix}:sdue"

    @property
    def schedule_names(self) -> str:
        return f"{self.prefix}:snames"

    @property
    def schedule_channel(self) -> str:
        return f"{self.prefix}:sched"

    @property
    def seq(self) -> str:
        return f"{self.prefix}:seq"

    @property
    def delayed(self) -> str:
        return f"{self.prefix}:delayed"

    @property
    def scheduled(self) -> str:
        return f"{self.prefix}:scheduled"

    @property
    def timeouts(self) -> str:
        return f"{self.prefix}:timeouts"

    @property
    def deadlines(self) -> str:
        return f"{self.prefix}:deadlines"

    @property
    def expanding(self) -> str:
        return f"{self.prefix}:expand"

    @property
    def all(self) -> str:
        return f"{self.prefix}:all"

    @property
    def names(self) -> str:
        return f"{self.prefix}:names"

    @property
    def stats(self) -> str:
        return f"{self.prefix}:stats"

    @property
    def types(self) -> str:
        return f"{self.prefix}:types"

    @property
    def agents(self) -> str:
        return f"{self.prefix}:agents"

    @property
    def agents_seen(self) -> str:
        return f"{self.prefix}:agents:seen"

    @property
    def agents_live(self) -> str:
        return f"{self.prefix}:agents:live"

    @property
    def agents_state(self) -> str:
        return f"{self.prefix}:agents:state"

    @property
    def agents_drain(self) -> str:
        return f"{self.prefix}:agents:drain"

    @property
    def events(self) -> str:
        return f"{self.prefix}:events"

    @property
    def event_channel(self) -> str:
        return f"{self.prefix}:ev"

    # -- http: webhook triggers and the HTTP server's counters live in shard 0 ----------

    @property
    def sealed_prefix(self) -> str:
        """The prefix of keys only the operator role may touch: ``ns!{ns:S}`` (outside the
        ``~ns:*`` that readers and agents get; same hash tag, so the same slot)."""
        return f"{self.namespace}{SEALED}{{{self.hash_tag}}}"

    def trigger(self, name: str) -> str:
        """A trigger's hash: sealed, as its secret and scheme are the operator's alone."""
        return f"{self.sealed_prefix}:trig:{name}"

    @property
    def triggers(self) -> str:
        return f"{self.sealed_prefix}:trigs"

    def legacy_trigger(self, name: str) -> str:
        """Where a trigger was stored before sealed keys (refused until put again)."""
        return f"{self.prefix}:trig:{name}"

    @property
    def legacy_triggers(self) -> str:
        return f"{self.prefix}:trigs"

    @property
    def http_counters(self) -> str:
        return f"{self.prefix}:http"


@dataclass(frozen=True)
class Keyspace:
    """Key names of a whole deployment: a namespace over ``shards`` shards."""

    namespace: str = DEFAULT_NAMESPACE
    shards: int = 1
    tags: tuple[str, ...] = ()  # each shard's hash tag, when not the default

    def shard(self, index: int) -> ShardKeys:
        """Keys of shard ``index``."""
        return ShardKeys(self.namespace, index, self.tags[index] if self.tags else "")

    @property
    def layout(self) -> str:
        """The hash holding the deployment's shard count and tags (fixed tag of shard 0)."""
        return f"{ShardKeys(self.namespace, 0).prefix}:layout"

    def shard_for(self, route: str) -> int:
        """The shard of everything routed by ``route`` (an idempotency key, a gate, a
        schedule's name): the same on every client."""
        return zlib.crc32(route.encode()) % self.shards

    def shard_of(self, wid: int | str) -> ShardKeys:
        """Keys of the shard that holds workflow ``wid``.

        Raises :class:`~engine.NotFoundError` for an id that is not a whole number (no
        workflow can have it).
        """
        try:
            number = int(wid)
        except (TypeError, ValueError):
            raise NotFoundError(
                f"workflow {wid!r} does not exist (workflow ids are whole numbers)"
            ) from None
        return self.shard(number % self.shards)

    def shard_of_schedule(self, name: str) -> ShardKeys:
        """Keys of the shard that holds schedule ``name`` (and its runs)."""
        return self.shard(self.shard_for(name))

    def all_shards(self) -> list[ShardKeys]:
        return [self.shard(i) for i in range(self.shards)]

    @property
    def pattern(self) -> str:
        """A SCAN pattern matching every key of this namespace but the sealed ones."""
        return f"{self.namespace}:*"
