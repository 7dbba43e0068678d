"""uvicorn's HTTP/1.1 protocol (httptools) with header and body timeouts.

uvicorn closes an idle keep-alive connection after ``timeout_keep_alive`` and caps
connections with ``limit_concurrency``, but waits forever for a request that is slow to
arrive: a client sending a header byte a minute, or nothing at all, holds its connection
(and, with a cap, a slot). :class:`TimedHttpProtocol` adds what nginx has as
``client_header_timeout`` and ``client_body_timeout``:

* **header timeout**: the request line and headers must all arrive within it, counted
  from the connection's start (first request) or the request's first byte (later ones
  on a keep-alive connection, idle in between for uvicorn's ``timeout_keep_alive``);
* **body timeout**: the whole body must arrive within it, counted from the end of the
  headers; time the server itself holds the body back (reading paused while the app is
  busy) does not count.

Past either, the client gets **408** (``{"error": ...}``, ``Connection: close``) when it
sent part of a request and no answer was started, and the connection is closed; the
app, if it was reading the body, sees the client gone. Nothing is logged: a slow or
hostile client costs no log line.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HEADER_TIMEOUT_S = 60.0
BODY_TIMEOUT_S = 60.0


def _timeout_response(what: str, seconds: float) -> bytes:
    body = json.dumps({"error": f"the request's {what} took over {seconds:g}s"}).encode()
    return (
        b"HTTP/1.1 408 Request Timeout\r\n"
        b"content-type: application/json\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\n"
        b"connection: close\r\n\r\n" + body
    )


class TimedHttpProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` with :attr:`header_timeout` and :attr:`body_timeout`
    (seconds; see the module doc). Make a subclass with other values with
    :func:`timed_protocol`."""

    header_timeout: float = HEADER_TIMEOUT_S
    body_timeout: float = BODY_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._started = False  # a byte of the current request arrived

    # -- the connection -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header()
        self._cancel_body()
        super().connection_lost(exc)

    # -- the parser's callbacks -----------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._started = True
        if self._header_timer is None:  # a later request on a kept-alive connection
            self._arm_header()

    def on_headers_complete(self) -> None:
        self._started = False
        self._cancel_header()
        super().on_headers_complete()
        self._cancel_body()
        self._body_timer = self.loop.call_later(self.body_timeout, self._body_timed_out)

    def on_message_complete(self) -> None:
        self._cancel_body()
        super().on_message_complete()

    # -- timers ---------------------------------------------------------------------------

    def _arm_header(self) -> None:
        self._cancel_header()
        self._header_timer = self.loop.call_later(self.header_timeout, self._header_timed_out)

    def _cancel_header(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _cancel_body(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _header_timed_out(self) -> None:
        self._header_timer = None
        if self.transport is None or self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            # an answer to the previous request is still being written: close after it
            cycle.keep_alive = False
            return
        if self._started:
            self._close_with_408("headers", self.header_timeout)
        else:  # not a byte sent: nothing to answer
            self.transport.close()

    def _body_timed_out(self) -> None:
        self._body_timer = None
        if self.transport is None or self.transport.is_closing():
            return
        if self.flow is not None and self.flow.read_paused:
            # the server holds the body back (the app is busy, or a pipelined request
            # waits its turn): not the client's delay
            self._body_timer = self.loop.call_later(self.body_timeout, self._body_timed_out)
            return
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            self.transport.close()  # answered already; the rest of the body is not wanted
        elif cycle.response_started:
            cycle.keep_alive = False  # an answer is being written: close after it
        else:
            cycle.disconnected = True  # the app's reads see the client gone, its answer
            cycle.message_event.set()  # is dropped
            self._close_with_408("body", self.body_timeout)

    def _close_with_408(self, what: str, seconds: float) -> None:
        self.transport.write(_timeout_response(what, seconds))
        self.transport.close()


def timed_protocol(header_timeout: float, body_timeout: float) -> type[TimedHttpProtocol]:
    """A :class:`TimedHttpProtocol` subclass with these timeouts (seconds), for
    ``uvicorn.Config(http=...)``."""
    return type(
        "TimedHttpProtocol",
        (TimedHttpProtocol,),
        {"header_timeout": header_timeout, "body_timeout": body_timeout},
    )
