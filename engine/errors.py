"""Exceptions the engine raises. The CLI maps them to exit codes."""

from __future__ import annotations


class RedisflowError(Exception):
    """Base of every redisflow error."""

    exit_code = 1


class DefinitionError(RedisflowError):
    """A workflow definition or file is invalid. The message says what and where."""

    exit_code = 2


class StateError(RedisflowError):
    """The operation is not allowed in the workflow's (or task's) current state."""

    exit_code = 2


class NotFoundError(RedisflowError):
    """No such workflow (or task)."""

    exit_code = 2


SHOWN_NAMES = 8  # a missing task's message lists at most this many of the others


def no_such_task(wid: str | int, name: str, names: list[str]) -> NotFoundError:
    """The error for a task name workflow ``wid`` has none of, listing a few of the ones
    it has: ``workflow 12 has no task 'nosuch' (its tasks: a, b, c)``."""
    shown = ", ".join(names[:SHOWN_NAMES])
    if len(names) > SHOWN_NAMES:
        shown += f"… ({len(names):,} in all)"
    return NotFoundError(f"workflow {wid} has no task {name!r} (its tasks: {shown})")


class EarlierReleaseError(RedisflowError):
    """An agent may not start yet: agents of an earlier release are live (their ids, by
    spaces), and they would misread the task records this release writes."""


class LeaseLostError(RedisflowError):
    """The agent's lease expired and its tasks were handed on."""


class UnreachableError(RedisflowError):
    """Redis cannot be reached."""

    exit_code = 3


class NoDatabaseError(RedisflowError):
    """Redis answers, but has no database of the number the URL names (``SELECT`` out of
    range): a setting to correct, not a wait for Redis (so nothing retries it)."""

    exit_code = 3


class NotReplicatedError(RedisflowError):
    """Written on the master, but fewer replicas than asked acknowledged it in time
    (``wait_replicas``): the write stands, yet a failover before it reaches a replica
    would lose it.

    ``results`` holds every call's decoded reply (or error), as if none had fallen short;
    ``unconfirmed`` the indexes of the calls whose WAIT fell short.
    """

    exit_code = 3

    def __init__(
        self,
        message: str,
        results: list[object] | None = None,
        unconfirmed: list[int] | None = None,
    ) -> None:
        super().__init__(message)
        self.results: list[object] = results or []
        self.unconfirmed: list[int] = unconfirmed or []


class PartialWriteError(RedisflowError):
    """A write of many items (workflows, schedule ticks) sent as several script calls
    stopped part-way. Each call is atomic (written whole or not at all), but the calls are
    not one transaction: the ones before the refusal stand.

    ``done`` holds, per item in the order given, what a full success returns for it (a
    workflow id, a :class:`~engine.spec.flow.Pushed`, a tick's outcome), or None for an item
    that was not written; ``stored_ids`` the ids of the workflows written, in that order;
    ``failed`` the indexes of the items not written (refused, or not sent after a
    refusal); ``unknown`` those whose call got no reply (Redis went away during it: maybe
    written); ``unconfirmed`` (with ``wait_replicas``) written items that fewer replicas
    than asked acknowledged in time; ``cause`` the error that stopped the write.

    Nothing written at all is never a PartialWriteError: the cause itself is raised.
    """

    exit_code = 4

    def __init__(
        self,
        message: str,
        *,
        done: list[object],
        stored_ids: list[str],
        failed: list[int],
        cause: BaseException,
        unknown: list[int] | None = None,
        unconfirmed: list[int] | None = None,
    ) -> None:
        super().__init__(message)
        self.done = done
        self.stored_ids = stored_ids
        self.failed = failed
        self.cause = cause
        self.unknown: list[int] = unknown or []
        self.unconfirmed: list[int] = unconfirmed or []

    @property
    def written(self) -> int:
        """How many items were written."""
        return sum(1 for d in self.done if d is not None)

    @property
    def total(self) -> int:
        """How many items the write had."""
        return len(self.done)


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is Redis refusing a write with memory over ``maxmemory`` (policy
    noeviction): ``OOM ...`` as a reply (a script refused before it starts, Redis 7), or
    inside a script's error (refused at its first write, Redis 6.2)."""
    import redis  # here: the errors are read by code that never talks to Redis too

    if isinstance(error, redis.exceptions.OutOfMemoryError):
        return True
    if not isinstance(error, redis.ResponseError):
        return False
    text = str(error)
    return text.startswith("OOM ") or "-OOM command not allowed" in text
