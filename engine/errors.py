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
