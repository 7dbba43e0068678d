"""Concurrent run requests pushed together: one ``push_runs`` call for many requests.

A request that finds no push in flight is pushed at once (alone: no added latency when
the server is quiet); the requests that arrive while a push is in flight wait for it to
end and then go together in the next one. Under load a push carries many runs in a few
script calls, and each template's latest version is looked up once per push rather than
once per run. A request is answered only after its push returned, so a 202 still means
the run is in Redis.

A bad run never fails the others: when a batch is refused (a bad input or key: nothing
was written, ``push_runs`` checks every run before the first write) its runs are pushed
one by one, each answered with its own result or error. A batch goes to Redis in several
script calls, each atomic: when Redis refuses one part-way (out of memory), each run is
answered for itself, 202 for the runs stored and 503 for the others, so a client that
sends a 503 run again makes no duplicate.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool

from engine.spec.flow import Pushed, RunRequest

from ..errors import DefinitionError, NotFoundError, NotReplicatedError, PartialWriteError
from ..ops.refusals import cause_of
from .errors import HttpError

if TYPE_CHECKING:
    from ..client import Engine
    from ..store.codec import CompiledWorkflow

MAX_BATCH = 512  # runs per push_runs call
_UNCONFIRMED = (
    "run {} was written but not acknowledged by the replicas in time (--wait-replicas): a "
    "failover now could lose it; send it again with an idempotency key to be sure"
)
_NOT_WRITTEN = "this run was not written: {}"
_NO_REPLY = (
    "this run may or may not have been written (no reply came: {}); send it again with an "
    "Idempotency-Key to be sure"
)
_UNSET = RuntimeError("no result")  # a placeholder: every slot is filled before returning


@dataclass
class _Run:
    template: str
    input: Any
    key: str | None
    done: asyncio.Future[Pushed]
    trigger: str | None = None


class RunBatcher:
    """Runs of templates through one engine (one actor), pushed in batches."""

    def __init__(
        self, engine: Engine, max_batch: int = MAX_BATCH, redis_user: str | None = None
    ) -> None:
        self.engine = engine
        self.redis_user = redis_user  # named in a refusal's message
        self.max_batch = max_batch
        self._waiting: list[_Run] = []
        self._pushing = False
        self._task: asyncio.Task[None] | None = None  # the drain running, kept referenced

    async def run(
        self, template: str, input: Any, key: str | None, trigger: str | None = None
    ) -> Pushed:
        """Push a run of ``template``; returns once it is stored (or existed already).
        ``trigger``: the webhook trigger delivering it (``key`` is then the trigger's own)."""
        done: asyncio.Future[Pushed] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Run(template, input, key, done, trigger))
        if not self._pushing:
            self._pushing = True
            self._task = asyncio.get_running_loop().create_task(self._drain())
        return await done

    async def _drain(self) -> None:
        try:
            while self._waiting:
                batch = self._waiting[: self.max_batch]
                del self._waiting[: self.max_batch]
                try:
                    results = await run_in_threadpool(self._push, batch)
                except BaseException as e:  # Redis away: every run of the batch hears it
                    results = [e] * len(batch)
                for run, result in zip(batch, results, strict=True):
                    if run.done.done():  # its request went away
                        continue
                    if isinstance(result, BaseException):
                        run.done.set_exception(result)
                    else:
                        run.done.set_result(result)
        finally:
            self._pushing = False

    def _push(self, batch: list[_Run]) -> list[Pushed | BaseException]:
        """Push ``batch`` in one call; each run's result, or the error that refused it."""
        compiled: dict[str, tuple[CompiledWorkflow, int] | BaseException] = {}
        for run in batch:
            if run.template not in compiled:
                try:
                    compiled[run.template] = self.engine.compile_template(run.template)
                except (DefinitionError, NotFoundError) as e:  # unknown, or a bad stored text
                    compiled[run.template] = e
        out: list[Pushed | BaseException] = [_UNSET] * len(batch)
        requests: list[tuple[int, RunRequest]] = []
        for n, run in enumerate(batch):
            got = compiled[run.template]
            if isinstance(got, BaseException):
                out[n] = got
            else:
                wf, version = got
                request = RunRequest(
                    wf, run.input, run.key, run.template, version, trigger=run.trigger
                )
                requests.append((n, request))
        try:
            pushed = self.engine.push_runs([r for _, r in requests])
            for (n, _), p in zip(requests, pushed, strict=True):
                out[n] = p
        except NotReplicatedError as e:  # all written; some unconfirmed by the replicas
            short = set(e.unconfirmed)
            for k, ((n, _), done) in enumerate(zip(requests, e.results, strict=True)):
                assert isinstance(done, Pushed)
                out[n] = (
                    done if k not in short else NotReplicatedError(_UNCONFIRMED.format(done.id))
                )
        except PartialWriteError as e:  # stopped part-way: each run answered for itself
            short, lost = set(e.unconfirmed), set(e.failed)
            cause = cause_of(e.cause, self.redis_user)
            for k, ((n, _), done) in enumerate(zip(requests, e.done, strict=True)):
                if isinstance(done, Pushed):
                    out[n] = (
                        done if k not in short else NotReplicatedError(_UNCONFIRMED.format(done.id))
                    )
                else:
                    out[n] = HttpError(
                        503, (_NOT_WRITTEN if k in lost else _NO_REPLY).format(cause)
                    )
        except DefinitionError:  # one bad run refused them all, writing nothing
            for n, request in requests:
                try:
                    out[n] = self.engine.push_runs([request])[0]
                except Exception as e:  # noqa: BLE001 - this run's own error, the others go on
                    out[n] = e
        return out
