"""The client API: push, steer and read workflows.

Every Redis call goes through :class:`engine.store.Store`; live events, listening and
waiting are :mod:`engine.runtime.events` and :mod:`engine.runtime.run_waiting`.
"""

from __future__ import annotations

import functools
import getpass
import itertools
import re
import secrets
import socket
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import redis

from engine.connect.embedded import EmbeddedRedis, url_from_env
from engine.connect.urls import close_client
from engine.core.model import (
    AgentInfo,
    Event,
    ItemStatus,
    RunResult,
    Stats,
    TemplateInfo,
    WorkflowState,
    WorkflowStatus,
    WorkflowSummary,
)
from engine.core.rules import Plan
from engine.core.timing import start_delay_ms
from engine.runtime import run_waiting as waiting
from engine.runtime.child_runs import (
    MAX_DEPTH,
    MAX_DESCENDANTS,
    cascade_to,
    check_templates,
    child_key,
    cycle_of,
)
from engine.runtime.events import EventListener
from engine.runtime.retrying import NOT_RUN_REPLIES, UNREACHABLE, patiently
from engine.spec.definition import DEFAULT_MAX_PAYLOAD, MAX_TTL, Workflow, show_value
from engine.spec.definition import plan as plan_workflow
from engine.spec.flow import (
    Pushed,
    RunRequest,
    check_key,
    check_run_key,
    check_template_name,
    trigger_key,
)
from engine.spec.rate_limits import RateLimit, rate_keys, rate_limit_from, task_types
from engine.spec.schemas import check_input
from engine.spec.wait_tasks import SignalResult

from .errors import (
    DefinitionError,
    NoDatabaseError,
    NotFoundError,
    NotReplicatedError,
    PartialWriteError,
    StateError,
    UnreachableError,
    no_such_task,
)
from .store import DEFAULT_NAMESPACE, Keyspace, Store
from .store.codec import CompiledWorkflow, compile_workflow, encode_input, run_options
from .store.layout import resolve as resolve_layout
from .store.reads import FINISHED_STATES
from .store.scripts import Call, ScriptBatch
from .store.triggers import Trigger, TriggerStore

if TYPE_CHECKING:
    from engine.runtime.history import Timeline

    from .schedules import PreviewTick, ScheduleInfo, ScheduleSpec
    from .store.gauges import Gauges
    from .store.keys import ShardKeys
    from .store.schedules import TickOutcome

DEFAULT_RETENTION_S = 7 * 24 * 3600
SWEEP_S = 0.05  # a housekeeping round's time for a retention backlog (maintain's sweep_s)
DEFAULT_EVENT_CAP = 2000
PUSH_BATCH = 256  # at most this many workflows per push.lua call
PUSH_BATCH_TASKS = 2048  # and about this many tasks
PUSH_PIPELINE = 16  # push.lua calls per round trip
EXPAND_GRACE_MS = 3000  # a map still expanding after this is finished by housekeeping
PUSH_RETRY_S = 30.0  # how long a push goes on trying while Redis is unreachable
DEFAULT_WAIT_TIMEOUT_MS = 1000  # with wait_replicas: how long a write waits for replicas
WAIT_MARGIN_S = 5.0  # the read timeout of an engine that WAITs: its WAIT's timeout plus this
# "count[17]" or "count.17" (as the console shows it): item 17 of map count
ITEM_NAME = re.compile(r"^(.*?)(?:\[(\d+)\]|\.(\d+))$")


class _RanNothing(Exception):
    """A push batch some call of which a server answered without running it (a cluster
    shard failing over): sent again while time is left (``Engine._send_push``)."""

    def __init__(self, results: list[Any]) -> None:
        super().__init__("a call was answered by a server that ran nothing")
        self.results = results


def _span(ids: list[str]) -> str:
    """A list of ids in a message: all of a few, else the first and last."""
    return ", ".join(ids) if len(ids) <= 3 else f"{ids[0]} ... {ids[-1]}"


def _ms(when: float | datetime | None) -> int | None:
    """Epoch seconds or a datetime (naive: local time) as epoch ms."""
    if when is None:
        return None
    if isinstance(when, datetime):
        return round(when.timestamp() * 1000)
    if isinstance(when, bool) or not isinstance(when, int | float) or when != when:
        raise DefinitionError(f"a time is epoch seconds or a datetime, not {show_value(when)}")
    return round(when * 1000)


