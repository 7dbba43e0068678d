"""Reads of a deployment's state: every plain (non-script) Redis read the engine makes.

Replies come back decoded into the engine's records (:mod:`engine.core.model`); the formats
are :mod:`.codec`'s. Definitions never change, so they are cached between reads.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeAlias, cast

import redis
from redis.typing import KeyT, StreamIdT

from engine.core.model import (
    ITEM_STATES,
    AgentInfo,
    AgentState,
    Event,
    ItemStatus,
    Stats,
    TaskState,
    WorkflowState,
    WorkflowStatus,
    WorkflowSummary,
    decode_json,
)
from engine.store.blocking import block_slice_ms

from ..errors import NotFoundError
from . import by_time
from .channels import ShardedPubSub
from .clock import server_time
from .codec import (
    BATCH_FIELD,
    D_MAP,
    D_NAME,
    D_PAYLOAD,
    D_RATE,
    D_RUN_NAME,
    D_STEPS,
    D_USERS,
    F_COUNT,
    F_CREATED,
    F_DIGEST,
    F_INPUT,
    F_NAME,
    F_RATE_KEYS,
    F_STATE,
    I_ELEMENT,
    INPUT_OWN_KEY,
    M_BAD,
    M_CANCELLED,
    M_OK,
    M_STARTED,
    M_STORED,
    M_TOTAL,
    SUMMARY_FIELDS,
    T_ERROR,
    T_FAILURES,
    T_OUTPUT,
    decode_batch,
    iter_stream,
    parse_record,
    parse_status,
    parse_summary,
    step_field,
    step_prefix,
)
from .idle import IdleCheck
from .keys import Keyspace, ShardKeys, bucket_id
from .layout import has_sharded_pubsub, is_cluster

BIG_HASH = 4096  # fields: a bigger hash is read in HSCAN slices of this many
DEFINITION_CACHE = 400_000  # definition fields status() keeps between reads
NAME_CACHE = 50_000  # workflows whose definition name_tasks remembers
FINISHED_STATES = ("succeeded", "failed", "cancelled")
ITEM_SCAN = 1000  # item records read per round trip when a state filter walks a map
# A map's runtime counters in its workflow hash, as map_counts reads them.
MAP_COUNTERS = (M_STORED, M_TOTAL, M_STARTED, M_OK, M_BAD, M_CANCELLED)

# The engine's clients decode replies (``decode_responses=True``), so every string Redis
# returns is ``str``; redis-py's annotations also allow ``bytes``, hence the casts below.
_Entries: TypeAlias = list[tuple[str, dict[str, str]]]
_Scored: TypeAlias = list[tuple[str, float]]


class Reads:
    """Reads of one deployment (a keyspace on one Redis): the ``reads`` part of
    :class:`~engine.store.Store`."""

    def __init__(self, client: redis.Redis, keys: Keyspace) -> None:
        self.redis = client
        self.keys = keys
        self._def_of: dict[str, tuple[str, int]] = {}  # wid -> (digest, task count)
        self._names_of: dict[str, list[str]] = {}  # digest -> task names
        # digest -> (fields but the tasks' payloads, the payloads' names), oldest first
        self._definitions: dict[str, tuple[dict[str, str], list[str]]] = {}
        self._definition_fields = 0
        self._lock = threading.Lock()
        self._sharded: bool | None = None
        self._idle: IdleCheck | None = None  # made when an agent first looks

    def task_names(self, wid: str | int) -> list[str]:
        return self._names(wid)[1]

    def maps_among(self, wid: str | int, indexes: Iterable[int]) -> set[int]:
        """Which of the tasks ``indexes`` of workflow ``wid`` are maps."""
        dkey, _ = self._definition_of(wid)
        wanted = sorted(set(indexes))
        if not wanted:
            return set()
        got = self.redis.hmget(dkey, [f"{c}{D_MAP}" for c in wanted])
        return {c for c, v in zip(wanted, got, strict=True) if v is not None}

    def _definition_of(self, wid: str | int) -> tuple[str, int]:
        """The definition key of workflow ``wid`` and its task count."""
        shard = self.keys.shard_of(wid)
        n, digest = cast(
            "list[str | None]", self.redis.hmget(shard.workflow(wid), [F_COUNT, F_DIGEST])
        )
        if n is None:
            raise NotFoundError(f"workflow {wid} does not exist")
        return shard.definition(str(digest)), int(n)

    def _names(self, wid: str | int) -> tuple[str, list[str]]:
        """The definition key of workflow ``wid`` and its task names."""
        dkey, n = self._definition_of(wid)
        fields = [f"{i}{D_NAME}" for i in range(n)]
        return dkey, list(cast("list[str]", self.redis.hmget(dkey, fields)))

    def status(self, wid: str | int) -> WorkflowStatus:
        """Everything stored of one workflow: state, counts by task state, every task.

        A small workflow is read atomically (HGETALL). A big one (over
        :data:`BIG_HASH` fields) is read in HSCAN slices so Redis never stalls on one
        command; its task states may then be a few milliseconds apart. Definitions never
        change, so theirs is read once and kept (up to :data:`DEFINITION_CACHE` fields).
        """
        shard = self.keys.shard_of(wid)
        key = shard.workflow(wid)
        pipe = self.redis.pipeline(transaction=False)
        pipe.hlen(key)
        pipe.hget(key, F_DIGEST)
        size, digest = pipe.execute()
        if not size:
            raise NotFoundError(f"workflow {wid} does not exist")
        raw = self._read_hash(key, size)
        own_input = None
        if raw.get(F_INPUT) == INPUT_OWN_KEY:  # an input too long for the hash
            own_input = cast("str | None", self.redis.get(shard.workflow_input(wid)))
            if own_input is None:  # cleaned up meanwhile
                raw = {}
        if not raw:  # cleaned up meanwhile
            raise NotFoundError(f"workflow {wid} does not exist")
        dkey = shard.definition(digest)
        known = self._definitions.get(digest)
        if known is not None:
            # its payloads read again: a definition cleaned up and stored anew under the
            # same digest holds its new first run's (payloads are not part of a digest)
            definition = {**known[0], **self._payloads(dkey, known[1])}
        else:
            fields = int(self.redis.hlen(dkey))
            definition = self._read_hash(dkey, fields)
            if not definition:  # cleaned up between the reads
                raise NotFoundError(f"workflow {wid} does not exist")
            whole = len(definition) == fields  # a slice-by-slice read the cleanup cut short
            definition.pop(D_USERS, None)  # how many use it: changes, and no part of a status
            if whole:
                self._remember_definition(digest, definition)
        status = parse_status(str(wid), {**definition, **raw}, own_input)
        maps = [t.index for t in status.tasks if f"{t.index}{D_MAP}" in definition]
        for c, items in zip(maps, self._map_counts(shard, str(wid), maps), strict=True):
            status.tasks[c].items = items
        if "+" in digest and D_RATE in digest.rsplit("+", 1)[1]:
            self._throttled(shard, status, definition, raw)
        return status

    def _throttled(
        self,
        shard: ShardKeys,
        status: WorkflowStatus,
        definition: dict[str, str],
        raw: dict[str, str],
    ) -> None:
        """Each rate-limited task's bucket key, and for a ready one whose bucket waits for
        its next token (``~<bucket>`` in P:delayed), when that comes."""
        own = json.loads(raw.get(F_RATE_KEYS) or "{}")
        ready = []
        for t in status.tasks:
            spec = definition.get(f"{t.index}{D_RATE}")
            if spec is None:
                continue
            key = spec.split("|", 2)[2]
            t.rate_key = key[1:] if key.startswith("=") else own.get(str(t.index), "")
            if t.state == "ready":
                ready.append(t)
        if not ready:
            return
        pipe = self.redis.pipeline(transaction=False)
        for t in ready:
            pipe.zscore(shard.delayed, "~" + bucket_id(t.type, t.rate_key or ""))
        for t, at in zip(ready, pipe.execute(), strict=True):
            t.throttled_until = None if at is None else at / 1000

    # -- maps -------------------------------------------------------------------------

    def _map_counts(
        self, shard: ShardKeys, wid: str, maps: list[int]
    ) -> list[dict[str, int]]:
        """Items by state of each map in ``maps``: its counters and in-flight set read
        together, then the records of the items in flight (at most a window each)."""
        if not maps:
            return []
        key = shard.workflow(wid)
        pipe = self.redis.pipeline(transaction=True)
        for c in maps:
            pipe.hmget(key, [f"{c}{f}" for f in MAP_COUNTERS])
            pipe.smembers(shard.map_flying(wid, c))
        replies = pipe.execute()
        pipe = self.redis.pipeline(transaction=False)
        flying = [sorted(cast("set[str]", s), key=int) for s in replies[1::2]]
        for c, ks in zip(maps, flying, strict=True):
            pipe.hmget(shard.map_items(wid, c), ks or ["-"])
        out = []
        for counters, ks, records in zip(replies[::2], flying, pipe.execute(), strict=True):
            h, n, x, ok, bad, cancelled = (None if v is None else int(v) for v in counters)
            items = dict.fromkeys(ITEM_STATES, 0)
            items.update(
                waiting=(h or 0) - (x or 0),
                succeeded=ok or 0,
                failed=bad or 0,
                cancelled=cancelled or 0,
            )
            for rec in records[: len(ks)]:
                st = parse_record(rec)[0]
                # ended since the counters were read: it was running then
                items["running" if st in ("succeeded", "failed") else st] += 1
            if n is not None:
                items["total"] = n
            out.append(items)
        return out

    def _map(self, wid: str | int, name: str) -> tuple[ShardKeys, int]:
        """The shard of workflow ``wid`` and the index of its map ``name``."""
        dkey, names = self._names(wid)
        if name not in names:
            raise NotFoundError(f"workflow {wid} has no task named {name!r}")
        c = names.index(name)
        if not self.redis.hexists(dkey, f"{c}{D_MAP}"):
            raise NotFoundError(f"task {name!r} of workflow {wid} is not a map")
        return self.keys.shard_of(wid), c

    def items(
        self,
        wid: str | int,
        name: str,
        offset: int = 0,
        limit: int = 50,
        state: str | None = None,
    ) -> list[ItemStatus]:
        """A page of map ``name``'s items in item order, optionally only those in ``state``.

        Without a state a page costs one read; ``failed`` reads the failed set, ``ready``
        and ``running`` the in-flight set (a window at most); other states walk the
        items' records from the first, :data:`ITEM_SCAN` at a time.
        """
        shard, c = self._map(wid, name)
        key, wid = shard.workflow(wid), str(wid)
        rec, stored, total = cast(
            "list[str | None]",
            self.redis.hmget(key, [str(c), f"{c}{M_STORED}", f"{c}{M_TOTAL}"]),
        )
        size = int(total if total is not None else stored or 0)
        cancelled = parse_record(rec)[0] == "cancelled"
        if state is None:
            ks = list(range(offset, min(size, offset + limit)))
        elif state == "failed":
            failed = cast("set[str]", self.redis.smembers(shard.map_failed(wid, c)))
            ks = sorted(map(int, failed))[offset : offset + limit]
        else:
            state = TaskState(state).value
            candidates: Iterable[list[int]]
            if state in ("ready", "running"):
                flying = cast("set[str]", self.redis.smembers(shard.map_flying(wid, c)))
                candidates = [sorted(map(int, flying))]
            else:
                candidates = (
                    list(range(at, min(size, at + ITEM_SCAN))) for at in range(0, size, ITEM_SCAN)
                )
            ks = []
            for chunk in candidates:
                if not chunk:
                    continue
                records = cast(
                    "list[str | None]",
                    self.redis.hmget(shard.map_items(wid, c), [str(k) for k in chunk]),
                )
                for k, r in zip(chunk, records, strict=True):
                    if _item_state(r, cancelled) == state:
                        ks.append(k)
                if len(ks) >= offset + limit:
                    break
            ks = ks[offset : offset + limit]
        return self._read_items(shard, wid, c, ks, cancelled)

    def _read_items(
        self, shard: ShardKeys, wid: str, c: int, ks: list[int], cancelled: bool
    ) -> list[ItemStatus]:
        """Items ``ks`` (in that order) of map ``c``, read in one transaction: a pending
        item's element is read from the list of elements not started yet."""
        if not ks:
            return []
        key = shard.workflow(wid)
        steps = self._step_names(wid, c)
        parts = (T_FAILURES, T_OUTPUT, T_ERROR, I_ELEMENT)
        fields = [f"{k}{p}" for k in ks for p in ("", *parts)]
        fields += [step_field(k, s) for k in ks for s in range(len(steps))]
        started = int(cast("str | None", self.redis.hget(key, f"{c}{M_STARTED}")) or 0)
        first = max(0, min(ks) - started)
        pipe = self.redis.pipeline(transaction=True)
        pipe.hmget(key, [F_CREATED, f"{c}{M_STARTED}"])
        pipe.hmget(shard.map_items(wid, c), fields)
        pipe.lrange(shard.map_pending(wid, c), first, max(ks) - started)
        (ct, now_started), values, pending = pipe.execute()
        if ct is None:
            raise NotFoundError(f"workflow {wid} does not exist")
        # elements shifted out of the pending list since `started` was read
        shift = int(now_started or 0) - started
        created = int(ct)

        def at(v: str) -> float | None:
            return (created + int(float(v))) / 1000.0 if v else None

        out = []
        step_records = values[5 * len(ks) :]
        for j, k in enumerate(ks):
            rec, f, o, e, p = values[5 * j : 5 * j + 5]
            st, a, q, b, d, g = parse_record(rec)
            element = decode_json(p)
            slot = k - started - shift - first
            if rec is None and 0 <= slot < len(pending):
                element = decode_json(pending[slot])
            out.append(
                ItemStatus(
                    index=k,
                    state=TaskState(_item_state(rec, cancelled)),
                    attempts=int(a or 0),
                    failures=int(f or 0),
                    element=element,
                    output=decode_json(o),
                    error=e,
                    agent=g or None,
                    ready_at=at(q),
                    started_at=at(b),
                    finished_at=at(d),
                    steps={
                        name: TaskState(parse_record(r)[0])
                        for name, r in zip(
                            steps, step_records[j * len(steps) : (j + 1) * len(steps)], strict=True
                        )
                    }
                    if steps
                    else None,
                )
            )
        return out

    def _step_names(self, wid: str, c: int) -> list[str]:
        """The names of map ``c``'s steps, in order ([] for a map of one step)."""
        dkey = self._names(wid)[0]
        n = int(cast("str | None", self.redis.hget(dkey, f"{c}{D_STEPS}")) or 0)
        if not n:
            return []
        fields = [f"{step_prefix(c, s)}{D_NAME}" for s in range(n)]
        return [str(v) for v in cast("list[str]", self.redis.hmget(dkey, fields))]

    def map_outputs(
        self, wid: str | int, name: str, offset: int = 0, limit: int = 1000
    ) -> list[Any]:
        """The outputs of map ``name``'s items ``offset`` to ``offset + limit - 1`` in
        item order (``None`` for an item without one): how a gather pages a map whose
        output is a handle, ``{"map": c, "items": n, "workflow": wid}``."""
        shard, c = self._map(wid, name)
        total = self.redis.hget(shard.workflow(wid), f"{c}{M_TOTAL}")
        end = min(int(cast("str | None", total) or 0), offset + limit)
        if end <= offset:
            return []
        fields = [f"{k}{T_OUTPUT}" for k in range(offset, end)]
        values = self.redis.hmget(shard.map_items(str(wid), c), fields)
        return [decode_json(cast("str | None", v)) for v in values]

    def _read_hash(self, key: str, size: int) -> dict[str, str]:
        if size <= BIG_HASH:
            return cast("dict[str, str]", self.redis.hgetall(key))
        return dict(cast(Iterator[tuple[str, str]], self.redis.hscan_iter(key, count=BIG_HASH)))

    def _payloads(self, dkey: str, names: list[str]) -> dict[str, str]:
        """The definition's task payloads ``names``, read in slices of :data:`BIG_HASH`."""
        out: dict[str, str] = {}
        for at in range(0, len(names), BIG_HASH):
            part = names[at : at + BIG_HASH]
            got = cast("list[str | None]", self.redis.hmget(dkey, part))
            out.update((f, v) for f, v in zip(part, got, strict=True) if v is not None)
        return out

    def _remember_definition(self, digest: str, definition: dict[str, str]) -> None:
        """Keep a definition's fields but its tasks' payloads and its runs' name (kept by
        name, read again with each status): a digest names the tasks, not their payloads
        nor the name of the run that stored it."""
        payloads = [f for f in definition if f[-1:] == D_PAYLOAD and f[:-1].isdigit()]
        if D_RUN_NAME in definition:  # its first run's: read again too, as its payloads
            payloads.append(D_RUN_NAME)
        kept = dict(definition)
        for f in payloads:
            del kept[f]
        with self._lock:
            cache = self._definitions
            if digest in cache:
                return
            self._definition_fields += len(definition)
            cache[digest] = (kept, payloads)
            while self._definition_fields > DEFINITION_CACHE and len(cache) > 1:
                oldest = next(iter(cache))
                dropped, names = cache.pop(oldest)
                self._definition_fields -= len(dropped) + len(names)

    def summaries(self, wids: Iterable[str]) -> list[WorkflowSummary]:
        """The list fields of several workflows in one round trip (missing ones left out)."""
        wids = list(wids)
        pipe = self.redis.pipeline(transaction=False)
        for wid in wids:
            pipe.hmget(self.keys.shard_of(wid).workflow(wid), [*SUMMARY_FIELDS, F_DIGEST])
        found = [(w, row) for w, row in zip(wids, pipe.execute(), strict=True) if row[1]]
        rows = self._named([w for w, _ in found], [row for _, row in found], 0)
        return [parse_summary(w, row) for (w, _), row in zip(found, rows, strict=True)]

    def _named(
        self, wids: list[str], rows: list[Any], at: int
    ) -> list[list[Any]]:
        """Rows of run fields read with the run's digest last: the digest dropped, and a
        run's name (``at`` in its row) that is its definition's (no field of its own)
        read from there, one read per definition."""
        keys = {
            w: self.keys.shard_of(w).definition(row[-1])
            for w, row in zip(wids, rows, strict=True)
            if row[at] is None and row[-1]
        }
        names: dict[str, Any] = {}
        if keys:
            unique = list(dict.fromkeys(keys.values()))
            pipe = self.redis.pipeline(transaction=False)
            for k in unique:
                pipe.hget(k, D_RUN_NAME)
            names = dict(zip(unique, pipe.execute(), strict=True))
        out = []
        for w, row in zip(wids, rows, strict=True):
            row = list(row[:-1])
            if w in keys:
                row[at] = names[keys[w]]
            out.append(row)
        return out

    def id_for_key(self, key: str) -> str:
        """The id of the workflow pushed with idempotency key ``key`` (``P:ik:<key>``):
        looked up in the key's shard, then (a run routed by its concurrency gate) in the
        others. Raises :class:`NotFoundError` when no workflow has it."""
        home = self.keys.shard_for(key)
        order = [home] + [s for s in range(self.keys.shards) if s != home]
        for s in order:
            wid = self.redis.get(self.keys.shard(s).idem(key))
            if wid is not None:
                return str(wid)
        raise NotFoundError(f"no workflow has the key {key!r}")

    def _index_key(
        self, shard: ShardKeys, state: str | None, name: str | None, template: str | None = None
    ) -> str:
        if template is not None:
            return shard.by_template(template)
        if name is not None:
            return shard.by_name(name)
        if state is not None:
            return shard.by_state(WorkflowState(state).value)
        return shard.all

    def list_ids(
        self,
        state: str | None = None,
        name: str | None = None,
        offset: int = 0,
        limit: int = 50,
        template: str | None = None,
        oldest_first: bool = False,
        created_after_ms: int | None = None,
        created_before_ms: int | None = None,
    ) -> list[str]:
        """Workflow ids, newest first (or oldest first), one page at a time; filter by
        state, name and/or the template they run, and by creation time (at or after
        ``created_after_ms``, before ``created_before_ms``: see :mod:`.by_time`)."""
        if state is not None:
            WorkflowState(state)  # ValueError for a state that does not exist
        if created_after_ms is not None or created_before_ms is not None:
            ids: list[str] = []
            for key, start, end, wanted in self._windows(
                state, name, template, created_after_ms, created_before_ms
            ):
                ids += self._ranks_matching(key, start, end, wanted, offset + limit, oldest_first)
            ids.sort(key=int, reverse=not oldest_first)
            return ids[offset : offset + limit]
        # the index walked, and what is checked of each workflow on it
        checks: dict[str, str] = {}
        if template is not None:
            checks = {k: v for k, v in ((F_STATE, state), (F_NAME, name)) if v is not None}
        elif state is not None and name is not None:
            checks = {F_STATE: state}
        index_state = None if (template is not None or name is not None) else state
        if self.keys.shards == 1 and not checks:
            key = self._index_key(self.keys.shard(0), index_state, name, template)
            read = self.redis.zrange if oldest_first else self.redis.zrevrange
            return list(cast("list[str]", read(key, offset, offset + limit - 1)))
        ids = []
        for shard in self.keys.all_shards():
            key = self._index_key(shard, index_state, name, template)
            if checks:
                ids.extend(self._ids_matching(key, checks, offset + limit, oldest_first))
            else:
                read = self.redis.zrange if oldest_first else self.redis.zrevrange
                ids.extend(cast("list[str]", read(key, 0, offset + limit - 1)))
        ids.sort(key=int, reverse=not oldest_first)
        return ids[offset : offset + limit]

    def _ids_matching(
        self, index: str, checks: dict[str, str], want: int, oldest_first: bool = False
    ) -> list[str]:
        """Up to ``want`` ids of ``index`` (newest first, or oldest) whose workflow has
        the ``checks`` field values (state, name)."""
        found: list[str] = []
        start, chunk = 0, 500
        read = self.redis.zrange if oldest_first else self.redis.zrevrange
        while len(found) < want:
            wids = cast("list[str]", read(index, start, start + chunk - 1))
            if not wids:
                break
            found += self._matching(wids, checks)
            start += chunk
        return found[:want]

    def _matching(self, wids: list[str], checks: dict[str, str]) -> list[str]:
        """The ``wids`` whose workflow has the ``checks`` field values (state, name), in
        one round trip (two when a name to check is a definition's)."""
        fields = list(checks)
        named = F_NAME in checks  # its digest too: a run's name may be its definition's
        read = [*fields, F_DIGEST] if named else fields
        pipe = self.redis.pipeline(transaction=False)
        for wid in wids:
            pipe.hmget(self.keys.shard_of(wid).workflow(wid), read)
        rows: list[Any] = pipe.execute()
        if named:
            rows = self._named(wids, rows, fields.index(F_NAME))
        wanted = [checks[f] for f in fields]
        return [w for w, row in zip(wids, rows, strict=True) if list(row[: len(fields)]) == wanted]

    def _windows(
        self,
        state: str | None,
        name: str | None,
        template: str | None,
        after_ms: int | None,
        before_ms: int | None,
    ) -> Iterator[tuple[str, int, int, dict[str, str]]]:
        """Per shard: the sequence-ordered index a creation-time filter searches (the
        template's, the name's, or every workflow's), the ranks of its window, and what
        is checked of each workflow in it (state; name, on a template's index)."""
        checks = {F_STATE: state} if state is not None else {}
        if template is not None and name is not None:
            checks[F_NAME] = name
        for shard in self.keys.all_shards():
            key = self._index_key(shard, None, name, template)
            start, end = by_time.window(self.redis, shard, key, after_ms, before_ms)
            yield key, start, end, checks

    def _ranks_matching(
        self,
        index: str,
        start: int,
        end: int,
        checks: dict[str, str],
        want: int,
        oldest_first: bool = False,
    ) -> list[str]:
        """Up to ``want`` ids of ``index`` at ranks ``[start, end)`` (the newest first,
        or the oldest) whose workflow has the ``checks`` field values."""
        found: list[str] = []
        chunk = 500
        lo, hi = start, end
        while len(found) < want and lo < hi:
            if oldest_first:
                a, b = lo, min(hi, lo + chunk)
                lo = b
            else:
                a, b = max(lo, hi - chunk), hi
                hi = a
            wids = cast("list[str]", self.redis.zrange(index, a, b - 1))
            if not oldest_first:
                wids.reverse()
            if checks:
                wids = self._matching(wids, checks)
            found += wids
        return found[:want]

    def count(
        self,
        state: str | None = None,
        name: str | None = None,
        template: str | None = None,
        created_after_ms: int | None = None,
        created_before_ms: int | None = None,
    ) -> int:
        """How many workflows match: O(1) per shard for one filter; with more, a walk of
        the name's (or template's) index. A creation-time window is searched (see
        :mod:`.by_time`), and walked only to check a state (or a name on a template's)."""
        if created_after_ms is not None or created_before_ms is not None:
            total = 0
            for key, start, end, checks in self._windows(
                state, name, template, created_after_ms, created_before_ms
            ):
                if checks:
                    total += len(self._ranks_matching(key, start, end, checks, 1 << 62))
                else:
                    total += end - start
            return total
        checks = {k: v for k, v in ((F_STATE, state), (F_NAME, name)) if v is not None}
        if template is not None and checks or state is not None and name is not None:
            if template is None:
                checks = {F_STATE: str(state)}
            return sum(
                len(self._ids_matching(self._index_key(s, None, name, template), checks, 1 << 62))
                for s in self.keys.all_shards()
            )
        return sum(
            int(self.redis.zcard(self._index_key(s, state, name, template)))
            for s in self.keys.all_shards()
        )

    def names(self, prefix: str = "", limit: int = 50) -> list[tuple[str, int]]:
        """Workflow names with how many workflows have them, most common first."""
        counts: dict[str, int] = {}
        for shard in self.keys.all_shards():
            scored = cast(_Scored, self.redis.zrevrange(shard.names, 0, -1, withscores=True))
            for name, score in scored:
                if name.startswith(prefix):
                    counts[name] = counts.get(name, 0) + int(score)
        return sorted(counts.items(), key=lambda kv: -kv[1])[:limit]

    def stats(self, retention_ms: int = 0) -> Stats:
        """Totals of tasks and workflows by state, queue depth per type, and the
        retention backlog (:meth:`retention_backlog`, for the deployment's retention
        ``retention_ms``)."""
        tasks = {s.value: 0 for s in TaskState}
        workflows = {s.value: 0 for s in WorkflowState}
        pushed_t = pushed_w = 0
        queued: dict[str, int] = {}
        for shard in self.keys.all_shards():
            raw = cast("dict[str, str]", self.redis.hgetall(shard.stats))
            for field, value in raw.items():
                kind, _, what = field.partition(":")
                if what == "pushed":
                    if kind == "t":
                        pushed_t += int(value)
                    else:
                        pushed_w += int(value)
                elif kind == "t":
                    tasks[what] = tasks.get(what, 0) + int(value)
                elif kind == "w":
                    workflows[what] = workflows.get(what, 0) + int(value)
            types = sorted(cast("set[str]", self.redis.smembers(shard.types)))
            pipe = self.redis.pipeline(transaction=False)
            for t in types:
                pipe.zcard(shard.queue(t))
            for t, n in zip(types, pipe.execute(), strict=True):
                queued[t] = queued.get(t, 0) + int(n)
        backlog = self.retention_backlog(retention_ms)
        return Stats(tasks, workflows, pushed_t, pushed_w, queued, backlog)

    def retention_backlog(self, retention_ms: int) -> int:
        """How many finished workflows are past their retention and not removed yet: due
        in ``P:expire`` (their own), and finished more than ``retention_ms`` ago (the
        deployment's, 0: keep forever) after where its sweep stopped. Two round trips of
        O(log n) counts per shard. A run with a retention of its own that has outlived
        the deployment's too counts in both until housekeeping removes it or steps over
        it (the sweep's mark moves past it)."""
        shards = self.keys.all_shards()
        now = int(server_time(self.redis) * 1000)
        marks: list[list[str | None]] = [[None] * len(FINISHED_STATES)] * len(shards)
        if retention_ms > 0:
            pipe = self.redis.pipeline(transaction=False)
            for shard in shards:
                pipe.hmget(shard.sweep, list(FINISHED_STATES))
            marks = pipe.execute()
        pipe = self.redis.pipeline(transaction=False)
        for shard, mark in zip(shards, marks, strict=True):
            pipe.zcount(shard.expire, "-inf", now)
            if retention_ms > 0:
                for state, since in zip(FINISHED_STATES, mark, strict=True):
                    pipe.zcount(shard.by_state(state), since or "-inf", now - retention_ms)
        return sum(int(n) for n in pipe.execute())

    def agents(self) -> list[AgentInfo]:
        """Every agent known, once, with liveness from its heartbeat age and lease.

        An agent registers on every shard it serves: it is listed as its freshest shard
        knows it (the most recent heartbeat), holding the tasks it runs on all of them.
        """
        by_id: dict[str, list[AgentInfo]] = {}
        for info in self._agents_by_shard():
            by_id.setdefault(info.id, []).append(info)
        out: list[AgentInfo] = []
        for agent_id in sorted(by_id):
            views = by_id[agent_id]
            fresh = min(views, key=_heartbeat_age)
            running = sorted({t for a in views for t in a.running})
            out.append(dataclasses.replace(fresh, running=running))
        return out

    def _agents_by_shard(self) -> list[AgentInfo]:
        """Each shard's registry entries (an agent on several shards once per shard)."""
        now = server_time(self.redis)
        out: list[AgentInfo] = []
        for shard in self.keys.all_shards():
            infos = cast("dict[str, str]", self.redis.hgetall(shard.agents))
            states = cast("dict[str, str]", self.redis.hgetall(shard.agents_state))
            draining = cast("dict[str, str]", self.redis.hgetall(shard.agents_drain))
            seen = dict(cast(_Scored, self.redis.zrange(shard.agents_seen, 0, -1, withscores=True)))
            pipe = self.redis.pipeline(transaction=False)
            ids = sorted(infos)
            for agent_id in ids:
                pipe.smembers(shard.running_of(agent_id))
            for agent_id, running in zip(ids, pipe.execute(), strict=True):
                info = json.loads(infos[agent_id])
                age = now - seen[agent_id] / 1000.0 if agent_id in seen else None
                lease = float(info.get("lease_s", 30))
                beat = float(info.get("heartbeat_s", lease / 3))
                stored = states.get(agent_id, "online")
                if stored == "online":
                    if age is not None and age > lease:
                        state = AgentState.DEAD
                    elif age is not None and age > 2 * beat:
                        state = AgentState.STALE
                    else:
                        state = AgentState.ONLINE
                    if agent_id in draining and state != AgentState.DEAD:
                        state = AgentState.DRAINING
                else:
                    state = AgentState(stored)
                out.append(
                    AgentInfo(
                        id=agent_id,
                        types=list(info.get("types", [])),
                        concurrency=int(info.get("concurrency", 1)),
                        state=state,
                        heartbeat_age=age,
                        lease_s=lease,
                        heartbeat_s=beat,
                        running=sorted(running),
                        host=info.get("host", ""),
                        pid=int(info.get("pid", 0)),
                        started_at=info.get("started_at"),
                        records=int(info.get("records", 1)),
                    )
                )
        return out

    def events(self, count: int = 200) -> list[Event]:
        """The most recent lifecycle events from the capped stream, newest first, with
        the names of their tasks (see :meth:`name_tasks`)."""
        out: list[Event] = []
        for shard in self.keys.all_shards():
            entries = cast(_Entries, self.redis.xrevrange(shard.events, count=count))
            for entry_id, fields in entries:
                out.extend(reversed(decode_batch(fields[BATCH_FIELD], entry_id)))
        out.sort(key=lambda e: e.ts, reverse=True)
        out = out[:count]
        self.name_tasks(out)
        return out

    def workflow_events(self, wid: str, since: float) -> list[Event]:
        """Workflow ``wid``'s events still in its shard's capped stream, oldest first:
        read back from the newest entry until one older than ``since`` (epoch seconds)."""
        shard = self.keys.shard_of(wid)
        out: list[Event] = []
        end: str = "+"
        since_ms = int(since * 1000) - 1000
        while True:
            entries = cast(_Entries, self.redis.xrevrange(shard.events, end, "-", count=500))
            for _, fields in entries:
                out.extend(e for e in reversed(decode_batch(fields[BATCH_FIELD])) if e.wid == wid)
            if len(entries) < 500 or int(str(entries[-1][0]).split("-")[0]) < since_ms:
                break
            end = f"({entries[-1][0]}"
        out.reverse()
        return out

    def name_tasks(self, events: Iterable[Event]) -> None:
        """Fill in the ``task_name`` of task events, from their workflows' definitions.

        Events carry a task's index only; names are read at most in two pipelined round
        trips (the definition of each workflow not seen before, then the names of each
        definition not seen before) and cached. A workflow already cleaned up leaves
        ``task_name`` as ``None``.
        """
        todo = [e for e in events if e.task is not None and e.task_name is None]
        if not todo:
            return
        defs = self._def_of
        missing = list({e.wid for e in todo if e.wid not in defs})
        if missing:
            pipe = self.redis.pipeline(transaction=False)
            for wid in missing:
                pipe.hmget(self.keys.shard_of(wid).workflow(wid), [F_DIGEST, F_COUNT])
            rows = pipe.execute()
            if len(defs) + len(missing) > NAME_CACHE:
                defs.clear()
            for wid, (digest, n) in zip(missing, rows, strict=True):
                if digest:
                    defs[wid] = (digest, int(n))
        names = self._names_of
        wanted: dict[str, tuple[str, int]] = {}
        for e in todo:
            known = defs.get(e.wid)
            if known and known[0] not in names:
                wanted[known[0]] = (e.wid, known[1])
        if wanted:
            pipe = self.redis.pipeline(transaction=False)
            for digest, (wid, n) in wanted.items():
                key = self.keys.shard_of(wid).definition(digest)
                pipe.hmget(key, [f"{i}{D_NAME}" for i in range(n)])
            if len(names) + len(wanted) > NAME_CACHE // 10:
                names.clear()
            for digest, got in zip(wanted, pipe.execute(), strict=True):
                if all(got):
                    names[digest] = got
        for e in todo:
            known = defs.get(e.wid)
            listed = names.get(known[0]) if known else None
            if listed and e.task is not None and 0 <= e.task < len(listed):
                e.task_name = listed[e.task]

    def events_after(self, last_ids: dict[int, str], block_ms: int = 0) -> list[Event]:
        """Events newer than ``last_ids`` (stream id per shard, updated in place)."""
        if is_cluster(self.redis) and self.keys.shards > 1:
            return self._events_after_each(last_ids, block_ms)
        slice_ms = block_slice_ms(self.redis)
        if block_ms > slice_ms:  # blocks in slices: "$" must not skip what comes between
            for s in self.keys.all_shards():
                if s.shard not in last_ids:
                    last = cast(_Entries, self.redis.xrevrange(s.events, count=1))
                    last_ids[s.shard] = last[0][0] if last else "0-0"
        deadline = time.monotonic() + block_ms / 1000
        while True:
            streams: dict[KeyT, StreamIdT] = {
                s.events: last_ids.get(s.shard, "$") for s in self.keys.all_shards()
            }
            left_ms = max(1, math.ceil((deadline - time.monotonic()) * 1000)) if block_ms else 0
            # RESP2 reply: [[stream key, entries], ...], or None when nothing arrived in time
            reply = cast(
                "list[tuple[str, _Entries]] | None",
                self.redis.xread(streams, block=min(left_ms, slice_ms) or None, count=1000),
            )
            if reply or left_ms <= slice_ms:
                break
        out: list[Event] = []
        for key, entries in reply or []:
            shard = next(s for s in self.keys.all_shards() if s.events == key)
            if entries:
                last_ids[shard.shard] = entries[-1][0]
            out.extend(iter_stream(entries))
        return out

    def _events_after_each(self, last_ids: dict[int, str], block_ms: int) -> list[Event]:
        """events_after on a cluster: one XREAD per shard (a read cannot span slots),
        pipelined, again every 50 ms until something arrives or ``block_ms`` passes;
        merged by time."""
        shards = self.keys.all_shards()
        for s in shards:
            if s.shard not in last_ids:  # "$" means "from now": take the last id now
                last = cast(_Entries, self.redis.xrevrange(s.events, count=1))
                last_ids[s.shard] = last[0][0] if last else "0-0"
        deadline = time.monotonic() + block_ms / 1000
        while True:
            pipe = self.redis.pipeline(transaction=False)
            for s in shards:
                pipe.xread({s.events: last_ids[s.shard]}, count=1000)
            out: list[Event] = []
            for s, reply in zip(shards, pipe.execute(), strict=True):
                for _, entries in reply or []:
                    if entries:
                        last_ids[s.shard] = entries[-1][0]
                    out.extend(iter_stream(entries))
            if out or time.monotonic() >= deadline:
                out.sort(key=lambda e: e.ts)
                return out
            time.sleep(0.05)

    def state(self, wid: str | int) -> WorkflowState:
        """The current state of one workflow."""
        st = cast("str | None", self.redis.hget(self.keys.shard_of(wid).workflow(wid), F_STATE))
        if st is None:
            raise NotFoundError(f"workflow {wid} does not exist")
        return WorkflowState(st)

    def count_finished(self, cutoff_ms: int) -> int:
        """How many workflows finished at or before ``cutoff_ms`` (Redis time)."""
        cutoff = cutoff_ms
        return sum(
            int(self.redis.zcount(shard.by_state(s), "-inf", cutoff))
            for shard in self.keys.all_shards()
            for s in FINISHED_STATES
        )

    def finished_page(self, shard: ShardKeys, state: str, cutoff_ms: int, skip: int) -> list[str]:
        """Up to 500 ids of ``shard``'s workflows in finished ``state`` that finished at or
        before ``cutoff_ms``, oldest first, past the first ``skip``."""
        key = shard.by_state(state)
        return cast("list[str]", self.redis.zrangebyscore(key, "-inf", cutoff_ms, skip, 500))

    def next_due_s(self, shards: Iterable[ShardKeys]) -> float | None:
        """Seconds until the earliest retry backoff ends, or scheduled workflow starts, in
        ``shards`` (None: none waits)."""
        pipe = self.redis.pipeline(transaction=False)
        cluster = is_cluster(self.redis)  # a cluster pipeline takes keyed commands only
        if not cluster:
            pipe.time()
        for shard in shards:
            pipe.zrange(shard.delayed, 0, 0, withscores=True)
            pipe.zrange(shard.scheduled, 0, 0, withscores=True)
        firsts = pipe.execute()
        sec, usec = self.redis.time() if cluster else firsts.pop(0)
        now_ms = sec * 1000 + usec / 1000
        due = [first[0][1] for first in firsts if first]
        return max(0.0, (min(due) - now_ms) / 1000) if due else None

    def nothing_left(self, shards: Iterable[ShardKeys], types: Iterable[str]) -> bool:
        """True when the queues of ``types`` hold no work and nothing in ``shards`` could
        make more of it: no retry waiting, no map waiting for its items (being expanded:
        its items come in a moment) and no task running, or else no running or
        paused workflow with a task of ``types`` (an item or a step of a map's included)
        that has not ended (:mod:`engine.store.idle`)."""
        shards, types = list(shards), list(types)
        pipe = self.redis.pipeline(transaction=False)
        for shard in shards:
            for t in types:
                pipe.zcard(shard.queue(t))
            pipe.zcard(shard.expanding)
            pipe.zcard(shard.delayed)
            pipe.hget(shard.stats, "t:running")
        counts = [int(x or 0) for x in pipe.execute()]
        if all(x <= 0 for x in counts):
            return True
        per, now = len(types) + 3, len(types) + 1  # our queues and the maps being expanded
        if any(x > 0 for n in range(len(shards)) for x in counts[n * per : n * per + now]):
            return False  # work in our queues now, or a map's items about to be
        # something runs or waits for a retry: could it still make work of our types?
        if self._idle is None:
            self._idle = IdleCheck(self.redis)
        return not any(self._idle.could_come(shard, types) for shard in shards)

    @property
    def sharded_channels(self) -> bool:
        """Whether the scripts publish on sharded channels (a Redis 7 cluster)."""
        if self._sharded is None:
            # asked of a node's COMMAND INFO: a reader runs no script, no role has INFO
            self._sharded = is_cluster(self.redis) and has_sharded_pubsub(self.redis)
        return self._sharded

    def pubsub(self, channels: Iterable[str]) -> Any:
        """A pub/sub connection subscribed to ``channels`` (ignoring subscribe replies);
        on a Redis 7 cluster, sharded subscriptions on each channel's master."""
        if self.sharded_channels:
            sharded = ShardedPubSub(self.redis)
            sharded.subscribe(*channels)
            return sharded
        ps = self.redis.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
        channels = list(channels)
        if channels:
            ps.subscribe(*channels)
        return ps

    def keyspace_channel(self, key: str) -> str:
        """The keyspace-notification channel of ``key`` in this client's database."""
        if is_cluster(self.redis):
            return f"__keyspace@0__:{key}"
        db = self.redis.connection_pool.connection_kwargs.get("db", 0)
        return f"__keyspace@{db}__:{key}"

    def enable_keyspace_events(self, needed: str) -> bool:
        """Add the flags ``needed`` (e.g. ``Kh``) to ``notify-keyspace-events``, keeping
        every flag already set; ``False`` when the server does not allow ``CONFIG``, and
        on a cluster (notifications are node-local: watchers read the event channels)."""
        if is_cluster(self.redis):
            return False
        try:
            current = self.redis.config_get("notify-keyspace-events").get(
                "notify-keyspace-events", ""
            )
            flags = str(current)
            missing = [f for f in needed if f not in flags and not (f in "hsz" and "A" in flags)]
            if missing:
                self.redis.config_set("notify-keyspace-events", flags + "".join(missing))
            return True
        except redis.ResponseError:
            return False


def _item_state(record: str | None, cancelled: bool) -> str:
    """An item's state from its record; an item without one was never started: waiting,
    or cancelled with its map."""
    if record is None:
        return "cancelled" if cancelled else "waiting"
    return parse_record(record)[0]


def _heartbeat_age(agent: AgentInfo) -> float:
    """Seconds since ``agent``'s last heartbeat (never: infinitely long)."""
    return math.inf if agent.heartbeat_age is None else agent.heartbeat_age
