"""redisflow's engine: workflows (DAGs) whose whole state lives in Redis.

Public API::

    from engine import Engine, Workflow, Agent

Each name is imported on first use (PEP 562), so that a program importing one part of
the engine (``redisflow --help``, a command that only reads) does not pay for the rest:
redis-py, the agent, the YAML loader, CEL, JSON Schema.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# The checker sees the names where they live; at run time they come from _HOMES below.
if TYPE_CHECKING:
    from engine.client import Engine
    from engine.connect.embedded import EmbeddedRedis
    from engine.core.model import (
        AgentInfo,
        AgentState,
        Event,
        Stats,
        TaskState,
        TaskStatus,
        WorkflowState,
        WorkflowStatus,
        WorkflowSummary,
    )
    from engine.core.outcomes import Abort, NonRetryable, Skip
    from engine.core.task import Task, TaskFailed
    from engine.errors import (
        DefinitionError,
        LeaseLostError,
        NoDatabaseError,
        NotFoundError,
        NotReplicatedError,
        PartialWriteError,
        RedisflowError,
        StateError,
        UnreachableError,
    )
    from engine.runtime.agent import Agent
    from engine.runtime.handlers import (
        exec_handler,
        import_handler,
        manager_handler,
        manager_message,
        seed002_handler,
        seed002_message,
    )
    from engine.spec.definition import TaskDef, Workflow
    from engine.spec.loader import load_file, load_text
    from engine.spec.rate_limits import RateLimit

# Every public name and the module it comes from.
_HOMES: dict[str, str] = {
    "Engine": "engine.client",
    "EmbeddedRedis": "engine.connect.embedded",
    **dict.fromkeys(
        (
            "AgentInfo",
            "AgentState",
            "Event",
            "Stats",
            "TaskState",
            "TaskStatus",
            "WorkflowState",
            "WorkflowStatus",
            "WorkflowSummary",
        ),
        "engine.core.model",
    ),
    **dict.fromkeys(("Abort", "NonRetryable", "Skip"), "engine.core.outcomes"),
    **dict.fromkeys(("Task", "TaskFailed"), "engine.core.task"),
    **dict.fromkeys(
        (
            "DefinitionError",
            "LeaseLostError",
            "NoDatabaseError",
            "NotFoundError",
            "NotReplicatedError",
            "PartialWriteError",
            "RedisflowError",
            "StateError",
            "UnreachableError",
        ),
        "engine.errors",
    ),
    "Agent": "engine.runtime.agent",
    **dict.fromkeys(
        (
            "exec_handler",
            "import_handler",
            "manager_handler",
            "manager_message",
            "seed002_handler",
            "seed002_message",
        ),
        "engine.runtime.handlers",
    ),
    **dict.fromkeys(("TaskDef", "Workflow"), "engine.spec.definition"),
    **dict.fromkeys(("load_file", "load_text"), "engine.spec.loader"),
    "RateLimit": "engine.spec.rate_limits",
}

__all__ = [
    "Abort",
    "Agent",
    "AgentInfo",
    "AgentState",
    "DefinitionError",
    "EmbeddedRedis",
    "Engine",
    "Event",
    "LeaseLostError",
    "NoDatabaseError",
    "NonRetryable",
    "NotFoundError",
    "NotReplicatedError",
    "PartialWriteError",
    "RedisflowError",
    "Skip",
    "StateError",
    "Stats",
    "Task",
    "RateLimit",
    "TaskDef",
    "TaskFailed",
    "TaskState",
    "TaskStatus",
    "UnreachableError",
    "Workflow",
    "WorkflowState",
    "WorkflowStatus",
    "WorkflowSummary",
    "exec_handler",
    "import_handler",
    "load_file",
    "load_text",
    "manager_handler",
    "manager_message",
    "seed002_handler",
    "seed002_message",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept here after."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # the next use is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
