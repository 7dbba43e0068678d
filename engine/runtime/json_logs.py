"""``redisflow-agent --log-format json``: one JSON object per log record, per line.

Each line has ``time`` (UTC, ISO 8601, milliseconds), ``level``, ``logger`` and
``message`` (and ``exception``, a traceback, when the record has one). A record that
concerns a task attempt adds ``workflow_id``, ``task`` (its name), ``key`` (its id in the
workflow: ``3``, or ``3.7`` for item 7 of map 3), ``type`` and ``attempt``: a record
logged inside a handler (the attempt is the context's, as task logs know it), or one the
agent logs about a task with ``extra=about(task)``.

JSON escapes every control character and, with ``ensure_ascii``, every non-ASCII one: a
line is one record, whatever its message holds.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from engine.core.task import Task

from .tasklogs import current

TASK_ATTR = "redisflow_task"  # the LogRecord attribute that names the task a record is about


def about(task: Task) -> dict[str, Any]:
    """``extra=`` for a log record about ``task`` (outside its handler's context)."""
    return {TASK_ATTR: task}


def task_fields(task: Task) -> dict[str, Any]:
    """What a JSON line says of the task attempt a record concerns."""
    return {
        "workflow_id": task.workflow_id,
        "task": task.name,
        "key": task.key,
        "type": task.type,
        "attempt": task.attempt,
    }


class JsonFormatter(logging.Formatter):
    """A record as one line of JSON (see the module's docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        at = time.gmtime(record.created)
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", at) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        task = getattr(record, TASK_ATTR, None)
        if not isinstance(task, Task):
            cap = current()  # inside a handler: its attempt (None elsewhere)
            task = None if cap is None else cap.task
        if task is not None:
            out.update(task_fields(task))
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str)
