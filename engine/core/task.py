"""The Task value a handler receives (every layer may use it: the store decodes claim rows
into it, conditions read it, the agent runs handlers with it), and TaskFailed."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Task:
    """A claimed task, as a handler sees it.

    Attributes:
        workflow_id: the workflow it belongs to.
        index: its index in the workflow.
        name: its name.
        type: its type.
        payload: the payload it was defined with (any JSON value).
        attempt: which execution this is (1 for the first); with ``workflow_id`` and
            ``index`` it makes :attr:`idempotency_key`.
        parents: each parent's name mapped to its output.
        input: the workflow's input, given when it was pushed (``None`` for none).
        item: for an item of a map, its element of the mapped list (``item_index`` its
            position); ``None`` for a plain task.
        step: for a step of an item of a map with ``steps``, the step's number in them
            (``name`` is the step's; ``parents`` its parents' outputs within the item).
        errors: for a failure branch (``on_failure``, ``one_failed``, ``all_failed``), each
            parent's name mapped to its error (``None`` when it did not fail); for a gather
            of a map that tolerated failed items, the map's name mapped to those items'
            errors by index (their outputs are ``None``).
        timeout: the attempt's timeout in seconds (``None``: none); past it the engine
            fails the attempt, and :attr:`cancelled` is set: a long handler should look.
    """

    workflow_id: str
    index: int
    name: str
    type: str
    payload: Any
    attempt: int
    parents: dict[str, Any] = field(default_factory=dict)
    input: Any = None
    item: Any = None
    item_index: int | None = None
    step: int | None = None
    timeout: float | None = None
    _errors: dict[str, Any] | None = field(default=None, repr=False)
    # a task with a condition (engine.spec.conditions): its `when` and its parents' states
    _when: str | None = field(default=None, repr=False)
    _states: dict[str, str] | None = field(default=None, repr=False)
    _cancelled: threading.Event | None = field(default=None, repr=False, compare=False)
    _log: Any = field(default=None, repr=False, compare=False)  # tasklogs: while it runs
    # set by its agent at its timeout: whatever the handler returns then, it timed out
    _late: bool = field(default=False, repr=False, compare=False)
    # how long it waited ready before its claim (ms): the queue-wait history
    _waited_ms: int = field(default=0, repr=False, compare=False)

    def progress(self, fraction: float, message: str = "") -> None:
        """Say how far the attempt is (``fraction`` from 0 to 1, a short ``message``):
        shown live by ``redisflow status`` and the console. Cheap to call often: at most
        one write a second reaches Redis (the last one always)."""
        log = self._log  # while it runs under an agent: its task logs (engine.runtime.tasklogs)
        if log is not None:
            log.capture_of(self).progress(fraction, message)
        elif not 0.0 <= fraction <= 1.0:
            raise ValueError(f"progress {fraction!r}: expected a fraction from 0 to 1")

    @property
    def errors(self) -> dict[str, Any]:
        """See the class's attributes (empty for a task that gets no errors)."""
        return self._errors if self._errors is not None else {}

    @property
    def cancelled(self) -> threading.Event:
        """Set when the attempt is no longer this agent's to finish: past its timeout
        (the engine has failed it), or taken from it (Redis declared the agent dead and
        handed the task on; its result would be refused). A handler that runs long can
        check it (``task.cancelled.is_set()``) or wait on it and stop."""
        if self._cancelled is None:
            with _CANCEL_LOCK:
                if self._cancelled is None:
                    self._cancelled = threading.Event()
        return self._cancelled

    @property
    def key(self) -> str:
        """The task's id within its workflow: its index, ``"<index>.<item>"`` for an item,
        ``"<index>.<item>.<step>"`` for a step of one."""
        if self.item_index is None:
            return str(self.index)
        if self.step is None:
            return f"{self.index}.{self.item_index}"
        return f"{self.index}.{self.item_index}.{self.step}"

    @property
    def idempotency_key(self) -> str:
        """Unique per execution: a handler can use it to make side effects run once."""
        return f"{self.workflow_id}:{self.key}:{self.attempt}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "workflow_id": self.workflow_id,
            "index": self.index,
            "name": self.name,
            "type": self.type,
            "payload": self.payload,
            "attempt": self.attempt,
            "parents": self.parents,
            "input": self.input,
            "item": self.item,
            "item_index": self.item_index,
            "step": self.step,
            "errors": self.errors,
            "timeout": self.timeout,
            "idempotency_key": self.idempotency_key,
        }


_CANCEL_LOCK = threading.Lock()
Handler = Callable[[Task], Any]  # a plain function, or an ``async def`` one


class TaskFailed(Exception):
    """Raise (or let any exception escape) from a handler to fail the attempt."""
