"""redisflow's engine: workflows (DAGs) whose whole state lives in Redis.

Public API::

    from engine import Engine, Workflow, Agent
"""

from __future__ import annotations

from .agent import Agent
from .client import Engine
from .definition import TaskDef, Workflow
from .embedded import EmbeddedRedis
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
from .handlers import (
    Task,
    TaskFailed,
    exec_handler,
    import_handler,
    seed002_handler,
    seed002_message,
)
from .loader import load_file, load_text
from .model import (
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
from .outcomes import Abort, NonRetryable, Skip
from .ratelimit import RateLimit

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
    "seed002_handler",
    "seed002_message",
]
