"""The client API: push, steer and read workflows."""

from __future__ import annotations

import builtins
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeAlias, cast

import redis
from redis.typing import KeyT, StreamIdT

from .definition import DEFAULT_MAX_PAYLOAD, CompiledWorkflow, Workflow, compile_workflow
from .embedded import EmbeddedRedis, url_from_env
from .errors import DefinitionError, NotFoundError, StateError, UnreachableError
from .events import EventListener, decode_batch, iter_stream
from .keys import DEFAULT_NAMESPACE, Keyspace, ShardKeys
from .model import (
    AgentInfo,
    AgentState,
    Event,
    Stats,
    TaskState,
    TaskStatus,
    WorkflowState,
    WorkflowStatus,
    WorkflowSummary,
    decode_json,
    task_record,
)
from .scripts import Scripts

DEFAULT_RETENTION_S = 7 * 24 * 3600
DEFAULT_EVENT_CAP = 2000
BIG_HASH = 4096  # fields: a bigger hash is read in HSCAN slices of this many
DEFINITION_CACHE = 400_000  # definition fields status() keeps between reads
NAME_CACHE = 50_000  # workflows whose definition name_tasks remembers
PUSH_BATCH = 256  # at most this many workflows per push.lua call
PUSH_BATCH_TASKS = 2048  # and about this many tasks
SUMMARY_FIELDS = ("name", "st", "n", "ok", "bad", "skip", "ct", "ft")
# Per-task fields as status() reads them, definition's first (see lua/_lib.lua); the
# task's record (state, attempts, times, agent) is the field named by its bare index.
TASK_FIELDS = ("N", "T", "P", "R", "M", "C", "U", "f", "o", "e")

# The engine's clients decode replies (``decode_responses=True``), so every string Redis
# returns is ``str``; redis-py's annotations also allow ``bytes``, hence the casts below.
_Entries: TypeAlias = list[tuple[str, dict[str, str]]]
_Scored: TypeAlias = list[tuple[str, float]]


def _script_error(e: redis.ResponseError) -> Exception:
    text = str(e)
    for code, cls in (("RFSTATE ", StateError), ("RFNOTFOUND ", NotFoundError)):
        at = text.find(code)
        if at >= 0:
            return cls(text[at + len(code) :].split(" script:")[0].strip())
    return e


def _ms(value: Any) -> float | None:
    return None if value in (None, "") else int(value) / 1000.0


