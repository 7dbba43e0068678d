"""One typed function per Lua script: builds its KEYS and ARGV, runs it, decodes the reply.

Every script takes the shard prefix and the event stream's cap first (``lib/keys.lua``);
refusals come back as the engine's exceptions (:func:`~.scripts.script_error`). Calls an
agent sends together in one round trip are built as :class:`~.scripts.Call` objects and
run in a :class:`~.scripts.ScriptBatch`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import redis

from engine.core.model import decode_json
from engine.core.task import Task
from engine.spec.mapping import DEFAULT_MAX_ITEMS, MapSpec, items_of

from ..errors import NotReplicatedError
from .clock import now_ms
from .codec import (
    D_MAP,
    D_MAX_ITEMS,
    D_NAME,
    F_DIGEST,
    F_STATE,
    M_STORED,
    M_TOTAL,
    T_OUTPUT,
    CompiledWorkflow,
    decode_claim_rows,
)
from .keys import Keyspace, ShardKeys
from .scripts import Call, Scripts


class Outcome(NamedTuple):
    """An outcome an agent reports (a tuple: complete.lua's arguments in this order)."""

    workflow_id: str
    task_key: str  # Task.key: "3", or "3.17" for an item
    attempt: int  # the fencing token
    kind: str  # "ok", "err", or an error kind (engine.core.outcomes: fatal, abort, skip)
    value: str  # output JSON ("" for none), or the error


def _rows(reply: Any) -> list[Task]:
    return decode_claim_rows(reply)


class Claimed(list[Task]):
    """claim.lua's tasks; ``next_at_ms``: when a rate limit's bucket of the agent's types ran
    out of tokens with tasks left, the earliest epoch ms (Redis's clock) one gets its next
    token, and ``now_ms`` the claim's own time (else both None)."""

    next_at_ms: int | None = None
    now_ms: int | None = None

    @property
    def token_in_s(self) -> float | None:
        """Seconds from the claim until that next token (None: no bucket ran out)."""
        if self.next_at_ms is None or self.now_ms is None:
            return None
        return max(0.0, (self.next_at_ms - self.now_ms) / 1000)


def _claimed(reply: Any) -> Claimed:
    return ClaimRows(reply).tasks()


class ClaimRows:
    """claim.lua's reply as it came, decoded by :meth:`tasks` when an agent is ready to
    run them: once the outcomes of its previous claim are gone. A claim's worth of tasks
    and outcomes alive at once (256 of each) cost the agent a garbage collection per
    claim, whose survivors went on to the slow full collections."""

    __slots__ = ("now_ms", "reply")

    def __init__(self, reply: list[Any]) -> None:
        self.reply = reply
        # when a bucket ran out of tokens: when its next one exists, and the claim's time
        self.now_ms: int | None = reply[1] if reply[0] else None

    def tasks(self) -> Claimed:
        """The claimed tasks, decoded (:class:`Claimed`)."""
        out = Claimed()
        if self.now_ms is not None:
            out.next_at_ms, out.now_ms = self.reply[0], self.now_ms
        out.extend(decode_claim_rows(self.reply, 2))
        return out


@dataclass
class Reported:
    """complete.lua's reply: per outcome 1 (recorded) or 0 (rejected by the fencing
    token), and the maps that became ready, ``(wid, task index)``, to expand now."""

    codes: list[int]
    expand: list[tuple[str, str]]


def _reported(reply: Any) -> Reported:
    codes, maps = reply
    return Reported([int(x) for x in codes], [tuple(m.split(":", 1)) for m in maps])


@dataclass
class TimedOut:
    """An attempt past its task's timeout, as reap.lua finds it."""

    wid: str
    idx: str
    attempt: int
    agent: str
    timeout_ms: int


def _reaped(reply: Any) -> tuple[list[int], list[TimedOut]] | None:
    if len(reply) == 1:  # another agent looks after this shard
        return None
    *counts, late = reply
    return [int(x) for x in counts], [
        TimedOut(str(w), str(i), int(a), str(g), int(t)) for w, i, a, g, t in late
    ]


def late_error(timeout_s: float | None) -> str:
    """The error of an attempt that ran past its task's timeout (as housekeeping or its
    own agent reports it: the same words either way)."""
    return f"timed out after {_seconds(round((timeout_s or 0) * 1000))} (the task's timeout)"


def _seconds(ms: int) -> str:
    """``30s``, ``1.5s``, ``5m``: a timeout as users write it."""
    s = ms / 1000
    if s >= 60 and s % 60 == 0:
        return f"{s / 60:.0f}m"
    return f"{s:g}s"


def _int(reply: Any) -> int:
    return int(reply)


def _encode_item(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _pair(reply: Any) -> tuple[str, str]:
    return str(reply[0]), str(reply[1])


@dataclass
class WaitsPass:
    """waits.lua's reply: wait tasks activated, timers fired, ms until the next timer
    (None for none), and whether a limit was reached (call again at once)."""

    activated: int
    fired: int
    next_in_ms: int | None
    more: bool
    spawns: list[str]  # "wid:i:attempt" of run: tasks whose child is to start
    ends: list[str]  # child runs that ended, to report to their parent task
    orphans: list[str]  # child runs whose parent ended first, to cancel


def _waits_pass(reply: Any) -> WaitsPass:
    a, f, due, more = (int(x) for x in reply[:4])
    spawns, ends, orphans = ([str(x) for x in part] for part in reply[4:7])
    return WaitsPass(a, f, None if due < 0 else due, bool(more), spawns, ends, orphans)


def _ids(reply: Any) -> list[str]:
    return [str(i) for i in reply]


class Calls:
    """The scripts of one deployment (a keyspace on one Redis): the ``calls`` part of
    :class:`~engine.store.Store`, run through its ``scripts``."""

    def __init__(self, client: redis.Redis, keys: Keyspace, scripts: Scripts, event_cap: int):
        self.redis = client
        self.keys = keys
        self.scripts = scripts
        self.event_cap = event_cap

    def _common(self, shard: ShardKeys) -> list[Any]:
        return [shard.prefix, self.event_cap]

    # -- pushing --------------------------------------------------------------------------

    def push_call(
        self,
        shard: ShardKeys,
        batch: Sequence[tuple[CompiledWorkflow, str] | tuple[CompiledWorkflow, str, str]],
        token: str = "",
        who: str = "",
        later_ms: int = 0,
    ) -> Call[list[str]]:
        """push.lua: store ``batch`` (each a definition, an input as
        :func:`~.codec.encode_input` gives it, and maybe the options JSON of
        :func:`~.codec.run_options`) in ``shard``; its reply is the ids (``"=<id>"`` for a
        workflow whose idempotency key named one already: nothing was pushed for it).

        A call sent again with the same ``token`` (its reply was lost) returns the first
        call's ids and writes nothing; ``who`` is recorded in the pushed events. With
        ``later_ms`` the workflows are scheduled to start that long after now (Redis's
        clock).
        """
        args = [*self._common(shard), token, *self.push_argv(shard, batch, who, later_ms)]
        return Call("push", [shard.seq], args, _ids)

    def push_argv(
        self,
        shard: ShardKeys,
        batch: Sequence[tuple[CompiledWorkflow, str] | tuple[CompiledWorkflow, str, str]],
        who: str = "",
        later_ms: int = 0,
    ) -> list[Any]:
        """The arguments push.lua takes from ``ARGV[4]`` on (who, shard count, shard,
        delay, definitions, workflows): what any script that pushes (push_workflows in
        lib/push.lua) is given after its own."""
        numbers: dict[tuple[str, str], int] = {}
        digests: set[str] = set()
        defs: list[Any] = []
        rows: list[Any] = []
        for entry in batch:
            c, given = entry[0], entry[1]
            same = (c.digest, c.payload_sig)  # one entry per definition and payloads
            n = numbers.get(same)
            if n is None:
                n = numbers[same] = len(numbers) + 1
                if c.digest in digests:  # stored by an earlier entry: its payloads alone
                    lo, hi = c.static_span
                    defs += c.definition[:lo]
                    defs.append(0)
                    defs += c.definition[hi:]
                else:
                    digests.add(c.digest)
                    defs.extend(c.definition)
            rows += (n, c.name, given, entry[2] if len(entry) > 2 else "")
        args: list[Any] = [who, self.keys.shards, shard.shard, later_ms, len(numbers), *defs]
        args += [len(batch), *rows]
        return args

    # -- steering one workflow ------------------------------------------------------------

    # Each records ``who`` asked in its event (user@host, see Engine.actor).

    def _control(self, name: str, wid: str | int, who: str, *extra: Any) -> int:
        shard = self.keys.shard_of(wid)
        args = [*self._common(shard), str(wid), who, *extra]
        return self.scripts.run(Call(name, [shard.workflow(wid)], args, _int))

    def pause(self, wid: str | int, who: str = "") -> int:
        """pause.lua: how many ready tasks were held back."""
        return self._control("pause", wid, who)

    def release(self, wid: str | int, who: str = "") -> int:
        """release.lua: how many held tasks went back to the queues."""
        return self._control("release", wid, who)

    def cancel(self, wid: str | int, who: str = "") -> int:
        """cancel.lua: how many tasks were cancelled."""
        return self._control("cancel", wid, who)

    def retry(self, wid: str | int, indexes: Sequence[int | str] = (), who: str = "") -> int:
        """retry.lua: how many tasks were reset (all failed ones without ``indexes``; an
        index ``"c.k"`` is item k of map c)."""
        return self._control("retry", wid, who, *indexes)

    def cleanup(self, wid: str | int, who: str = "") -> None:
        """cleanup.lua: delete a finished workflow."""
        self._control("cleanup", wid, who)

    def expire(self, wid: str | int, ttl_ms: int, who: str = "") -> int:
        """expire.lua: set a workflow's own retention (``-1``: until cleaned up by hand);
        returns when a finished one goes (ms), -1 never, 0 counted from its end."""
        return self._control("expire", wid, who, ttl_ms)

    # -- waits ----------------------------------------------------------------------------

    def signal(
        self,
        wid: str | int,
        name: str,
        payload: str,
        signal_id: str = "",
        who: str = "",
        reject: bool = False,
        comment: str = "",
        kept_bytes: int = 0,
        identity: str = "",
    ) -> tuple[str, str]:
        """signal.lua: (outcome, task name): ``delivered``, ``kept`` or
        ``duplicate:<first outcome>``. ``who`` is the sender as it says, ``identity`` as
        authenticated; a signal kept would not take the run's mailboxes past
        ``kept_bytes``."""
        shard = self.keys.shard_of(wid)
        args = [*self._common(shard), str(wid), name, payload, signal_id, who]
        args += ["reject" if reject else "ok", comment, kept_bytes, identity]
        return self.scripts.run(Call("signal", [shard.workflow(wid)], args, _pair))

    def waits(self, shard: ShardKeys, limit: int = 500, acks: Sequence[str] = ()) -> WaitsPass:
        """waits.lua: wait tasks just reached are suspended, due timers end theirs; the
        child runs to start, to report and to cancel are handed out (``acks``: those
        done since, ``e:<wid>`` reported, ``o:<wid>`` cancelled)."""
        args = [*self._common(shard), limit, *acks]
        return self.scripts.run(Call("waits", [shard.timers], args, _waits_pass))

    def child_link(self, wid: str | int, idx: str, attempt: int, child: str) -> str:
        """child.lua: task ``idx``'s child run started ("ok", or "stale": the task moved
        on, cancel the child)."""
        return self._child(wid, idx, attempt, "link", child, child)

    def child_end(
        self, wid: str | int, idx: str, attempt: int, how: str, value: str, child: str = ""
    ) -> str:
        """child.lua: the child of task ``idx`` ended ``how`` (succeeded: ``value`` its
        result JSON; failed, fatal: why)."""
        return self._child(wid, idx, attempt, how, value, child)

    def child_count(self, root: str, member: str, most: int) -> str:
        """child.lua: count the child run that parent task ``member`` (``wid:idx:attempt``)
        is about to start under root run ``root``, once per member: "ok"; "over" when
        ``most`` are counted already (nothing counted); "gone" when the root is gone."""
        shard = self.keys.shard_of(root)
        args = [*self._common(shard), root, member, "", "count", str(most)]
        return self.scripts.run(Call("child", [shard.workflow(root)], args, str))

    def _child(self, wid: str | int, idx: str, attempt: int, *rest: str) -> str:
        shard = self.keys.shard_of(wid)
        args = [*self._common(shard), str(wid), idx, attempt, *rest]
        return self.scripts.run(Call("child", [shard.workflow(wid)], args, str))

    def children_of(self, wid: str | int) -> list[str]:
        """The child runs of run ``wid``, by task order."""
        shard = self.keys.shard_of(wid)
        links: dict[str, str] = self.redis.hgetall(shard.children(wid))  # type: ignore[assignment]
        return [v for _, v in sorted(links.items(), key=lambda kv: int(kv[0]))]

    # -- agents ---------------------------------------------------------------------------

    def register(
        self, shard: ShardKeys, agent: str, info: str, lease_ms: int, first: bool = False
    ) -> list[Task]:
        """register.lua: the agent is online; returns the tasks it takes back. ``first``
        (its start): refused with :class:`~engine.errors.EarlierReleaseError` while agents
        of an earlier release are live."""
        args = [*self._common(shard), agent, info, lease_ms, 1 if first else 0]
        return self.scripts.run(Call("register", [shard.agents], args, _rows))

    def claim_call(
        self, shard: ShardKeys, agent: str, types: Sequence[str], count: int
    ) -> Call[Claimed]:
        """claim.lua: up to ``count`` tasks over ``types`` (the best by priority, then age);
        refused with :class:`~engine.LeaseLostError` when the agent holds no lease. A rate
        limit's bucket out of tokens says when its next one comes (:class:`Claimed`)."""
        rows = self.claim_rows_call(shard, agent, types, count)
        return Call(rows.name, rows.keys, rows.args, _claimed)

    def claim_rows_call(
        self, shard: ShardKeys, agent: str, types: Sequence[str], count: int
    ) -> Call[ClaimRows]:
        """:meth:`claim_call`, its reply left to decode when the tasks run (an agent's)."""
        args = [*self._common(shard), agent, count]
        return Call("claim", [shard.queue(t) for t in types], args, ClaimRows)

    def complete_call(
        self, shard: ShardKeys, agent: str, outcomes: Sequence[Outcome]
    ) -> Call[Reported]:
        """complete.lua: what was recorded, and the maps to expand (:class:`Reported`)."""
        args: list[Any] = [*self._common(shard), agent, len(outcomes)]
        for wid, idx, attempt, how, value in outcomes:
            args += [wid, idx, attempt, how, value]
        return Call("complete", [shard.stats], args, _reported)

    def heartbeat(self, shard: ShardKeys, agent: str, lease_ms: int) -> int:
        """heartbeat.lua: 0 (false) when the lease had expired (the agent must register),
        2 when an operator asked the agent to drain (:meth:`drain`), else 1."""
        args = [*self._common(shard), agent, lease_ms]
        return int(self.scripts.run(Call("heartbeat", [shard.agents_live], args, _int)))

    def drain(self, shard: ShardKeys, agent: str) -> int:
        """drain.lua: ask a live agent to drain (1); 0 known but not live, -1 unknown."""
        args = [*self._common(shard), agent]
        return int(self.scripts.run(Call("drain", [shard.agents_live], args, _int)))

    def stop(self, shard: ShardKeys, agent: str, unstarted: Sequence[Task] = ()) -> None:
        """stop.lua: the agent leaves; ``unstarted`` tasks go back without an attempt."""
        args: list[Any] = [*self._common(shard), agent]
        for t in unstarted:
            args += (f"{t.workflow_id}:{t.index}", t.attempt)
        self.scripts.run(Call("stop", [shard.agents_live], args, _int))

    def reap(
        self,
        shard: ShardKeys,
        retention_ms: int,
        max_lost: int,
        limit: int,
        keeper: str = "",
        hold_ms: int = 0,
        lease_ms: int = 0,
    ) -> tuple[list[int], list[TimedOut]] | None:
        """reap.lua: {agents reaped, tasks requeued, retries promoted, workflows cleaned},
        and the attempts past their timeout, which :meth:`time_out` then fails. With a
        ``keeper`` (an agent id) the shard's housekeeping is that agent's for ``hold_ms``;
        None when another agent holds it. ``lease_ms``: the keeper's lease (how long a
        gap between calls shows a stalled Redis: lease_clock in lib/lease.lua)."""
        args = [*self._common(shard), retention_ms, max_lost, limit, keeper, hold_ms, lease_ms]
        return self.scripts.run(Call("reap", [shard.agents_live], args, _reaped))

    def sweep(
        self,
        shards: Sequence[ShardKeys],
        retention_ms: int,
        limit: int,
        keeper: str = "",
        hold_ms: int = 0,
        lease_ms: int = 0,
        budget_s: float = 0.05,
    ) -> tuple[int, list[ShardKeys]]:
        """reap.lua's retention step alone on ``shards`` (those whose housekeeping batch
        came back full; the other arguments as :meth:`reap`'s): at most ``limit``
        removals per shard and call, every shard's call in one round trip (a cluster's
        masters work at once), again while a batch comes back full and ``budget_s`` has
        not passed. Each call holds Redis briefly, and a backlog goes at the pace the
        budget allows. Returns how many finished workflows were removed, and the shards
        still behind (their last batch full). A shard another agent than ``keeper`` looks
        after is left to it. Raises :class:`NotReplicatedError` after the last round
        when a call was not acknowledged by enough replicas."""
        deadline = time.monotonic() + budget_s
        behind, removed = list(shards), 0
        short: NotReplicatedError | None = None
        while behind and time.monotonic() < deadline:
            batch = self.scripts.batch()
            for shard in behind:
                args = [*self._common(shard), retention_ms, 0, limit, keeper, hold_ms, lease_ms]
                batch.add(Call("reap", [shard.agents_live], [*args, 1], _reaped))
            try:
                replies = batch.execute()
            except NotReplicatedError as e:
                replies, short = e.results, short or e
            counts: list[int] = []
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
                counts.append(-1 if reply is None else reply[0][3])  # None: another's
            removed += sum(max(0, n) for n in counts)
            behind = [shard for shard, n in zip(behind, counts, strict=True) if n >= limit]
        if short is not None:
            raise short
        return removed, behind

    def time_out(self, shard: ShardKeys, late: Sequence[TimedOut]) -> int:
        """Fail attempts past their timeout as their agents would report them (complete.lua
        as each agent: retried per max_attempts, or failed); how many were recorded (one
        its agent reported meanwhile is not)."""
        by_agent: dict[str, list[Outcome]] = {}
        for t in late:
            error = late_error(t.timeout_ms / 1000)
            by_agent.setdefault(t.agent, []).append(Outcome(t.wid, t.idx, t.attempt, "err", error))
        recorded = 0
        short: list[NotReplicatedError] = []
        for agent, outcomes in by_agent.items():
            reported = self.scripts.run(self.complete_call(shard, agent, outcomes), short)
            recorded += sum(reported.codes)
            for wid, c in reported.expand:
                self._expand(wid, c, short)
        if short:
            raise short[0]
        return recorded

    # -- maps -----------------------------------------------------------------------------

    EXPAND_SLICE = 1000  # elements per expand.lua call: each call's work stays bounded

    def expand(self, wid: str, c: str) -> None:
        """Expand map ``c`` of workflow ``wid`` from its parent's output: its elements go
        to expand.lua in slices (each call bounded; a slice sent twice changes nothing, so
        several agents may do this at once), or the map fails with the reason its
        parent's output cannot be mapped. The parent's output is decoded here, never in
        Lua."""
        short: list[NotReplicatedError] = []
        self._expand(wid, c, short)
        if short:  # every slice was sent: the first shortfall is said once
            raise short[0]

    def _expand(self, wid: str, c: str, short: list[NotReplicatedError]) -> None:
        shard = self.keys.shard_of(wid)
        key = shard.workflow(wid)
        st, digest, stored, total = self.redis.hmget(
            key, [F_STATE, F_DIGEST, f"{c}{M_STORED}", f"{c}{M_TOTAL}"]
        )
        if st is None or total is not None or digest is None:
            return
        spec_text, name, most = self.redis.hmget(
            shard.definition(str(digest)), [f"{c}{D_MAP}", f"{c}{D_NAME}", f"{c}{D_MAX_ITEMS}"]
        )
        if spec_text is None:
            return
        over, _, key_name = str(spec_text).partition("|")
        over_name = self.redis.hget(shard.definition(str(digest)), f"{over}{D_NAME}")
        output = decode_json(cast("str | None", self.redis.hget(key, f"{over}{T_OUTPUT}")))
        spec = MapSpec(str(over_name), key_name or None)
        limit = int(most or DEFAULT_MAX_ITEMS)
        items = items_of(output, spec, str(over_name), limit)
        if isinstance(items, str):
            self._expand_call(shard, wid, c, 0, -1, [items], short)
            return
        at = int(stored or 0)
        if not items:
            self._expand_call(shard, wid, c, 0, 0, [], short)
            return
        encode = _encode_item
        while at < len(items):
            part = [encode(x) for x in items[at : at + self.EXPAND_SLICE]]
            now = self._expand_call(shard, wid, c, at, len(items), part, short)
            if now != at + len(part):
                return  # done by someone else, or the map is no longer waiting for items
            at = now

    def _expand_call(
        self,
        shard: ShardKeys,
        wid: str,
        c: str,
        at: int,
        total: int,
        part: list[str],
        short: list[NotReplicatedError],
    ) -> int:
        args = [*self._common(shard), wid, c, at, total, *part]
        return self.scripts.run(Call("expand", [shard.workflow(wid)], args, _int), short)

    def expand_due(self, shard: ShardKeys, older_than_ms: int = 0, limit: int = 20) -> int:
        """Expand the maps of ``shard`` waiting for their items (an agent that was doing it
        died): housekeeping. Returns how many were looked at."""
        before = now_ms(self.redis) - older_than_ms
        due = self.redis.zrangebyscore(shard.expanding, "-inf", before, 0, limit)
        short: list[NotReplicatedError] = []
        for member in due:
            wid, _, c = str(member).partition(":")
            self._expand(wid, c, short)
        if short:
            raise short[0]
        return len(due)