def default_actor() -> str:
    """Who this process acts for, as events record it: ``user@host``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (containers)
        user = "?"
    return f"{user}@{socket.gethostname()}"


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
        shards: int | None = None,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        event_cap: int = DEFAULT_EVENT_CAP,
        retention_s: float = DEFAULT_RETENTION_S,
        embedded: EmbeddedRedis | None = None,
        actor: str | None = None,
        push_retry_s: float = PUSH_RETRY_S,
        wait_replicas: int = 0,
        wait_timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS,
        max_descendants: int = MAX_DESCENDANTS,
    ) -> None:
        if wait_replicas < 0:
            raise DefinitionError(f"wait_replicas must be 0 or more, not {wait_replicas}")
        if wait_timeout_ms < 0:
            raise DefinitionError(f"wait_timeout_ms must be 0 or more, not {wait_timeout_ms}")
        self.redis = client
        # the stored layout, or a new one (engine/store/layout.py)
        self.keys: Keyspace = resolve_layout(client, namespace, shards)
        self.max_payload = max_payload
        if (
            isinstance(max_descendants, bool)
            or not isinstance(max_descendants, int)
            or max_descendants < 1
        ):
            raise DefinitionError(
                f"max_descendants must be a whole number from 1, not {show_value(max_descendants)}"
            )
        # the most child runs (children, theirs...) one run may have under it: the wait
        # keeper's bound when it starts one (engine.runtime.child_runs)
        self.max_descendants = max_descendants
        self.event_cap = event_cap
        self.retention_s = retention_s
        self.embedded = embedded
        self.store = Store(client, self.keys, event_cap, wait_replicas, wait_timeout_ms)
        self.wait_replicas = wait_replicas
        self.actor = actor or default_actor()
        self.push_retry_s = push_retry_s
        self._rr = itertools.count()
        # compiled per version, with the deployment's rate limits it was compiled with
        self._templates: dict[
            str, tuple[CompiledWorkflow, int, list[str], dict[str, RateLimit]]
        ] = {}

    # -- connecting ---------------------------------------------------------------------

    @classmethod
    def connect(cls, url: str | None = None, **options: Any) -> Engine:
        """Connect to ``url``, else ``REDISFLOW_URL``, else a private embedded redis-server.

        ``rediss://`` URLs take their TLS files as query options (``ssl_ca_certs``,
        ``ssl_certfile``, ``ssl_keyfile``). ``redis+cluster://host:port`` (or
        ``rediss+cluster://``) connects to a Redis Cluster through any of its nodes.
        Messages show the URL with its password as ***.

        ``shards`` (option): the deployment's shard count, stored in Redis by the first
        client that gives it (on a cluster: one per master by default) and checked by
        every later one (:mod:`engine.store.layout`).

        ``max_descendants`` (option, default 10,000): the most child runs (children,
        theirs, ...) one run may have under it when this engine's wait keeper starts
        them (:mod:`engine.runtime.child_runs`).

        ``wait_replicas`` (option, default 0): after every state change (each script
        call or batch), wait for that many replicas to acknowledge it, up to
        ``wait_timeout_ms`` (default 1000): fewer raise :class:`NotReplicatedError`
        (the write stands on the master; see docs/cluster.md, Failover).

        Every reply is waited for at most ``REDISFLOW_TIMEOUT`` seconds (default 10; with
        ``wait_replicas``, at least ``wait_timeout_ms`` plus 5 s), with TCP keepalive on
        (:func:`engine.connect.urls.connection_defaults`): a frozen Redis raises
        ``redis.TimeoutError`` rather than hanging a call.

        Raises :class:`UnreachableError` when Redis does not answer,
        :class:`NoDatabaseError` when it has no database of the URL's number, and
        :class:`DefinitionError` for a malformed URL (:func:`engine.connect.urls.parse_url`).
        """
        from engine.connect.urls import (
            URLError,
            missing_database,
            not_redis,
            open_client,
            read_timeout,
            redact,
        )

        url = url or url_from_env()
        timeout = read_timeout()
        if options.get("wait_replicas") and options.get("wait_timeout_ms"):
            # a WAIT holds its connection that long: the reply may take as much more
            timeout = max(timeout, options["wait_timeout_ms"] / 1000 + WAIT_MARGIN_S)
        embedded = None
        if url is None:
            embedded = EmbeddedRedis().start()
            url = embedded.url
        try:
            client = open_client(url, decode_responses=True, socket_timeout=timeout)
        except (redis.ConnectionError, redis.exceptions.RedisClusterException) as e:
            raise UnreachableError(f"cannot reach Redis at {redact(url)}: {e}") from None
        except URLError as e:
            raise DefinitionError(str(e)) from None
        except ValueError as e:
            if embedded is not None:
                embedded.stop()
            raise DefinitionError(f"invalid Redis URL {redact(url)}: {e}") from None
        try:
            client.ping()
        except redis.AuthenticationError as e:
            raise UnreachableError(f"cannot log in to Redis at {redact(url)}: {e}") from None
        except redis.TimeoutError:
            raise UnreachableError(
                f"Redis at {redact(url)} did not answer within {timeout:g} s (REDISFLOW_TIMEOUT)"
            ) from None
        except (redis.ConnectionError, OSError) as e:
            raise UnreachableError(f"cannot reach Redis at {redact(url)}: {e}") from None
        except redis.exceptions.InvalidResponse as e:
            close_client(client)
            raise UnreachableError(not_redis(url, e)) from None
        except redis.ResponseError as e:  # SELECT refused while connecting
            close_client(client)
            if embedded is not None:
                embedded.stop()
            message = missing_database(url, e)
            if message is None:
                raise
            raise NoDatabaseError(message) from None
        try:
            return cls(client, embedded=embedded, **options)
        except Exception:  # e.g. a --shards other than the deployment's: close, then say so
            close_client(client)
            if embedded is not None:
                embedded.stop()
            raise

    @property
    def url(self) -> str:
        """Where this handle connects, fit to print (password as ***). The full URL, to
        hand to another process, is :func:`engine.connect.urls.url_of` of :attr:`redis`."""
        from engine.connect.urls import redact, url_of

        return redact(url_of(self.redis))

    def close(self) -> None:
        """Close the connection pool and stop the embedded server if this handle started one."""
        close_client(self.redis)
        if self.embedded is not None:
            self.embedded.stop()
            self.embedded = None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- pushing ------------------------------------------------------------------------

    def compile(self, wf: Workflow) -> CompiledWorkflow:
        """Validate ``wf`` and lay it out for storing (:class:`DefinitionError` if invalid).

        Pass the result to :meth:`push_many` to push a definition many times, or from
        several places, validating it once. The deployment's rate limits by task type
        (:meth:`put_rate_limit`) apply to its tasks that have none of their own.
        """
        return self._compile(wf, {})

    def _compile(
        self, wf: Workflow, limits: dict[tuple[str, ...], dict[str, RateLimit]]
    ) -> CompiledWorkflow:
        """:meth:`compile`, the deployment's rate limits read once per set of task types
        in ``limits`` (a push of many definitions reads them once, not once each)."""
        types = tuple(sorted(set(task_types(wf))))
        found = limits.get(types)
        if found is None:
            found = limits[types] = self._type_limits(list(types))
        return compile_workflow(wf, self.max_payload, type_limits=found)

    def _type_limits(self, types: list[str]) -> dict[str, RateLimit]:
        """The deployment's rate limits of ``types``, read again while Redis is unreachable
        (up to ``push_retry_s``, as a push's calls are sent)."""
        return patiently(lambda: self.store.rate_limits.of_types(types), self.push_retry_s)

    def push(
        self,
        wf: Workflow | CompiledWorkflow,
        input: Any = None,
        *,
        start_in: float | None = None,
        start_at: datetime | None = None,
        key: str | None = None,
    ) -> str:
        """Validate ``wf`` and store it; its root tasks become ready. Returns its id.

        ``input`` (any JSON value) is this run's own: every task sees it as ``task.input``,
        while the definition is stored once for every run. Nothing is written when the
        definition or the input is invalid (:class:`DefinitionError`).

        ``start_in`` (seconds) or ``start_at`` (an aware datetime) starts it later: until
        then it is ``scheduled`` (visible, cancellable; ``release`` starts it at once).

        ``key`` makes the push idempotent: while a workflow pushed with the same key
        exists (until it is cleaned up), pushing again returns its id and writes nothing.
        Keys starting with ``child:`` or ``trigger:`` are the engine's own
        (:data:`engine.spec.flow.RESERVED_KEY_PREFIXES`): refused (:class:`DefinitionError`).
        """
        return self.push_runs(
            [RunRequest(wf, input, key=key)], start_in=start_in, start_at=start_at
        )[0].id

    def push_many(
        self,
        workflows: Iterable[Workflow | CompiledWorkflow],
        inputs: Iterable[Any] | None = None,
        *,
        start_in: float | None = None,
        start_at: datetime | None = None,
    ) -> list[str]:
        """Validate every workflow (and input) first, then store them all in few round trips.

        Returns their ids in order. Nothing is written if any definition is invalid.
        Many workflows go in several script calls, each written whole or not at all: when
        Redis refuses one (out of memory), no more are sent and, if earlier calls stored
        workflows, :class:`PartialWriteError` says exactly which (``stored_ids``, ``done``
        per workflow: its id or None) and which were not (``failed``).
        Workflows with the same tasks share one stored definition; pushing one
        :class:`Workflow` object many times validates and compiles it once.

        While Redis is unreachable (a restart, a failover) the push goes on trying for
        ``push_retry_s`` seconds; each call carries a token, so a call whose reply was
        lost is not applied twice. ``start_in`` / ``start_at``: as :meth:`push`.
        """
        workflows = list(workflows)
        values: list[Any] = [None] * len(workflows)
        if inputs is not None:
            values = list(inputs)
            if len(values) != len(workflows):
                raise DefinitionError(
                    f"{len(values)} inputs for {len(workflows)} workflows: give one per workflow"
                )
        runs = [RunRequest(wf, v) for wf, v in zip(workflows, values, strict=True)]
        try:
            return [r.id for r in self.push_runs(runs, start_in=start_in, start_at=start_at)]
        except PartialWriteError as e:  # its done as ids, as this returns them
            e.done = [d.id if isinstance(d, Pushed) else None for d in e.done]
            raise

    def push_runs(
        self,
        runs: Iterable[RunRequest],
        *,
        start_in: float | None = None,
        start_at: datetime | None = None,
    ) -> list[Pushed]:
        """:meth:`push_many` for runs that carry their own options (idempotency key,
        template): one :class:`Pushed` each, in order, saying whether it already existed.

        Stopped part-way (a call refused after others stored runs):
        :class:`PartialWriteError`, its ``done`` a :class:`Pushed` or None per run.

        A run whose workflow declares a concurrency key goes to the shard of its gate, and
        one with an idempotency key to the shard of that key, so each check is one script
        on one shard.
        """
        later_ms = start_delay_ms(start_in, start_at)
        rows, routes = self._push_rows(runs)
        calls = self._push_calls(rows, routes, later_ms)
        return self._send_push_calls(calls, len(rows))

    def _push_rows(
        self, runs: Iterable[RunRequest]
    ) -> tuple[list[tuple[CompiledWorkflow, str, str]], list[str | None]]:
        """Each run checked and laid out for push.lua: its compiled definition (once per
        workflow object), its input's text and its options; and the key that routes it
        to a shard (its first gate, or its idempotency key; None: any shard)."""
        seen: dict[int, CompiledWorkflow] = {}
        rows: list[tuple[CompiledWorkflow, str, str]] = []
        routes: list[str | None] = []
        checked: set[str] = set()  # definitions whose child templates exist
        limits: dict[tuple[str, ...], dict[str, RateLimit]] = {}
        for run in runs:
            text = "" if run.input is None else encode_input(run.input, self.max_payload)
            wf = run.workflow
            c = seen.get(id(wf))
            if c is None:
                if isinstance(wf, CompiledWorkflow):
                    c = seen[id(wf)] = wf
                else:
                    c = seen[id(wf)] = self._compile(wf, limits)
            if c.input_schema is not None:
                check_input(c.input_schema, run.input, c.name)
            if c.runs and c.digest not in checked:
                check_templates(self, c)
                checked.add(c.digest)
            gates: list[tuple[str, int]] = []
            if c.concurrency is not None:
                gates.append((c.concurrency.gate(c.name, run.input), c.concurrency.limit))
            gates += run.gates
            if run.key is not None:
                own = ""  # the engine's own key for this run, the only reserved one it may use
                if run.parent is not None:
                    own = child_key(run.parent)
                elif run.trigger is not None:
                    own = trigger_key(run.trigger)
                check_run_key(run.key, own)
            options = run_options(
                template=run.template, version=run.version, key=run.key, gates=gates,
                parent=run.parent, depth=run.depth, root=run.root,
                rate_keys=rate_keys(c.name, c.rate_keys, run.input) if c.rate_keys else None,
            )  # fmt: skip
            rows.append((c, text, options))
            routes.append(gates[0][0] if gates else run.key)
        return rows, routes

    def _push_calls(
        self,
        rows: list[tuple[CompiledWorkflow, str, str]],
        routes: list[str | None],
        later_ms: int,
    ) -> list[tuple[list[int], Call[Any]]]:
        """push.lua calls for ``rows``: each shard's runs in calls of at most
        :data:`PUSH_BATCH` runs and about :data:`PUSH_BATCH_TASKS` tasks, with the runs
        (their numbers in ``rows``) each call carries."""
        calls: list[tuple[list[int], Call[Any]]] = []
        # runs without a route go round robin over the shards, one workflow at a time
        routed: dict[int, list[int]] = {}
        shards = self.keys.shards
        for n, r in enumerate(routes):
            shard_no = self.keys.shard_for(r) if r is not None else next(self._rr) % shards
            routed.setdefault(shard_no, []).append(n)
        for shard_no, members in sorted(routed.items()):
            shard = self.keys.shard(shard_no)
            start = 0
            while start < len(members):
                end, tasks = start, 0
                while end < len(members) and end - start < PUSH_BATCH and tasks < PUSH_BATCH_TASKS:
                    tasks += rows[members[end]][0].tasks
                    end += 1
                part = members[start:end]
                call = self.store.calls.push_call(
                    shard, [rows[n] for n in part], secrets.token_hex(8), self.actor, later_ms
                )
                calls.append((part, call))
                start = end
        return calls

    def _send_push_calls(
        self, calls: list[tuple[list[int], Call[Any]]], runs: int
    ) -> list[Pushed]:
        """Send the calls, :data:`PUSH_PIPELINE` a round trip: one :class:`Pushed` per
        run, in order, or :class:`PartialWriteError` / :class:`NotReplicatedError`."""
        out: list[Pushed | None] = [None] * runs
        unconfirmed: list[int] = []  # runs whose WAIT fell short
        failed: list[int] = []  # runs refused, or not sent after a refusal
        unknown: list[int] = []  # runs whose call got no reply: maybe written
        cause: BaseException | None = None
        # Each call is atomic, the calls together are not: once one is refused no more are
        # sent, and what the others wrote is reported exactly (PartialWriteError).
        for at in range(0, len(calls), PUSH_PIPELINE):
            chunk = calls[at : at + PUSH_PIPELINE]
            if cause is not None:
                failed.extend(n for part, _ in chunk for n in part)
                continue
            batch = self.store.scripts.batch()
            for _, call in chunk:
                batch.add(call)
            try:
                results, short = self._send_push(batch), []
            except NotReplicatedError as e:  # written: go on, say so once all are sent
                results, short = e.results, e.unconfirmed
            except Exception as e:  # noqa: BLE001 - Redis went away during these calls
                cause = e
                unknown.extend(n for part, _ in chunk for n in part)
                continue
            for k, ((part, _), result) in enumerate(zip(chunk, results, strict=True)):
                if isinstance(result, Exception):
                    cause = cause or result
                    failed.extend(part)
                    continue
                for n, wid in zip(part, result, strict=True):
                    existing = wid.startswith("=")
                    out[n] = Pushed(wid[1:] if existing else wid, existing)
                if k in short:
                    unconfirmed.extend(part)
        if cause is not None:
            raise self._partly_pushed(out, sorted(failed), sorted(unknown), unconfirmed, cause)
        pushed = [p for p in out if p is not None]
        if unconfirmed:
            ids = [out[n].id for n in sorted(unconfirmed)]  # type: ignore[union-attr]
            raise NotReplicatedError(
                f"{len(ids)} of {len(pushed)} workflow(s) pushed but acknowledged by fewer "
                f"than {self.wait_replicas} replica(s) in time (ids {_span(ids)}): they "
                "exist, but a failover now could lose them; push them again with an "
                "idempotency key to be sure",
                list(pushed),
                sorted(unconfirmed),
            )
        return pushed

    def _partly_pushed(
        self,
        out: list[Pushed | None],
        failed: list[int],
        unknown: list[int],
        unconfirmed: list[int],
        cause: BaseException,
    ) -> BaseException:
        """The error of a push stopped by ``cause``: the cause itself when nothing was
        written, else a :class:`PartialWriteError` naming what was."""
        ids = [p.id for p in out if p is not None]
        if not ids:
            return cause
        rest = f"the other {len(failed)} were not"
        if unknown:
            rest = f"{len(failed)} were not and {len(unknown)} may have been (no reply came)"
        short = f"; {len(unconfirmed)} not yet on enough replicas" if unconfirmed else ""
        return PartialWriteError(
            f"{len(ids)} of {len(out)} workflow(s) were pushed (ids {_span(ids)}), {rest}"
            f"{short}: {cause}",
            done=list(out),
            stored_ids=ids,
            failed=failed,
            cause=cause,
            unknown=unknown,
            unconfirmed=sorted(unconfirmed),
        )

    def _send_push(self, batch: ScriptBatch) -> list[Any]:
        """Run a batch of push calls, sending it again for up to ``push_retry_s`` while
        Redis is unreachable or some call was answered by a server that ran nothing (a
        cluster shard failing over); past that, the replies as they are. The calls that
        did run reply as they first did when sent again: each carries its push token."""

        def send() -> list[Any]:
            results = batch.execute()
            if any(isinstance(r, NOT_RUN_REPLIES) for r in results):
                raise _RanNothing(results)
            return results

        try:
            return patiently(send, self.push_retry_s, errors=(*UNREACHABLE, _RanNothing))
        except _RanNothing as e:
            return e.results

    # -- templates --------------------------------------------------------------------

    def put_template(
        self, text: str, *, name: str | None = None, source: str = "<text>"
    ) -> TemplateInfo:
        """Store a workflow file's ``text`` (YAML or JSON, one workflow) as the next
        version of template ``name`` (default: the workflow's name). Putting the latest
        version's text again stores nothing. The workflow is validated first
        (:class:`DefinitionError`: nothing written). ``warnings`` on what it returns:
        a template that reaches itself through ``run:`` (directly or through other stored
        templates), whose every run starts children until a limit stops it."""
        from engine.spec.loader import load_text  # YAML: loaded for a definition's text only

        wfs = load_text(text, source)
        if len(wfs) != 1:
            raise DefinitionError(f"{source}: a template is one workflow; this file has {len(wfs)}")
        wf = wfs[0]
        name = wf.name if name is None else name
        check_template_name(name, source)
        if not wf.name:
            wf.name = name
        compiled = self.compile(wf)
        version, new = self.store.templates.put(name, text, source)
        info = self.store.templates.get(name, version)
        info.new = new
        cycle = cycle_of(self, name, version) if compiled.runs else None
        if cycle is not None:
            info.warnings.append(
                f"template {name} runs itself through run: ({' -> '.join(cycle)}): each run "
                f"starts child runs until a limit ends them (at most {MAX_DEPTH} deep, "
                f"{self.max_descendants:,} under one run), failing them there"
            )
        return info

    def templates(self) -> list[TemplateInfo]:
        """Every template's latest version (without its text), by name."""
        return self.store.templates.all()

    def template(self, name: str, version: int | None = None) -> TemplateInfo:
        """One version of a template (the latest by default), its text included
        (:class:`NotFoundError` if there is none)."""
        return self.store.templates.get(name, version)

    def remove_template(self, name: str) -> None:
        """Delete template ``name``, every version; its runs stay as they are."""
        self.store.templates.remove(name)
        self._templates.pop(name, None)

    def compile_template(
        self, name: str, version: int | None = None
    ) -> tuple[CompiledWorkflow, int]:
        """Template ``name`` (its latest version by default) compiled for pushing, and
        the version: compiled once per version and kept."""
        v = self.store.templates.latest(name) if version is None else version
        cached = self._templates.get(name)
        if cached is not None and cached[1] == v:
            if self._type_limits(cached[2]) == cached[3]:
                return cached[0], v
        text = self.store.templates.text(name, v)
        if text is None:
            raise NotFoundError(f"template {name!r} has no version {v}")
        from engine.spec.loader import load_text  # YAML: loaded for a definition's text only

        wf = load_text(text, f"template {name} v{v}")[0]
        if not wf.name:
            wf.name = name
        types = task_types(wf)
        limits = self._type_limits(types)
        compiled = compile_workflow(wf, self.max_payload, type_limits=limits)
        self._templates[name] = (compiled, v, types, limits)
        return compiled, v

    def run(
        self,
        name: str,
        input: Any = None,
        *,
        key: str | None = None,
        version: int | None = None,
        start_in: float | None = None,
        start_at: datetime | None = None,
        parent: str | None = None,
        depth: int = 0,
        root: str | None = None,
    ) -> RunResult:
        """Push a run of template ``name`` (its latest version, or ``version``) with
        ``input``. With ``key`` it is idempotent (:meth:`push`): a live run pushed with
        the same key is returned (``existing``) and nothing is written. The run records
        its template and version (``list(template=name)``). ``parent``, ``depth`` and
        ``root``: a child run's parent task, nesting and the run at the top of its tree
        (:mod:`engine.runtime.child_runs` sets them)."""
        compiled, v = self.compile_template(name, version)
        pushed = self.push_runs(
            [
                RunRequest(
                    compiled, input, key=key, template=name, version=v, parent=parent,
                    depth=depth, root=root,
                )  # fmt: skip
            ],
            start_in=start_in,
            start_at=start_at,
        )[0]
        return RunResult(pushed.id, pushed.existing, name, v)

    # -- rate limits --------------------------------------------------------------------

    def put_rate_limit(
        self,
        task_type: str,
        *,
        key: str,
        limit: int,
        per: str = "1s",
        burst: int = 1,
    ) -> RateLimit:
        """Limit how fast tasks of ``task_type`` start, deployment-wide: at most ``limit``
        per ``per`` ("1s", "1m", "1h"...) for each value of ``key`` (``input.<field>``,
        ``payload.<field>`` or a constant), ``burst`` at once after a quiet spell.

        It applies to runs pushed from now on, to their tasks of that type with no rate
        limit of their own (a task's ``rate_limit`` or its workflow's ``rate_limits``
        come first). Checked first (:class:`DefinitionError`: nothing written).
        """
        from engine.spec.definition import check_name

        check_name(task_type, "rate limit: task type", None, empty=True)
        r = rate_limit_from(
            {"key": key, "limit": limit, "per": per, "burst": burst},
            f"rate limit of type {task_type!r}",
        )
        assert r is not None
        self.store.rate_limits.put(task_type, r)
        return r

    def rate_limits(self) -> dict[str, RateLimit]:
        """The deployment's rate limits, by task type."""
        return self.store.rate_limits.all()

    def delete_rate_limit(self, task_type: str) -> None:
        """Remove the rate limit of ``task_type`` (:class:`NotFoundError` if none); runs
        pushed before keep theirs."""
        self.store.rate_limits.delete(task_type)

    def plan(self, wf: Workflow, assume: dict[str, str] | None = None) -> Plan:
        """What would happen if the tasks named in ``assume`` ended so (``"failed"``,
        ``"succeeded"`` or ``"skipped"``) and the others succeeded: each task's end,
        whether it runs, why, and the workflow's result. Pure: nothing is written.

        Example:
            >>> engine.plan(wf, assume={"extract": "failed"}).state
            'failed'
        """
        return plan_workflow(wf, assume)

    # -- steering -----------------------------------------------------------------------

    def pause(self, wid: str | int | None = None, *, key: str | None = None) -> int:
        """Hold a running workflow (and its running child runs); returns how many ready
        tasks were held back."""
        return self._steer("pause", self._wid(wid, key))

    def release(self, wid: str | int | None = None, *, key: str | None = None) -> int:
        """Resume a paused workflow (and its paused child runs); returns how many held
        tasks went back to the queues."""
        return self._steer("release", self._wid(wid, key))

    def cancel(self, wid: str | int | None = None, *, key: str | None = None) -> int:
        """Cancel a running or paused workflow and its child runs; returns how many tasks
        were cancelled."""
        return self._steer("cancel", self._wid(wid, key))

    def _steer(self, op: str, wid: str | int) -> int:
        """``op`` on workflow ``wid``, then on its child runs (:mod:`engine.runtime.child_runs`),
        whose links a cleanup reads first (it deletes them)."""
        kids = self._children_before_cleanup(wid) if op == "cleanup" else None
        count = getattr(self.store.calls, op)(wid, self.actor)
        kids = self.store.calls.children_of(wid) if kids is None else kids
        if kids:
            cascade_to(self, kids, op)
        return int(count or 0)

    def _children_before_cleanup(self, wid: str | int) -> list[str]:
        # a user who may not read them may not clean up either: the script says so
        try:
            return self.store.calls.children_of(wid)
        except redis.exceptions.NoPermissionError:
            return []

    def signal(
        self,
        wid: str | int | None,
        name: str,
        payload: Any = None,
        *,
        key: str | None = None,
        signal_id: str | None = None,
        reject: bool = False,
        comment: str | None = None,
        by: str | None = None,
        identity: str | None = None,
    ) -> SignalResult:
        """Send signal ``name`` to a workflow (by id, or ``key=`` its idempotency key):
        the wait task waiting for it ends, its ``payload`` (any JSON value) becoming the
        task's output; with ``reject`` the task fails instead ("rejected by <by>:
        <comment>"). A signal before its wait task is reached is kept for it (at most 100
        per name, and 8 payloads of ``max_payload`` in all per run). A ``signal_id`` sent
        again is applied once (its first outcome is returned). ``by`` is who sends it as
        the sender says; ``identity`` who as the caller has authenticated it (default:
        :attr:`actor`, the OS user): status and events record both.

        Raises :class:`NotFoundError` for an unknown workflow, :class:`StateError` for a
        finished one, one with no task waiting for ``name`` or whose waits for it all
        ended, or one whose kept signals are at their limit; :class:`DefinitionError` for
        a bad name or payload (nothing written)."""
        from engine.runtime.signals import send

        return send(
            self, self._wid(wid, key), name, payload,
            signal_id=signal_id, reject=reject, comment=comment, by=by, identity=identity,
        )  # fmt: skip

    def retry(
        self,
        wid: str | int | None = None,
        tasks: Iterable[str] | None = None,
        *,
        key: str | None = None,
    ) -> int:
        """Run failed tasks again, inputs unchanged; returns how many tasks were reset.

        Without ``tasks``: every failed and skipped task of a failed workflow. With task
        names: those failed tasks and the skipped tasks that depend only on them; a map
        runs its failed items again. ``"count[17]"`` (or ``"count.17"``) names item 17 of
        map ``count``: that failed item alone runs again.
        """
        wid = self._wid(wid, key)
        indexes: list[str] = []
        if tasks is not None:
            names = self.store.reads.task_names(wid)
            items: dict[int, str] = {}  # map index -> a name given of one of its items
            for name in tasks:
                if name in names:
                    indexes.append(str(names.index(name)))
                    continue
                item = ITEM_NAME.match(name)
                if item is None or item.group(1) not in names:
                    raise no_such_task(wid, name, names)
                number = item.group(2) or item.group(3)
                c = names.index(item.group(1))
                items.setdefault(c, name)
                indexes.append(f"{c}.{int(number)}")
            if items:
                maps = self.store.reads.maps_among(wid, items)
                for c, name in items.items():
                    if c not in maps:
                        raise NotFoundError(
                            f"workflow {wid}: task {names[c]!r} is not a map, so "
                            f"{name!r} names no item"
                        )
        reset = self.store.calls.retry(wid, indexes, self.actor)
        self.store.calls.expand_due(self.keys.shard_of(wid))  # a map reset by the retry
        return reset

    def cleanup(self, wid: str | int | None = None, *, key: str | None = None) -> None:
        """Delete a finished workflow and everything kept of it (its finished child runs
        too)."""
        self._steer("cleanup", self._wid(wid, key))

    def expire(
        self, wid: str | int | None, ttl: float | None, *, key: str | None = None
    ) -> float | None:
        """Change a workflow's own retention: keep it ``ttl`` seconds, or (``None`` or
        ``-1``) until it is cleaned up by hand.

        A finished workflow is kept that long from now; one not finished yet keeps it for
        when it ends. Returns when a finished workflow goes (epoch seconds), ``None`` when
        it is kept until cleaned up by hand or not finished yet. Raises
        :class:`DefinitionError` for a ttl that is not above 0 (nothing is written)."""
        if ttl is None or (not isinstance(ttl, bool) and ttl == -1):
            ttl_ms = -1
        elif isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl <= MAX_TTL:
            raise DefinitionError(
                f"a retention is a number of seconds above 0 and at most {MAX_TTL:.0f}, "
                f"or -1 (keep it), not {show_value(ttl)}"
            )
        else:
            ttl_ms = max(1, round(ttl * 1000))
        due = self.store.calls.expire(self._wid(wid, key), ttl_ms, self.actor)
        return due / 1000.0 if due > 0 else None

    def id_for_key(self, key: str) -> str:
        """The id of the workflow pushed with idempotency key ``key`` (``push(key=)``,
        ``Idempotency-Key``). Raises :class:`NotFoundError` when none exists."""
        check_key(key)
        return self.store.reads.id_for_key(key)

    def _wid(self, wid: str | int | None, key: str | None) -> str | int:
        """The workflow an id or (``key=``) an idempotency key names: exactly one."""
        if (wid is None) == (key is None):
            raise DefinitionError("give a workflow id or key=, not both or neither")
        return self.id_for_key(key) if key is not None else wid  # type: ignore[return-value]

    def cleanup_finished(self, older_than_s: float = 0.0) -> int:
        """Clean up every finished workflow that finished more than ``older_than_s`` ago."""
        cutoff = int((self.server_time() - older_than_s) * 1000)
        removed = 0
        for shard in self.keys.all_shards():
            for state in FINISHED_STATES:
                skip = 0  # entries that could not be cleaned stay in the index: page past them
                while wids := self.store.reads.finished_page(shard, state, cutoff, skip):
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
        return self.store.reads.count_finished(int((self.server_time() - older_than_s) * 1000))

    def maintain(
        self,
        max_lost: int = 5,
        limit: int = 200,
        keeper: str = "",
        hold_s: float = 0.0,
        lease_s: float = 0.0,
        waits: bool = True,
        sweep_s: float = SWEEP_S,
    ) -> list[int]:
        """One round of housekeeping on every shard (see ``reap.lua``, and with ``waits``
        a pass of the wait keeper: wait tasks reached, timers due, child runs; an agent,
        which runs a keeper of its own, leaves it out); agents call this
        as ``keeper``: a shard another agent looks after (for ``hold_s`` after its last
        round) is left to it. ``lease_s``: the keeper's lease, which says how long a gap
        between calls shows a stalled Redis (its leases are then moved on).

        Retention removes at most ``limit`` finished workflows per script call; a shard
        whose batch came back full is swept again (that step of ``reap.lua`` alone, every
        such shard in one round trip) until it is caught up or ``sweep_s`` has passed.
        Returns [agents reaped, tasks requeued, retries promoted, workflows cleaned,
        shards still behind (call again soon)]."""
        totals = [0, 0, 0, 0]
        behind: list[ShardKeys] = []
        retention_ms = int(self.retention_s * 1000)
        hold_ms = int(hold_s * 1000)
        lease_ms = int(lease_s * 1000)
        short: NotReplicatedError | None = None  # done on the master: the rest goes on
        for shard in self.keys.all_shards():
            try:
                reaped = self.store.calls.reap(
                    shard, retention_ms, max_lost, limit, keeper, hold_ms, lease_ms
                )
            except NotReplicatedError as e:
                reaped, short = e.results[0], short or e  # type: ignore[assignment]

            if reaped is None:
                continue
            out, late = reaped
            totals = [a + b for a, b in zip(totals, out, strict=True)]
            if out[3] >= limit:  # a full batch: more may be due
                behind.append(shard)
            # attempts past their task's timeout fail as their agents would; maps whose
            # expansion the agent that began it did not finish are expanded
            steps: list[Callable[[], int]] = (
                [functools.partial(self.store.calls.time_out, shard, late)] if late else []
            )
            steps.append(
                functools.partial(self.store.calls.expand_due, shard, older_than_ms=EXPAND_GRACE_MS)
            )
            for step in steps:
                try:
                    step()
                except NotReplicatedError as e:
                    short = short or e
        if behind:
            try:
                removed, behind = self.store.calls.sweep(
                    behind, retention_ms, limit, keeper, hold_ms, lease_ms, sweep_s
                )
                totals[3] += removed
            except NotReplicatedError as e:
                short = short or e
        if waits:  # wait tasks reached, timers due, child runs
            from engine.runtime.wait_keeper import WaitKeeper

            try:
                WaitKeeper(self).step()
            except NotReplicatedError as e:
                short = short or e
        if short is not None:
            raise short
        return [*totals, len(behind)]

    # -- reading ------------------------------------------------------------------------

    def server_warnings(self) -> list[str]:
        """What is wrong with the server's settings for redisflow, one line each: an
        eviction policy other than ``noeviction`` (evicted keys are lost workflows), memory
        near ``maxmemory``. Agents print these at start; the console shows them."""
        from engine.connect.health import server_warnings

        return server_warnings(self.redis)

    def server_time(self) -> float:
        """Redis's clock, in epoch seconds (scripts timestamp with it too)."""
        return self.store.server_time()

    def status(self, wid: str | int | None = None, *, key: str | None = None) -> WorkflowStatus:
        """Everything stored of one workflow (by id, or ``key=`` its idempotency key):
        state, counts by task state, every task.

        A small workflow is read atomically; a big one in slices (see
        :meth:`engine.store.reads.Reads.status`).
        """
        return self.store.reads.status(self._wid(wid, key))

    def items(
        self,
        wid: str | int,
        task_name: str,
        offset: int = 0,
        limit: int = 50,
        state: str | None = None,
    ) -> list[ItemStatus]:
        """A page of the items of map ``task_name``, by item index; with ``state``, only
        the items in that state (``failed`` reads the failed set: cheap at any size).

        Raises :class:`NotFoundError` when the workflow or the task is missing, or the
        task is not a map.
        """
        return self.store.reads.items(wid, task_name, offset, limit, state)

    def map_outputs(
        self, wid: str | int, task_name: str, offset: int = 0, limit: int = 1000
    ) -> list[Any]:
        """The outputs of map ``task_name``'s items from ``offset``, in item order
        (``None`` for a failed item): a map of more than 10,000 items gives its gather a
        handle, ``{"map": index, "items": n, "workflow": wid}``, to page with this."""
        return self.store.reads.map_outputs(wid, task_name, offset, limit)

    def state(self, wid: str | int) -> WorkflowState:
        """The current state of one workflow."""
        return self.store.reads.state(wid)

    def summaries(self, wids: Iterable[str]) -> list[WorkflowSummary]:
        """The list fields of several workflows in one round trip (missing ones left out)."""
        return self.store.reads.summaries(wids)

    def list_ids(
        self,
        state: str | None = None,
        name: str | None = None,
        offset: int = 0,
        limit: int = 50,
        template: str | None = None,
        oldest_first: bool = False,
        created_after: float | datetime | None = None,
        created_before: float | datetime | None = None,
    ) -> list[str]:
        """Workflow ids, newest first (or oldest first), one page at a time; filter by
        state, name and/or the template they run, and by creation time: at or after
        ``created_after``, before ``created_before`` (epoch seconds or datetimes; found by
        searching the ordered indexes, not by reading every workflow)."""
        return self.store.reads.list_ids(
            state, name, offset, limit, template, oldest_first,
            _ms(created_after), _ms(created_before),
        )  # fmt: skip

    def list_workflows(
        self,
        state: str | None = None,
        name: str | None = None,
        offset: int = 0,
        limit: int = 50,
        template: str | None = None,
        oldest_first: bool = False,
        created_after: float | datetime | None = None,
        created_before: float | datetime | None = None,
    ) -> list[WorkflowSummary]:
        """A page of workflow summaries, newest first (see :meth:`list_ids`)."""
        return self.summaries(
            self.list_ids(
                state, name, offset, limit, template, oldest_first, created_after, created_before
            )
        )

    def count(
        self,
        state: str | None = None,
        name: str | None = None,
        template: str | None = None,
        created_after: float | datetime | None = None,
        created_before: float | datetime | None = None,
    ) -> int:
        """How many workflows match: O(1) per shard for one filter; with more, a walk of
        the name's (or template's) index; a creation-time window is searched (and walked
        only to check a state)."""
        return self.store.reads.count(
            state, name, template, _ms(created_after), _ms(created_before)
        )

    def names(self, prefix: str = "", limit: int = 50) -> list[tuple[str, int]]:
        """Workflow names with how many workflows have them, most common first."""
        return self.store.reads.names(prefix, limit)

    def stats(self) -> Stats:
        """Totals of tasks and workflows by state, queue depth per type, and how many
        finished workflows are past their retention but not removed yet."""
        return self.store.reads.stats(int(self.retention_s * 1000))

    def agents(self) -> list[AgentInfo]:
        """Every agent known, with liveness from its heartbeat age and lease."""
        return self.store.reads.agents()

    def drain_agent(self, agent_id: str) -> None:
        """Ask agent ``agent_id`` to drain: at its next heartbeat it stops claiming,
        finishes and reports what it runs, and leaves (its process exits). Raises
        :class:`NotFoundError` for an agent no shard knows, :class:`StateError` for one
        not live (stopped, or dead: its lease expired)."""
        from engine.runtime.agent_ops import drain

        drain(self, agent_id)

    def events(self, count: int = 200) -> list[Event]:
        """The most recent lifecycle events from the capped stream, newest first, with
        the names of their tasks (see :meth:`name_tasks`)."""
        return self.store.reads.events(count)

    def timeline(self, wid: str | int) -> Timeline:
        """Workflow ``wid``'s task attempts over time (see :mod:`engine.runtime.history`)."""
        from engine.runtime.history import timeline

        return timeline(self.store.reads, wid)

    def name_tasks(self, events: Iterable[Event]) -> None:
        """Fill in the ``task_name`` of task events, from their workflows' definitions."""
        self.store.reads.name_tasks(events)

    def events_after(self, last_ids: dict[int, str], block_ms: int = 0) -> list[Event]:
        """Events newer than ``last_ids`` (stream id per shard, updated in place)."""
        return self.store.reads.events_after(last_ids, block_ms)

    # -- listening and waiting (engine.runtime.events, engine.runtime.run_waiting) ---------

    def listen(self, callback: Callable[[Event], None]) -> EventListener:
        """Call ``callback`` for every live event, from a background thread, until closed."""
        return waiting.listen(self.store.reads, callback)

    def on_workflow_finished(
        self,
        complete: Callable[[str], None] | None = None,
        failed: Callable[[str], None] | None = None,
    ) -> EventListener:
        """Register callbacks for workflows that succeed (``complete``) or fail.

        As redis.workflow's ``WorkflowComplete`` / ``WorkflowFailed``. Close the returned
        listener to stop.
        """
        return waiting.on_workflow_finished(self.store.reads, complete, failed)

    def wait(self, wid: str | int, timeout: float | None = None) -> WorkflowState:
        """Block until the workflow finishes; returns its final state.

        Raises :class:`TimeoutError` after ``timeout`` seconds.
        """
        return waiting.wait(self.store.reads, wid, timeout)

    # -- schedules ------------------------------------------------------------------------
    # (engine/schedules: settings, ticks, catch-up; engine/schedules/scheduler.py fires them)

    def put_schedule(self, spec: ScheduleSpec) -> bool:
        """Store a schedule, or update it (its next due time is computed again from now;
        counters and fired ticks stay). Returns True when new. Raises
        :class:`NotFoundError` for an unknown template (nothing is written)."""
        from .schedules import manage

        return manage.put(self, spec)

    def schedules(self) -> list[ScheduleInfo]:
        """Every schedule, by name, with its next due time, last run and counters."""
        from .schedules import manage

        return manage.infos(self, self.store.schedules.schedule_names())

    def schedule(self, name: str) -> ScheduleInfo:
        """One schedule (:class:`NotFoundError` if there is none of that name)."""
        from .schedules import manage

        return manage.one(self, name)

    def pause_schedule(self, name: str) -> bool:
        """Stop firing its ticks (runs going on are left alone); False if already paused."""
        return self.store.schedules.schedule_pause(name, self.actor)

    def unpause_schedule(self, name: str, catchup: bool = False) -> bool:
        """Fire its ticks again from now; with ``catchup``, from where it was paused
        (the missed ticks handled as its catchup policy says). False if not paused."""
        from .schedules import manage

        return manage.unpause(self, name, catchup)

    def remove_schedule(self, name: str) -> None:
        """Delete a schedule; its runs are left alone."""
        self.store.schedules.schedule_remove(name, self.actor)

    def trigger_schedule(self, name: str) -> TickOutcome:
        """Run one tick now, under the schedule's overlap policy (it may be skipped)."""
        from .schedules import manage

        return manage.trigger(self, name)

    def backfill_schedule(
        self, name: str, start: datetime, end: datetime, overlap: str | None = None
    ) -> list[TickOutcome]:
        """Run the ticks of ``[start, end]`` not run yet (default overlap ``buffer_all``:
        one after another); twice does nothing new. The ticks go in calls of 100, each
        atomic: stopped part-way, :class:`PartialWriteError` (``done``: each tick's
        outcome, or None for one not recorded)."""
        from .schedules import manage

        start_ms, end_ms = int(start.timestamp() * 1000), int(end.timestamp() * 1000)
        return manage.backfill(self, name, start_ms, end_ms, overlap)

    def preview_schedule(self, name: str, count: int = 10) -> list[PreviewTick]:
        """Its next ``count`` ticks, with what daylight saving does to each."""
        from .schedules import manage

        return manage.preview_stored(self, name, count)[1]

    # -- http -------------------------------------------------------------------------
    # Webhook triggers and the reads of GET /metrics (engine.http serves them).

    @functools.cached_property
    def _triggers(self) -> TriggerStore:
        return TriggerStore(self.redis, self.keys)

    def put_trigger(self, trigger: Trigger) -> None:
        """Store webhook ``trigger`` (build it with :func:`engine.http.triggers.new_trigger`,
        which refuses one without a secret), replacing any trigger of its name.
        :class:`NotFoundError` when its template does not exist."""
        self.template(trigger.template)
        self._triggers.put(trigger)

    def trigger(self, name: str) -> Trigger:
        """Webhook trigger ``name``; :class:`NotFoundError` when there is none."""
        found = self._triggers.get(name)
        if found is None:
            raise NotFoundError(f"trigger {name!r} does not exist")
        return found

    def triggers(self) -> list[Trigger]:
        """Every webhook trigger, oldest first."""
        return self._triggers.all()

    def remove_trigger(self, name: str) -> None:
        """Delete webhook trigger ``name``; :class:`NotFoundError` when there is none."""
        if not self._triggers.remove(name):
            raise NotFoundError(f"trigger {name!r} does not exist")

    def count_http(self, field: str, by: int = 1) -> None:
        """Add to one of the HTTP server's counters (``rejected:<reason>``...)."""
        self._triggers.count(field, by)

    def gauges(self) -> Gauges:
        """Counters, queue depths and ages, agents by state, schedule lag: what
        ``GET /metrics`` reports (see :mod:`engine.store.gauges`)."""
        from .store.gauges import read_gauges

        return read_gauges(self.store.reads, int(self.retention_s * 1000))

    # ``engine.list(...)``: bound last, so that in the class body above ``list`` is the
    # builtin
    list = list_workflows
