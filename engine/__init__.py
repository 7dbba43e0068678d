"""redisflow's engine: workflows (DAGs) whose whole state lives in Redis.

Public API::

    from engine import Engine, Workflow, Agent

Beside the engine, the workflow language and the agent, it holds what a program built on
them (the console is one) reads and shows: the records the reads return, how each state
looks (:data:`LOOKS`), text made safe for a terminal (:func:`visible`), live hints
(:class:`Watch`), timelines, run-time history, task logs, bulk actions (the :mod:`bulk`
module), and the helpers that connect a client of one's own (:func:`open_client`) with
the command line's options (:func:`connection_options`).

Each name is imported on first use (PEP 562), so that a program importing one part of
the engine (``redisflow --help``, a command that only reads) does not pay for the rest:
redis-py, the agent, the YAML loader, CEL, JSON Schema.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# The checker sees the names where they live; at run time they come from _HOMES below.
if TYPE_CHECKING:
    from engine.cli.common import connection_options, connection_url
    from engine.client import Engine
    from engine.connect.embedded import EmbeddedRedis
    from engine.connect.urls import close_client, missing_database, open_client, redact
    from engine.core.appearance import (
        AGENT_STATES,
        LOOKS,
        TASK_LOOKS,
        WORKFLOW_STATES,
        Look,
        glyphs,
    )
    from engine.core.model import (
        ITEM_STATES,
        AgentInfo,
        AgentState,
        Event,
        ItemStatus,
        RunResult,
        Stats,
        TaskState,
        TaskStatus,
        TemplateInfo,
        WorkflowState,
        WorkflowStatus,
        WorkflowSummary,
    )
    from engine.core.outcomes import Abort, NonRetryable, Skip
    from engine.core.rules import HANDLER_RULES
    from engine.core.task import Task, TaskFailed
    from engine.core.text_safety import visible
    from engine.core.unserved import unserved, unserved_line
    from engine.core.words import plural
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
    from engine.ops import bulk
    from engine.ops.watch import EventBatch, Hint, KeyChange, Watch
    from engine.runtime.agent import Agent
    from engine.runtime.agent_ops import GONE_AFTER_S, current_agents
    from engine.runtime.handlers import (
        exec_handler,
        import_handler,
        manager_handler,
        manager_message,
        seed002_handler,
        seed002_message,
    )
    from engine.runtime.history import ATTEMPT_LOST, ATTEMPT_RETRIED, Attempt, Timeline
    from engine.runtime.rollups import HistoryStat, history, sparkline
    from engine.runtime.tasklogs import LogLine, follow_logs, read_logs, read_progress
    from engine.schedules.clock import PreviewTick
    from engine.schedules.info import ScheduleInfo
    from engine.schedules.spec import ScheduleSpec
    from engine.spec.definition import TaskDef, Workflow
    from engine.spec.limits import DEFAULT_MAX_PAYLOAD
    from engine.spec.loader import load_file, load_text
    from engine.spec.rate_limits import RateLimit
    from engine.spec.wait_tasks import wait_line

# Every public name and the module it comes from (for a public module: its package).
_HOMES: dict[str, str] = {
    **dict.fromkeys(("connection_options", "connection_url"), "engine.cli.common"),
    "Engine": "engine.client",
    "EmbeddedRedis": "engine.connect.embedded",
    **dict.fromkeys(
        ("close_client", "missing_database", "open_client", "redact"), "engine.connect.urls"
    ),
    **dict.fromkeys(
        ("AGENT_STATES", "LOOKS", "Look", "TASK_LOOKS", "WORKFLOW_STATES", "glyphs"),
        "engine.core.appearance",
    ),
    **dict.fromkeys(
        (
            "ITEM_STATES",
            "AgentInfo",
            "AgentState",
            "Event",
            "ItemStatus",
            "RunResult",
            "Stats",
            "TaskState",
            "TaskStatus",
            "TemplateInfo",
            "WorkflowState",
            "WorkflowStatus",
            "WorkflowSummary",
        ),
        "engine.core.model",
    ),
    **dict.fromkeys(("Abort", "NonRetryable", "Skip"), "engine.core.outcomes"),
    "HANDLER_RULES": "engine.core.rules",
    **dict.fromkeys(("Task", "TaskFailed"), "engine.core.task"),
    "visible": "engine.core.text_safety",
    **dict.fromkeys(("unserved", "unserved_line"), "engine.core.unserved"),
    "plural": "engine.core.words",
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
    "bulk": "engine.ops",
    **dict.fromkeys(("EventBatch", "Hint", "KeyChange", "Watch"), "engine.ops.watch"),
    "Agent": "engine.runtime.agent",
    **dict.fromkeys(("GONE_AFTER_S", "current_agents"), "engine.runtime.agent_ops"),
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
    **dict.fromkeys(
        ("ATTEMPT_LOST", "ATTEMPT_RETRIED", "Attempt", "Timeline"), "engine.runtime.history"
    ),
    **dict.fromkeys(("HistoryStat", "history", "sparkline"), "engine.runtime.rollups"),
    **dict.fromkeys(
        ("LogLine", "follow_logs", "read_logs", "read_progress"), "engine.runtime.tasklogs"
    ),
    "PreviewTick": "engine.schedules.clock",
    "ScheduleInfo": "engine.schedules.info",
    "ScheduleSpec": "engine.schedules.spec",
    **dict.fromkeys(("TaskDef", "Workflow"), "engine.spec.definition"),
    "DEFAULT_MAX_PAYLOAD": "engine.spec.limits",
    **dict.fromkeys(("load_file", "load_text"), "engine.spec.loader"),
    "RateLimit": "engine.spec.rate_limits",
    "wait_line": "engine.spec.wait_tasks",
}

# The public names that are modules (``from engine import bulk``: ``bulk.select``...).
_MODULES = frozenset({"bulk"})

__all__ = [
    "AGENT_STATES",
    "ATTEMPT_LOST",
    "ATTEMPT_RETRIED",
    "Abort",
    "Agent",
    "AgentInfo",
    "AgentState",
    "Attempt",
    "DEFAULT_MAX_PAYLOAD",
    "DefinitionError",
    "EmbeddedRedis",
    "Engine",
    "Event",
    "EventBatch",
    "GONE_AFTER_S",
    "HANDLER_RULES",
    "Hint",
    "HistoryStat",
    "ITEM_STATES",
    "ItemStatus",
    "KeyChange",
    "LOOKS",
    "LeaseLostError",
    "LogLine",
    "Look",
    "NoDatabaseError",
    "NonRetryable",
    "NotFoundError",
    "NotReplicatedError",
    "PartialWriteError",
    "PreviewTick",
    "RateLimit",
    "RedisflowError",
    "RunResult",
    "ScheduleInfo",
    "ScheduleSpec",
    "Skip",
    "StateError",
    "Stats",
    "TASK_LOOKS",
    "Task",
    "TaskDef",
    "TaskFailed",
    "TaskState",
    "TaskStatus",
    "TemplateInfo",
    "Timeline",
    "UnreachableError",
    "WORKFLOW_STATES",
    "Watch",
    "Workflow",
    "WorkflowState",
    "WorkflowStatus",
    "WorkflowSummary",
    "bulk",
    "close_client",
    "connection_options",
    "connection_url",
    "current_agents",
    "exec_handler",
    "follow_logs",
    "glyphs",
    "history",
    "import_handler",
    "load_file",
    "load_text",
    "manager_handler",
    "manager_message",
    "missing_database",
    "open_client",
    "read_logs",
    "read_progress",
    "plural",
    "redact",
    "seed002_handler",
    "seed002_message",
    "sparkline",
    "unserved",
    "unserved_line",
    "visible",
    "wait_line",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept here after."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name in _MODULES:
        value = importlib.import_module(f"{home}.{name}")
    else:
        value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # the next use is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
