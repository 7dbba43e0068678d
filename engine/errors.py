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


class LeaseLostError(RedisflowError):
    """The agent's lease expired and its tasks were handed on."""


class UnreachableError(RedisflowError):
    """Redis cannot be reached."""

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
