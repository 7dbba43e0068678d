"""Waiting for workflows to finish: live events as the wake-up, the stored state as truth."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.core.model import Event, WorkflowState
from engine.runtime.events import EventListener

if TYPE_CHECKING:
    from engine.store.reads import Reads


def listen(reads: Reads, callback: Callable[[Event], None]) -> EventListener:
    """Call ``callback`` for every live event of ``reads``'s deployment (every shard's
    event channel), from a background thread, until the listener is closed."""
    return EventListener(reads, [s.event_channel for s in reads.keys.all_shards()], callback)


def on_workflow_finished(
    reads: Reads,
    complete: Callable[[str], None] | None = None,
    failed: Callable[[str], None] | None = None,
) -> EventListener:
    """Call ``complete(wid)`` or ``failed(wid)`` as workflows succeed or fail (redis.workflow's
    ``WorkflowComplete`` / ``WorkflowFailed``). Close the returned listener to stop."""

    def dispatch(event: Event) -> None:
        if event.kind == "workflow.succeeded" and complete:
            complete(event.wid)
        elif event.kind == "workflow.failed" and failed:
            failed(event.wid)

    return listen(reads, dispatch)


def wait(reads: Reads, wid: str | int, timeout: float | None = None) -> WorkflowState:
    """Block until workflow ``wid`` finishes; returns its final state.

    Woken by the event channel, and re-reads the state every second as well, since
    pub/sub can lose messages. Raises :class:`TimeoutError` after ``timeout`` seconds.
    """
    wake = threading.Event()
    wanted = str(wid)

    def on_event(event: Event) -> None:
        if event.wid == wanted and event.kind.startswith("workflow."):
            wake.set()

    deadline = None if timeout is None else time.monotonic() + timeout
    with listen(reads, on_event):
        while True:
            st = reads.state(wid)
            if st.finished:
                return st
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"workflow {wid} still {st} after {timeout:g}s")
            wake.wait(1.0 if left is None else min(1.0, left))
            wake.clear()
