"""``?wait=``: async waits for workflows to finish, woken by one shared event listener.

Each waiting request costs an :class:`asyncio.Event`, not a thread or a connection: one
listener (a thread, one pub/sub connection) wakes the requests of the workflows that
finish. Pub/sub is a hint: each wait also reads the state once a second. The listener
runs from the first wait until :data:`IDLE_S` after the last one.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool

from engine.core.model import Event, WorkflowState

if TYPE_CHECKING:
    from engine.runtime.events import EventListener

    from ..client import Engine

RECHECK_S = 1.0
IDLE_S = 30.0  # the listener stops this long after the last wait ended (it decodes every event)


class FinishWaiter:
    """Waits of one app, woken by one listener started on the first wait."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._waiting: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
        self._lock = threading.Lock()
        self._listener: EventListener | None = None
        self._last_end = 0.0  # monotonic time the last wait ended

    def _on_event(self, event: Event) -> None:
        if not event.kind.startswith("workflow."):
            return
        with self._lock:
            waiters = list(self._waiting.get(event.wid, ()))
        for loop, wake in waiters:
            loop.call_soon_threadsafe(wake.set)

    def _listen(self) -> None:
        with self._lock:
            if self._listener is None:
                self._listener = self.engine.listen(self._on_event)

    async def wait(self, wid: str, timeout: float) -> WorkflowState:
        """The state of ``wid`` once it finished, or its state when ``timeout`` seconds
        passed first."""
        if self._listener is None:
            await run_in_threadpool(self._listen)
        wake = asyncio.Event()
        entry = (asyncio.get_running_loop(), wake)
        with self._lock:
            self._waiting.setdefault(wid, []).append(entry)
        deadline = time.monotonic() + timeout
        try:
            while True:
                state = await run_in_threadpool(self.engine.state, wid)
                left = deadline - time.monotonic()
                if state.finished or left <= 0:
                    return state
                try:
                    await asyncio.wait_for(wake.wait(), min(RECHECK_S, left))
                except TimeoutError:
                    pass
                wake.clear()
        finally:
            with self._lock:
                entries = self._waiting.get(wid, [])
                entries.remove(entry)
                if not entries:
                    self._waiting.pop(wid, None)
                idle = not self._waiting
            if idle:
                self._last_end = time.monotonic()
                asyncio.get_running_loop().call_later(IDLE_S, self._stop_if_idle)

    def _stop_if_idle(self) -> None:
        with self._lock:
            idle = not self._waiting and time.monotonic() - self._last_end >= IDLE_S * 0.99
        if idle and self._listener is not None:
            # close() joins the listener's thread: not on the event loop
            threading.Thread(target=self.close, name="redisflow-waits-close", daemon=True).start()

    def close(self) -> None:
        """Stop the listener (a later wait starts another)."""
        with self._lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