class Engine:
    """A handle on one redisflow deployment (a namespace in one Redis).

    Example:
        >>> engine = Engine.connect("redis://127.0.0.1:6379/0")
        >>> wid = engine.push(wf)
        >>> engine.status(wid).state
    """

    def __init__(
        self,
        client: redis.Redis,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        shards: int = 1,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        event_cap: int = DEFAULT_EVENT_CAP,
        retention_s: float = DEFAULT_RETENTION_S,
        embedded: EmbeddedRedis | None = None,
    ) -> None:
        self.redis = client
        self.keys = Keyspace(namespace, shards)
        self.max_payload = max_payload
        self.event_cap = event_cap
        self.retention_s = retention_s
        self.embedded = embedded
        self.scripts = Scripts(client)
        self._rr = itertools.count()
        self._def_of: dict[str, tuple[str, int]] = {}  # wid -> (digest, task count)
        self._names_of: dict[str, list[str]] = {}  # digest -> task names
        self._definitions: dict[str, dict[str, str]] = {}  # digest -> fields, oldest first
        self._definition_fields = 0
        self._lock = threading.Lock()

    # -- connecting ---------------------------------------------------------------------

    @classmethod
    def connect(cls, url: str | None = None, **options: Any) -> Engine:
        """Connect to ``url``, else ``REDISFLOW_URL``, else a private embedded redis-server.

        ``rediss://`` URLs take their TLS files as query options (``ssl_ca_certs``,
        ``ssl_certfile``, ``ssl_keyfile``). Messages show the URL with its password as ***.

        Raises :class:`UnreachableError` when Redis does not answer.
        """
        from .urls import redact

        url = url or url_from_env()
        embedded = None
        if url is None:
            embedded = EmbeddedRedis().start()
            url = embedded.url
        try:
            client = redis.Redis.from_url(
                url, decode_responses=True, socket_connect_timeout=5, health_check_interval=30
            )
        except ValueError as e:
            if embedded is not None:
                embedded.stop()
            raise DefinitionError(f"invalid Redis URL {redact(url)!r}: {e}") from None
        try:
            client.ping()
        except redis.AuthenticationError as e:
            raise UnreachableError(f"cannot log in to Redis at {redact(url)}: {e}") from None
        except (redis.ConnectionError, redis.TimeoutError, OSError) as e:
            raise UnreachableError(f"cannot reach Redis at {redact(url)}: {e}") from None
        return cls(client, embedded=embedded, **options)

    @property
    def url(self) -> str:
        """Where this handle connects, fit to print (password as ***). The full URL, to
        hand to another process, is :func:`engine.urls.url_of` of :attr:`redis`."""
        from .urls import redact, url_of

        return redact(url_of(self.redis))

    def close(self) -> None:
        """Close the connection pool and stop the embedded server if this handle started one."""
        self.redis.close()
        if self.embedded is not None:
            self.embedded.stop()
            self.embedded = None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _common(self, shard: ShardKeys) -> builtins.list[Any]:
        return [shard.prefix, self.event_cap]

    def _call(
        self, script: Any, keys: builtins.list[str], args: builtins.list[Any], client: Any = None
    ) -> Any:
        try:
            return script(keys=keys, args=args, client=client)
        except redis.ResponseError as e:
            raise _script_error(e) from None

    # -- pushing ------------------------------------------------------------------------

    def push(self, wf: Workflow) -> str:
        """Validate ``wf`` and store it; its root tasks become ready. Returns its id.

        Nothing is written when the definition is invalid (:class:`DefinitionError`).
        """
        return self.push_many([wf])[0]

    def push_many(self, workflows: Iterable[Workflow]) -> builtins.list[str]:
        """Validate every workflow first, then store them all in few round trips.

        Returns their ids in order. Nothing is written if any definition is invalid.
        Workflows with the same tasks share one stored definition; pushing one
        :class:`Workflow` object many times validates and compiles it once.
        """
        compiled: list[CompiledWorkflow] = []
        seen: dict[int, CompiledWorkflow] = {}
        for wf in list(workflows):
            c = seen.get(id(wf))
            if c is None:
                c = seen[id(wf)] = compile_workflow(wf, self.max_payload)
            compiled.append(c)
        ids: list[str] = []
        pipe = self.redis.pipeline(transaction=False)
        calls = 0
        start = 0
        while start < len(compiled):
            end, tasks = start, 0
            while end < len(compiled) and end - start < PUSH_BATCH and tasks < PUSH_BATCH_TASKS:
                tasks += compiled[end].definition[1]
                end += 1
            self._push_call(pipe, compiled[start:end])
            start = end
            calls += 1
            if calls >= 16:
                for result in pipe.execute():
                    ids.extend(result)
                calls = 0
        if calls:
            for result in pipe.execute():
                ids.extend(result)
        return [str(i) for i in ids]

    def _push_call(self, pipe: Any, batch: builtins.list[CompiledWorkflow]) -> None:
        """Queue one push.lua call for ``batch`` on ``pipe`` (one shard, round robin)."""
        shard = self.keys.shard(next(self._rr) % self.keys.shards)
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
        self.scripts.push(keys=[shard.seq], args=args, client=pipe)

    # -- steering -----------------------------------------------------------------------

    def _control(self, name: str, wid: str | int, *extra: Any) -> Any:
        shard = self.keys.shard_of(wid)
        script = getattr(self.scripts, name)
        return self._call(script, [shard.workflow(wid)], [*self._common(shard), str(wid), *extra])

    def pause(self, wid: str | int) -> int:
        """Hold a running workflow; returns how many ready tasks were held back."""
        return int(self._control("pause", wid))

    def release(self, wid: str | int) -> int:
        """Resume a paused workflow; returns how many held tasks went back to the queues."""
        return int(self._control("release", wid))

    def cancel(self, wid: str | int) -> int:
        """Cancel a running or paused workflow; returns how many tasks were cancelled."""
        return int(self._control("cancel", wid))

    def retry(self, wid: str | int, tasks: Iterable[str] | None = None) -> int:
        """Run failed tasks again, inputs unchanged; returns how many tasks were reset.

        Without ``tasks``: every failed and skipped task of a failed workflow. With task
        names: those failed tasks and the skipped tasks that depend only on them.
        """
        indexes: list[int] = []
        if tasks is not None:
            names = self._task_names(wid)
            for name in tasks:
                if name not in names:
                    raise NotFoundError(f"workflow {wid} has no task named {name!r}")
                indexes.append(names.index(name))
        return int(self._control("retry", wid, *indexes))

    def cleanup(self, wid: str | int) -> None:
        """Delete a finished workflow and everything kept of it."""
        self._control("cleanup", wid)

    def cleanup_finished(self, older_than_s: float = 0.0) -> int:
        """Clean up every finished workflow that finished more than ``older_than_s`` ago."""
        cutoff = int((self.server_time() - older_than_s) * 1000)
        removed = 0
        for shard in self.keys.all_shards():
            for state in ("succeeded", "failed", "cancelled"):
                skip = 0  # entries that could not be cleaned stay in the index: page past them
                while True:
                    key = shard.by_state(state)
                    wids = cast(
                        "list[str]", self.redis.zrangebyscore(key, "-inf", cutoff, skip, 500)
                    )
                    if not wids:
                        break
                    for wid in wids:
                        try:
                            self.cleanup(wid)
                            removed += 1
                        except (StateError, NotFoundError):
                            # Retried or cleaned meanwhile, or an index entry without its
                            # workflow: never loop on it.
                            skip += 1
        return removed

    def count_finished(self, older_than_s: float = 0.0) -> int:
        """How many workflows :meth:`cleanup_finished` would remove now."""
        cutoff = int((self.server_time() - older_than_s) * 1000)
        return sum(
            int(self.redis.zcount(shard.by_state(s), "-inf", cutoff))
            for shard in self.keys.all_shards()
            for s in ("succeeded", "failed", "cancelled")
        )

    def maintain(self, max_lost: int = 5, limit: int = 200) -> builtins.list[int]:
        """One round of housekeeping on every shard (see ``reap.lua``); agents call this."""
        totals = [0, 0, 0, 0]
        for shard in self.keys.all_shards():
            args = [*self._common(shard), int(self.retention_s * 1000), max_lost, limit]
            out = self.scripts.reap(keys=[shard.agents_live], args=args)
            totals = [a + int(b) for a, b in zip(totals, out, strict=True)]
        return totals

    # -- reading ------------------------------------------------------------------------

    def server_time(self) -> float:
        """Redis's clock, in epoch seconds (scripts timestamp with it too)."""
        sec, usec = self.redis.time()
        return sec + usec / 1e6

    def _task_names(self, wid: str | int) -> builtins.list[str]:
        shard = self.keys.shard_of(wid)
        n, digest = self.redis.hmget(shard.workflow(wid), ["n", "d"])
        if n is None:
            raise NotFoundError(f"workflow {wid} does not exist")
        fields = [f"{i}N" for i in range(int(n))]
        return list(cast("list[str]", self.redis.hmget(shard.definition(digest), fields)))

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
        pipe.hget(key, "d")
        size, digest = pipe.execute()
        if not size:
            raise NotFoundError(f"workflow {wid} does not exist")
        raw = self._read_hash(key, size)
        if not raw:  # cleaned up meanwhile
            raise NotFoundError(f"workflow {wid} does not exist")
        definition = self._definitions.get(digest)
        if definition is None:
            dkey = shard.definition(digest)
            fields = cast(int, self.redis.hlen(dkey))
            definition = self._read_hash(dkey, fields)
            if not definition:  # cleaned up between the reads
                raise NotFoundError(f"workflow {wid} does not exist")
            whole = len(definition) == fields  # a slice-by-slice read the cleanup cut short
            definition.pop("r", None)  # how many use it: changes, and no part of a status
            if whole:
                self._remember_definition(digest, definition)
        return parse_status(str(wid), {**definition, **raw})

    def _read_hash(self, key: str, size: int) -> dict[str, str]:
        if size <= BIG_HASH:
            return cast("dict[str, str]", self.redis.hgetall(key))
        return dict(cast(Iterator[tuple[str, str]], self.redis.hscan_iter(key, count=BIG_HASH)))

    def _remember_definition(self, digest: str, definition: dict[str, str]) -> None:
        with self._lock:
            cache = self._definitions
            if digest in cache:
                return
            self._definition_fields += len(definition)
            cache[digest] = definition
            while self._definition_fields > DEFINITION_CACHE and len(cache) > 1:
                oldest = next(iter(cache))
                self._definition_fields -= len(cache.pop(oldest))

    def summaries(self, wids: Iterable[str]) -> builtins.list[WorkflowSummary]:
        """The list fields of several workflows in one round trip (missing ones left out)."""
        wids = list(wids)
        pipe = self.redis.pipeline(transaction=False)
        for wid in wids:
            pipe.hmget(self.keys.shard_of(wid).workflow(wid), SUMMARY_FIELDS)
        out = []
        for wid, row in zip(wids, pipe.execute(), strict=True):
            if row[0] is not None:
                out.append(parse_summary(wid, row))
        return out

    def _index_key(self, shard: ShardKeys, state: str | None, name: str | None) -> str:
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
    ) -> builtins.list[str]:
        """Workflow ids, newest first, one page at a time; filter by state and/or name."""
        if self.keys.shards == 1 and (state is None or name is None):
            key = self._index_key(self.keys.shard(0), state, name)
            return list(cast("list[str]", self.redis.zrevrange(key, offset, offset + limit - 1)))
        ids: list[str] = []
        if state is not None and name is not None:
            # both filters: walk each shard's name index newest first, keeping the ones in
            # `state`, until a page's worth is found
            for shard in self.keys.all_shards():
                ids.extend(self._ids_in_state(shard.by_name(name), state, offset + limit))
        else:
            # several shards: merge newest-first across their indexes
            for shard in self.keys.all_shards():
                key = self._index_key(shard, state, name)
                ids.extend(cast("list[str]", self.redis.zrevrange(key, 0, offset + limit - 1)))
        ids.sort(key=int, reverse=True)
        return ids[offset : offset + limit]

    def _ids_in_state(self, index: str, state: str, want: int) -> builtins.list[str]:
        """Up to ``want`` ids of ``index`` (newest first) whose workflow is in ``state``."""
        found: list[str] = []
        start, chunk = 0, 500
        while len(found) < want:
            wids = cast("list[str]", self.redis.zrevrange(index, start, start + chunk - 1))
            if not wids:
                break
            pipe = self.redis.pipeline(transaction=False)
            for wid in wids:
                pipe.hget(self.keys.shard_of(wid).workflow(wid), "st")
            found += [w for w, st in zip(wids, pipe.execute(), strict=True) if st == state]
            start += chunk
        return found[:want]

    # This method shadows the builtin inside the class body: annotations here say
    # ``builtins.list``.
    def list(
        self,
        state: str | None = None,
        name: str | None = None,
        offset: int = 0,
        limit: int = 50,
    ) -> builtins.list[WorkflowSummary]:
        """A page of workflow summaries, newest first (see :meth:`list_ids`)."""
        return self.summaries(self.list_ids(state, name, offset, limit))

    def count(self, state: str | None = None, name: str | None = None) -> int:
        """How many workflows match: O(1) per shard for one filter; with both, a walk of
        the name's index."""
        if state is not None and name is not None:
            return sum(
                len(self._ids_in_state(s.by_name(name), state, 1 << 62))
                for s in self.keys.all_shards()
            )
        return sum(
            int(self.redis.zcard(self._index_key(s, state, name))) for s in self.keys.all_shards()
        )

    def names(self, prefix: str = "", limit: int = 50) -> builtins.list[tuple[str, int]]:
        """Workflow names with how many workflows have them, most common first."""
        counts: dict[str, int] = {}
        for shard in self.keys.all_shards():
            scored = cast(_Scored, self.redis.zrevrange(shard.names, 0, -1, withscores=True))
            for name, score in scored:
                if name.startswith(prefix):
                    counts[name] = counts.get(name, 0) + int(score)
        return sorted(counts.items(), key=lambda kv: -kv[1])[:limit]

    def stats(self) -> Stats:
        """Totals of tasks and workflows by state, and queue depth per type."""
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
        return Stats(tasks, workflows, pushed_t, pushed_w, queued)

    def agents(self) -> builtins.list[AgentInfo]:
        """Every agent known, with liveness from its heartbeat age and lease."""
        now = self.server_time()
        out: list[AgentInfo] = []
        for shard in self.keys.all_shards():
            infos = cast("dict[str, str]", self.redis.hgetall(shard.agents))
            states = cast("dict[str, str]", self.redis.hgetall(shard.agents_state))
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
                    )
                )
        return out

    def events(self, count: int = 200) -> builtins.list[Event]:
        """The most recent lifecycle events from the capped stream, newest first, with
        the names of their tasks (see :meth:`name_tasks`)."""
        out: list[Event] = []
        for shard in self.keys.all_shards():
            entries = cast(_Entries, self.redis.xrevrange(shard.events, count=count))
            for entry_id, fields in entries:
                out.extend(reversed(decode_batch(fields["e"], entry_id)))
        out.sort(key=lambda e: e.ts, reverse=True)
        out = out[:count]
        self.name_tasks(out)
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
                pipe.hmget(self.keys.shard_of(wid).workflow(wid), ["d", "n"])
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
                pipe.hmget(key, [f"{i}N" for i in range(n)])
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

    def events_after(self, last_ids: dict[int, str], block_ms: int = 0) -> builtins.list[Event]:
        """Events newer than ``last_ids`` (stream id per shard, updated in place)."""
        streams: dict[KeyT, StreamIdT] = {
            s.events: last_ids.get(s.shard, "$") for s in self.keys.all_shards()
        }
        # RESP2 reply: [[stream key, entries], ...], or None when nothing arrived in time
        reply = cast(
            "list[tuple[str, _Entries]] | None",
            self.redis.xread(streams, block=block_ms or None, count=1000),
        )
        out: list[Event] = []
        for key, entries in reply or []:
            shard = next(s for s in self.keys.all_shards() if s.events == key)
            if entries:
                last_ids[shard.shard] = entries[-1][0]
            out.extend(iter_stream(entries))
        return out

    def listen(self, callback: Callable[[Event], None]) -> EventListener:
        """Call ``callback`` for every live event, from a background thread, until closed."""
        return EventListener(
            self.redis, [s.event_channel for s in self.keys.all_shards()], callback
        )

    def on_workflow_finished(
        self,
        complete: Callable[[str], None] | None = None,
        failed: Callable[[str], None] | None = None,
    ) -> EventListener:
        """Register callbacks for workflows that succeed (``complete``) or fail.

        This is seed 000's ``WorkflowComplete`` / ``WorkflowFailed``. Close the returned
        listener to stop.
        """

        def dispatch(event: Event) -> None:
            if event.kind == "workflow.succeeded" and complete:
                complete(event.wid)
            elif event.kind == "workflow.failed" and failed:
                failed(event.wid)

        return self.listen(dispatch)

    def state(self, wid: str | int) -> WorkflowState:
        """The current state of one workflow."""
        st = cast("str | None", self.redis.hget(self.keys.shard_of(wid).workflow(wid), "st"))
        if st is None:
            raise NotFoundError(f"workflow {wid} does not exist")
        return WorkflowState(st)

    def wait(self, wid: str | int, timeout: float | None = None) -> WorkflowState:
        """Block until the workflow finishes; returns its final state.

        Woken by the event channel, and re-reads the state every second as well, since
        pub/sub can lose messages. Raises :class:`TimeoutError` after ``timeout`` seconds.
        """
        wake = threading.Event()
        wanted = str(wid)

        def on_event(event: Event) -> None:
            if event.wid == wanted and event.kind.startswith("workflow."):
                wake.set()

        deadline = None if timeout is None else time.monotonic() + timeout
        with self.listen(on_event):
            while True:
                st = self.state(wid)
                if st.finished:
                    return st
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"workflow {wid} still {st} after {timeout:g}s")
                wake.wait(1.0 if left is None else min(1.0, left))
                wake.clear()


