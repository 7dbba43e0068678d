"""Everything about the selected task: payload, output, error, attempts, agent, timings."""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from engine import TaskStatus

from ..data.clock import Clock
from ..data.dag import task_look
from .looks import look_style, look_text

MAX_SHOWN = 4000


def _value(value: Any) -> str:
    if value is None:
        return "—"
    text = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + f"\n… ({len(text):,} chars)"


def _names(names: list[str], most: int = 12) -> str:
    if not names:
        return "—"
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown}, … ({len(names):,} in all)"


def _when(clock: Clock, ts: float | None) -> str:
    return "—" if ts is None else clock.stamp(ts)


class TaskDetail(VerticalScroll):
    """The selected task in full."""

    DEFAULT_CSS = """
    TaskDetail { padding: 0 1; }
    TaskDetail > Static { width: 1fr; }
    """

    def compose(self) -> ComposeResult:
        yield Static("Select a task", id="detail-body")

    def show(self, task: TaskStatus | None, clock: Clock) -> None:
        """Show ``task`` (or a hint when none is selected)."""
        body = self.query_one("#detail-body", Static)
        if task is None:
            body.update(Text("Select a task in the graph or the table.", style="dim"))
            return
        app = self.app
        look = task_look(task)
        t = Text()
        t.append(task.name, style="bold")
        t.append(f"  #{task.index}  ", style="dim")
        t.append_text(look_text(app, look))
        t.append("\n")
        rows = [
            ("type", task.type or '""'),
            ("priority", str(task.priority)),
            (
                "attempts",
                f"{task.attempts} started, {task.failures} failed, {task.max_attempts} allowed",
            ),
            ("agent", task.agent or "—"),
            ("ready", _when(clock, task.ready_at)),
            ("started", _when(clock, task.started_at)),
            ("finished", _when(clock, task.finished_at)),
            (
                "took",
                clock.since(task.started_at, task.finished_at) if task.started_at else "—",
            ),
            ("parents", _names(task.parents)),
            ("children", _names(task.children)),
        ]
        for label, value in rows:
            t.append(f"{label:>9} ", style="dim")
            t.append(value + "\n")
        if task.error:
            t.append("\nerror\n", style=look_style(app, "failed"))
            t.append(_value(task.error) + "\n", style=look_style(app, "failed"))
        t.append("\npayload\n", style="bold")
        t.append(_value(task.payload) + "\n")
        t.append("\noutput\n", style="bold")
        t.append(_value(task.output) + "\n")
        body.update(t)
