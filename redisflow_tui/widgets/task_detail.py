"""Everything about the selected task: payload, output, error, attempts, agent, timings."""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from engine import ITEM_STATES, ItemStatus, TaskStatus, visible, wait_line

from ..data.clock import Clock, format_duration
from ..data.dag import is_branch, task_look
from .looks import look_style, look_text
from .task_log_pane import TaskLogPane
from .task_table import item_look

MAX_SHOWN = 4000


def _value(value: Any) -> str:
    if value is None:
        return "—"
    text = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
    text = visible(text, multiline=True)  # a handler's text: escapes shown, not obeyed
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + f"\n… ({len(text):,} chars)"


def _names(names: list[str], most: int = 12) -> str:
    if not names:
        return "—"
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown}, … ({len(names):,} in all)"


def _items(task: TaskStatus, items: dict[str, int]) -> str:
    """A map's items by state: ``22 succeeded, 3 failed of 25``; or that it has none yet:
    a map expands (its items are stored) once it runs, after its parents succeeded."""
    shown = ", ".join(f"{items[s]:,} {s}" for s in ITEM_STATES if items.get(s))
    total = items.get("total")
    if total is not None:
        return f"{shown or 'none'} of {total:,} · enter: list them"
    if task.state == "running":
        return f"{shown} so far (expanding) · enter: list them" if shown else "none yet (expanding)"
    return "not expanded yet" if task.state in ("waiting", "ready") else "never expanded"


def _runs(run: TaskStatus | ItemStatus, most: int, clock: Clock) -> list[tuple[str, str]]:
    """The rows of how a task (or an item) ran: attempts, agent, times (a map's items
    are tried, each on its own: the map says how many tries each is allowed)."""
    is_map = isinstance(run, TaskStatus) and run.items is not None
    tries = f"{run.attempts} started, {run.failures} failed, {most} allowed"
    return [
        ("attempts", f"{most} allowed per item" if is_map else tries),
        ("agent", run.agent or "—"),
        ("ready", _when(clock, run.ready_at)),
        ("started", _when(clock, run.started_at)),
        ("finished", _when(clock, run.finished_at)),
        ("took", clock.since(run.started_at, run.finished_at) if run.started_at else "—"),
    ]


def _limits(task: TaskStatus, clock: Clock) -> list[tuple[str, str]]:
    """Its timeout and delay, with the time left while they count."""
    rows = []
    now = clock.now()
    if task.timeout is not None:
        text = format_duration(task.timeout)
        if task.state == "running" and task.started_at is not None:
            left = task.started_at + task.timeout - now
            text += f" ({format_duration(max(0.0, left))} left)"
        rows.append(("timeout", text))
    if task.delay is not None:
        text = format_duration(task.delay)
        if task.state == "ready" and task.ready_at is not None and task.ready_at > now:
            text += f" (ready in {format_duration(task.ready_at - now)})"
        rows.append(("delay", text))
    if task.wait is not None:
        line = wait_line(task.wait, task.signal, task.state, task.started_at)
        if line:
            rows.append(("wait", line))
        if task.state in ("ready", "suspended") and "signal" in task.wait:
            rows.append(("", "a: approve · j: reject (with a comment)"))
    if task.child is not None:
        rows.append(("child", f"run {task.child} · enter: open it"))
    return rows


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
        yield TaskLogPane(id="task-logs")

    def _follow(self, task_name: str | None) -> None:
        """The log pane follows the task shown (a map's items are in the map's log)."""
        wid = getattr(self.screen, "wid", None)
        self.query_one(TaskLogPane).follow(wid if task_name else None, task_name)

    def show(self, task: TaskStatus | None, clock: Clock, why: str | None = None) -> None:
        """Show ``task`` (or a hint when none is selected); ``why`` it is in its state,
        by its trigger rule and its parents' states (:meth:`WorkflowStatus.why`)."""
        body = self.query_one("#detail-body", Static)
        self._follow(task.name if task is not None else None)
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
            *_runs(task, task.max_attempts, clock),
            ("parents", _names(task.parents)),
            ("children", _names(task.children)),
        ]
        undecided = task.state in ("waiting", "skipped", "upstream_failed")
        if task.trigger != "all_success" or undecided:
            branch = " (failure branch)" if is_branch(task) else ""
            rows.insert(2, ("trigger", task.trigger + branch))
        if (
            why
            and (task.parents or task.skip_reason)
            and (undecided or task.trigger != "all_success")
        ):
            rows.insert(3, ("why", why))
        if task.when:  # its condition (engine.spec.conditions)
            rows.append(("when", task.when))
        if task.items is not None:
            rows.append(("items", _items(task, task.items)))
        rows += _limits(task, clock)
        self._fields(t, rows, task.error)
        t.append("\npayload\n", style="bold")
        t.append(_value(task.payload) + "\n")
        t.append("\noutput\n", style="bold")
        t.append(_value(task.output) + "\n")
        body.update(t)

    def show_item(self, item: ItemStatus | None, task: TaskStatus, clock: Clock) -> None:
        """Show ``item`` of map ``task``: its element, output and error."""
        body = self.query_one("#detail-body", Static)
        self._follow(task.name)
        if item is None:
            body.update(Text(f"No items of {task.name} to show here.", style="dim"))
            return
        t = Text()
        t.append(f"{task.name}.{item.index}", style="bold")
        t.append(f"  item {item.index:,} of map {task.name}  ", style="dim")
        t.append_text(look_text(self.app, item_look(item)))
        t.append("\n")
        rows = _runs(item, task.max_attempts, clock)
        if item.steps:  # its steps have the attempts and agents
            rows = [(label, v) for label, v in rows if label not in ("attempts", "agent")]
        self._fields(t, rows, item.error)
        if item.steps:
            t.append("\nsteps\n", style="bold")
            for name, state in item.steps.items():
                t.append(f"{name:>9} ", style="dim")
                t.append(str(state) + "\n")
        kept = item.element is not None or item.state != "succeeded"
        t.append("\nelement\n", style="bold")
        t.append((_value(item.element) if kept else "— (not kept once it succeeded)") + "\n")
        t.append("\noutput\n", style="bold")
        t.append(_value(item.output) + "\n")
        body.update(t)

    def _fields(self, t: Text, rows: list[tuple[str, str]], error: str | None) -> None:
        """Labelled rows, then the error (if any) in the failed colour."""
        for label, value in rows:
            t.append(f"{label:>9} ", style="dim")
            t.append(visible(value, multiline=True) + "\n")
        if error:
            t.append("\nerror\n", style=look_style(self.app, "failed"))
            t.append(_value(error) + "\n", style=look_style(self.app, "failed"))
