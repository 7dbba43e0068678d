"""The selected task's log, live: what its handler wrote (every attempt; a map's items
too) and its progress, read in a thread every second while the task can still write."""

from __future__ import annotations

import time
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Log, Static

from engine import LogLine, NotFoundError, read_logs, read_progress, visible

POLL_S = 1.0
MAX_LINES = 2000  # lines the pane keeps (the oldest go)


def log_line(x: LogLine, key: str | None = None) -> str:
    """One line as the pane shows it: ``12:00:01 #1 text`` (``!`` marks stderr; an item's
    key when the task is a map's)."""
    stamp = time.strftime("%H:%M:%S", time.localtime(x.ts))
    who = f" {x.key}" if "." in x.key and x.key != key else ""
    err = " !" if x.source == "stderr" else ""
    return f"{stamp} #{x.attempt}{who}{err} {visible(x.text, multiline=True)}"


def progress_line(p: dict[str, Any] | None) -> str:
    """``progress 40% rows 4,000/10,000`` ("" for none)."""
    if not p or not isinstance(p.get("fraction"), int | float):
        return ""
    message = visible(str(p.get("message") or ""))
    return f"progress {p['fraction'] * 100:.0f}% {message}".rstrip()


class TaskLogPane(Vertical):
    """The log of one task of one workflow, following it while it can still write."""

    DEFAULT_CSS = """
    TaskLogPane { height: 12; min-height: 4; border-top: solid $primary-darken-2; }
    TaskLogPane > #log-title { height: 1; color: $text-muted; }
    TaskLogPane > Log { height: 1fr; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.wid: str | None = None
        self.task_name: str | None = None
        self.cursor = "-"
        self.lines = 0
        self.done = False  # the workflow finished and its last lines are shown
        self.progress = ""
        self._reading = False
        self.reads = 0  # reads applied since the task was chosen (tests wait on it)

    def compose(self) -> ComposeResult:
        yield Static("log", id="log-title")
        yield Log(max_lines=MAX_LINES, id="log-lines")

    def on_mount(self) -> None:
        self.set_interval(POLL_S, self._poll)

    def follow(self, wid: str | None, task_name: str | None) -> None:
        """Show task ``task_name`` of workflow ``wid`` (``None``: nothing)."""
        if (wid, task_name) == (self.wid, self.task_name):
            return
        self.wid, self.task_name = wid, task_name
        self.cursor, self.lines, self.done, self.progress = "-", 0, False, ""
        self.reads = 0
        self.query_one(Log).clear()
        self._title()
        self._poll()

    def _title(self) -> None:
        if self.task_name is None:
            text = "log"
        else:
            count = f"{self.lines:,} line{'s' if self.lines != 1 else ''}"
            if not self.lines:
                count = "nothing written"
            if not self.lines and not self.done:
                count += " yet"
            text = f"log of {self.task_name} · {count}"
            if self.progress:
                text += f" · {self.progress}"
        self.query_one("#log-title", Static).update(Content(text))  # no markup: a progress message

    def _poll(self) -> None:
        if self.wid is None or self.task_name is None or self.done or self._reading:
            return
        self._reading = True
        self._read(self.wid, self.task_name, self.cursor)

    @work(thread=True, group="task-log", exit_on_error=False)
    def _read(self, wid: str, name: str, cursor: str) -> None:
        engine = self.screen.console.engine  # type: ignore[attr-defined]
        try:
            finished = engine.state(wid).finished
            lines, cursor = read_logs(engine, wid, name, cursor)
            progress = read_progress(engine, wid) if not finished else {}
        except NotFoundError:
            lines, finished, progress = [], True, {}
        except Exception:  # noqa: BLE001 - Redis away: the next tick tries again
            self.app.call_from_thread(self._failed)
            return
        self.app.call_from_thread(self._apply, wid, name, lines, cursor, finished, progress)

    def _failed(self) -> None:
        self._reading = False

    def _apply(
        self,
        wid: str,
        name: str,
        lines: list[LogLine],
        cursor: str,
        finished: bool,
        progress: dict[str, Any],
    ) -> None:
        self._reading = False
        if (wid, name) != (self.wid, self.task_name):
            return  # another task was selected meanwhile
        if lines:
            self.query_one(Log).write_lines(log_line(x) for x in lines)
            self.lines += len(lines)
        self.cursor = cursor
        self.reads += 1
        self.done = finished  # read after it finished: nothing more will come
        self.progress = progress_line(self._own_progress(progress))
        self._title()

    def _own_progress(self, progress: dict[str, Any]) -> dict[str, Any] | None:
        status = getattr(self.screen, "view", None)
        tasks = getattr(status, "tasks", None) or []
        for t in tasks:
            if t.name == self.task_name:
                return progress.get(str(t.index))
        return None
