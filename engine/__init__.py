"""redisflow's engine: workflows (DAGs) whose whole state lives in Redis.

Public API::

    from engine import Engine, Workflow, Agent
"""

from __future__ import annotations

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

from .client import Engine
from .errors import (
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
