"""Live events as Server-Sent Events: ``GET /v1/events`` (the deployment's) and
``GET /v1/workflows/{id}/events`` (one workflow's, from its first event still kept).

Each SSE message is one event: ``event:`` its kind, ``data:`` its JSON. Events are read
from the capped event stream (:meth:`engine.Engine.events_after`), so a stream misses
nothing while the events are kept; one listener per app (pub/sub, a hint) wakes the
streams at once, and each stream also reads every second. The last message of each
read carries an ``id:``, the position in every shard's stream (``0:1732550000000-0``):
a client reconnecting with ``Last-Event-ID`` (a browser's ``EventSource`` does it by
itself) resumes after it, so at worst it sees again the events of one read. An id this
server did not send is ignored (the stream starts as without one).

A stream ends when the client goes away (checked every second, a comment line sent
every 15 seconds of silence), after ``max_stream_s`` (the client reconnects and resumes),
and, for a workflow's stream, after the workflow finishes. A
finished workflow with nothing after ``Last-Event-ID`` answers 204, which tells an
``EventSource`` not to reconnect.

A stream holds its connection for as long as it is open, so streams are counted
(:class:`StreamSlots`): past the process's cap (half its connections by default) or one
token's, a new stream is answered 429, and the connections writes and ``/healthz`` need
stay free.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from engine.core.model import Event

from ..errors import NotFoundError
from .errors import HttpError

if TYPE_CHECKING:
    from engine.runtime.events import EventListener

    from ..client import Engine

RECHECK_S = 1.0
KEEPALIVE_S = 15.0
MAX_SEQ = 2**64 - 1
FINISHED_KINDS = frozenset({"workflow.succeeded", "workflow.failed", "workflow.cancelled"})
_ENTRY = r"[0-9]{1,4}:[0-9]{1,20}-[0-9]{1,20}"
CURSOR_PATTERN = rf"^{_ENTRY}(?:,{_ENTRY})*$"
MAX_CURSOR = 12_000  # characters of a Last-Event-ID
_CURSOR = re.compile(CURSOR_PATTERN)
Read = tuple[list[Event], bool, str]  # events, whether the stream is done, the cursor after
HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
MAX_STREAMS = 500  # event streams open in one process (half the default connection cap)
MAX_STREAMS_PER_TOKEN = 100  # event streams one token may hold open in one process


def encode_cursor(last_ids: dict[int, str]) -> str:
    """``last_ids`` (stream id per shard) as a ``Last-Event-ID``."""
    return ",".join(f"{shard}:{last_ids[shard]}" for shard in sorted(last_ids))


def parse_cursor(value: str, shards: int) -> dict[int, str] | None:
    """A ``Last-Event-ID`` this server gave, as stream ids per shard; None for one it
    did not give (ignored: the stream starts as without it); a 400 :class:`HttpError`
    past :data:`MAX_CURSOR` characters."""
    if len(value) > MAX_CURSOR:
        raise HttpError(400, f"Last-Event-ID is over {MAX_CURSOR} characters")
    if not _CURSOR.fullmatch(value):
        return None
    out: dict[int, str] = {}
    for part in value.split(","):
        shard, _, entry = part.partition(":")
        ms, _, seq = entry.partition("-")
        if int(shard) >= shards or int(ms) > MAX_SEQ or int(seq) > MAX_SEQ:
            return None
        out[int(shard)] = f"{int(ms)}-{int(seq)}"
    return out


def since(ms: int, shards: int) -> dict[int, str]:
    """Stream positions just before Redis time ``ms`` in every shard."""
    return {s: f"{max(ms - 1, 0)}-{MAX_SEQ}" for s in range(shards)}


def message(event: Event, cursor: str | None = None) -> str:
    """One SSE message for ``event`` (with ``id:`` when ``cursor`` is given)."""
    data = json.dumps(event.to_dict(), separators=(",", ":"), default=str)
    head = f"id: {cursor}\n" if cursor is not None else ""
    return f"{head}event: {event.kind}\ndata: {data}\n\n"


class StreamSlots:
    """The event streams open in one process, in all and per token: one past ``most``,
    or past ``per_token`` for its token, is refused (429) rather than taking a connection
    that writes and ``/healthz`` need."""

    def __init__(self, most: int, per_token: int = MAX_STREAMS_PER_TOKEN) -> None:
        if most < 1 or per_token < 1:
            raise ValueError(f"stream caps are at least 1, not {most} and {per_token}")
        self.most = most
        self.per_token = per_token
        self.open = 0
        self._by_token: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, token: str | None) -> Callable[[], None]:
        """Count one more stream of ``token`` (None: no tokens are configured, only the
        process's cap applies); the function that gives it back (once, however often it
        is called). Raises a 429 :class:`HttpError` past either cap."""
        with self._lock:
            if self.open >= self.most:
                raise HttpError(
                    429,
                    f"too many event streams: this server keeps at most {self.most} open "
                    "(--max-streams); try again later",
                    "too_many_streams",
                )
            held = self._by_token.get(token, 0) if token is not None else 0
            if token is not None and held >= self.per_token:
                raise HttpError(
                    429,
                    f"this token holds {held} event streams, the most one token may "
                    "(--max-streams-per-token): close one first",
                    "too_many_streams",
                )
            self.open += 1
            if token is not None:
                self._by_token[token] = held + 1
        given = False

        def give_back() -> None:
            nonlocal given
            with self._lock:
                if given:
                    return
                given = True
                self.open -= 1
                if token is not None:
                    left = self._by_token[token] - 1
                    if left:
                        self._by_token[token] = left
                    else:
                        del self._by_token[token]

        return give_back


class _CountedStream(StreamingResponse):
    """A streaming response that gives its slot back when it ends, however it ends."""

    def __init__(self, content: AsyncIterator[str], release: Callable[[], None]) -> None:
        super().__init__(content, media_type="text/event-stream", headers=HEADERS)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


class EventFeed:
    """Wakes the open streams of one app when events are published (one listener,
    started by the first stream, closed with the app); counts them in ``slots``."""

    def __init__(
        self, engine: Engine, max_stream_s: float = 3600.0, slots: StreamSlots | None = None
    ) -> None:
        self.engine = engine
        self.max_stream_s = max_stream_s
        self.slots = slots or StreamSlots(MAX_STREAMS)
        self._wakes: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._lock = threading.Lock()
        self._listener: EventListener | None = None

    def _on_event(self, _: Event) -> None:
        with self._lock:
            wakes = list(self._wakes)
        for loop, wake in wakes:
            loop.call_soon_threadsafe(wake.set)

    def _listen(self) -> None:
        with self._lock:
            if self._listener is None:
                self._listener = self.engine.listen(self._on_event)

    async def stream(
        self,
        request: Request,
        last_ids: dict[int, str],
        keep: Callable[[Event], bool],
        wid: str | None = None,
        token: str | None = None,
    ) -> Response:
        """The SSE response from ``last_ids`` on, of the events ``keep`` passes; with
        ``wid``, ending once that workflow has finished (204 when it had already finished
        and nothing is left to send). It counts as one of ``token``'s streams while open
        (:class:`StreamSlots`: 429 past a cap)."""
        release = self.slots.take(token)
        try:
            return await self._open(request, last_ids, keep, wid, release)
        except BaseException:
            release()
            raise

    async def _open(
        self,
        request: Request,
        last_ids: dict[int, str],
        keep: Callable[[Event], bool],
        wid: str | None,
        release: Callable[[], None],
    ) -> Response:
        if self._listener is None:
            await run_in_threadpool(self._listen)
        engine = self.engine

        def read() -> Read:
            events = [e for e in engine.events_after(last_ids) if keep(e)]
            done = False
            if wid is not None:
                done = any(e.kind in FINISHED_KINDS for e in events)
                if not done and engine.state(wid).finished:
                    # it finished after the read above: the script that ended it wrote its
                    # last events with that state, so a second read has them
                    events += [e for e in engine.events_after(last_ids) if keep(e)]
                    done = True
            engine.name_tasks(events)
            return events, done, encode_cursor(last_ids)

        first = await run_in_threadpool(read)
        if first[1] and not first[0]:
            release()
            return Response(status_code=204, headers=HEADERS)
        return _CountedStream(self._messages(request, read, first), release)

    async def _messages(
        self,
        request: Request,
        read: Callable[[], Read],
        first: Read,
    ) -> AsyncIterator[str]:
        events, done, cursor = first
        behind = True  # the last read moved on: there may be more (a backlog) right away
        wake = asyncio.Event()
        entry = (asyncio.get_running_loop(), wake)
        with self._lock:
            self._wakes.add(entry)
        # a client's EventSource waits this long before reconnecting
        yield "retry: 1000\n\n"
        last_sent = time.monotonic()
        ends = last_sent + self.max_stream_s
        try:
            while True:
                if events:
                    for i, event in enumerate(events):
                        yield message(event, cursor if i == len(events) - 1 else None)
                    last_sent = time.monotonic()
                if done or time.monotonic() >= ends:
                    return
                if time.monotonic() - last_sent >= KEEPALIVE_S:
                    yield ": keepalive\n\n"
                    last_sent = time.monotonic()
                if not behind:
                    try:
                        await asyncio.wait_for(wake.wait(), RECHECK_S)
                    except TimeoutError:
                        pass
                    wake.clear()
                if await request.is_disconnected():
                    return
                before = cursor
                events, done, cursor = await run_in_threadpool(read)
                behind = cursor != before
        finally:
            with self._lock:
                self._wakes.discard(entry)

    def close(self) -> None:
        """Stop the listener."""
        with self._lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()


async def deployment_events(
    feed: EventFeed, request: Request, token: str | None = None
) -> Response:
    """GET /v1/events: every event from now on (or after ``Last-Event-ID``); ``token``:
    the caller's, whose streams are counted."""
    engine = feed.engine
    given = request.headers.get("last-event-id")
    last_ids = None if given is None else parse_cursor(given, engine.keys.shards)
    if last_ids is None:
        now = await run_in_threadpool(engine.server_time)
        last_ids = since(int(now * 1000), engine.keys.shards)
    return await feed.stream(request, last_ids, lambda e: True, token=token)


async def workflow_events(feed: EventFeed, request: Request, token: str | None = None) -> Response:
    """GET /v1/workflows/{id}/events: the workflow's events, from its first one still
    kept (or after ``Last-Event-ID``), until it finishes; ``token`` as for
    :func:`deployment_events`."""
    engine = feed.engine
    wid = request.path_params["id"]
    given = request.headers.get("last-event-id")
    rows = await run_in_threadpool(engine.summaries, [wid])
    if not rows:
        raise NotFoundError(f"workflow {wid} does not exist")
    last_ids = None if given is None else parse_cursor(given, engine.keys.shards)
    if last_ids is None:  # from a second before it was made: its stream ids are Redis times
        last_ids = since(int(rows[0].created_at * 1000) - 1000, engine.keys.shards)
    return await feed.stream(request, last_ids, lambda e: e.wid == wid, wid, token)