def parse_summary(wid: str, row: list[Any]) -> WorkflowSummary:
    name, st, n, ok, bad, skip, ct, ft = row
    return WorkflowSummary(
        id=str(wid),
        name=name,
        state=WorkflowState(st),
        total=int(n),
        succeeded=int(ok or 0),
        failed=int(bad or 0),
        skipped=int(skip or 0),
        created_at=int(ct) / 1000.0,
        finished_at=_ms(ft),
    )


def parse_status(wid: str, raw: dict[str, str]) -> WorkflowStatus:
    """Build a :class:`WorkflowStatus` from a workflow hash merged with its definition's
    (see ``lua/_lib.lua``)."""
    summary = parse_summary(wid, [raw.get(f) for f in SUMMARY_FIELDS])
    ct = int(raw["ct"])
    n = summary.total
    # One pass over the fields, into one column per task field ("3f" -> column f, row 3)
    # and each task's record ("3": state|attempts|ready|begin|done|agent).
    columns: dict[str, list[str | None]] = {f: [None] * n for f in TASK_FIELDS}
    records: list[str | None] = [None] * n
    for key, value in raw.items():
        if key.isdigit():
            records[int(key)] = value
            continue
        column = columns.get(key[-1])
        if column is not None and key[0].isdigit():
            column[int(key[:-1])] = value
    names = [v if v is not None else str(i) for i, v in enumerate(columns["N"])]

    def at(v: str) -> float | None:
        return (ct + int(float(v))) / 1000.0 if v else None

    def idx_list(v: str | None) -> list[str]:
        return [names[int(x)] for x in v.split(",")] if v else []

    tasks = []
    counts = {s.value: 0 for s in TaskState}
    states = {s.value: s for s in TaskState}
    rows = zip(records, *(columns[f] for f in TASK_FIELDS), strict=True)
    for i, (rec, _, typ, payload, pri, most, kids, ups, f, o, e) in enumerate(rows):
        st, a, q, b, d, g = task_record(rec)
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
            )
        )
    return WorkflowStatus(**summary.__dict__, counts=counts, tasks=tasks)
