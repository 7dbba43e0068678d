"""One workflow: its DAG filling in live, progress per level, its tasks in detail."""

from __future__ import annotations

import json
from typing import Any

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.css.query import NoMatches

from engine import (
    Engine,
    ItemStatus,
    NotFoundError,
    TaskState,
    TaskStatus,
    WorkflowStatus,
    unserved,
    unserved_line,
)

from ..data import actions
from ..data.dag import GLYPH
from ..data.feed import Changes
from ..data.items import ItemsQuery
from ..data.layout import DagLayout
from ..data.workflow import DAG_MODES, WorkflowView, read_workflow, waiting_for_signal
from ..widgets.dag_view import DagView
from ..widgets.key_bar import KeyBar
from ..widgets.levels import LevelsView
from ..widgets.live_table import LiveTable
from ..widgets.looks import WORKFLOW_GLYPH, markup_var
from ..widgets.task_detail import TaskDetail
from ..widgets.task_table import TaskTable
from ..widgets.text_line import TextLine
from .base import LiveScreen, PlanAction, RunAction
from .prompt import PromptScreen

MODE_NAMES = {
    "tasks": "every task",
    "groups": "groups",
    "focus": "around the selected task",
    "levels": "per level",
}
DETAIL_WIDTH = 60  # the task detail's columns (app.tcss #detail), where they fit
DETAIL_MIN = 24
TASKS_MIN = 51  # the task table's number, name, type and state columns, and its scrollbar
BIG = 3000  # above this many tasks, drawing every task is skipped when cycling views


class WorkflowScreen(LiveScreen):
    """A workflow's graph, per-level progress, task table and the selected task."""

    MODE = "workflows"
    PERIOD_S = 2.0  # running tasks' durations move even when nothing happens
    BINDINGS = [
        Binding("escape", "back", "Back", tooltip="Back to the list"),
        Binding("p", "pause", "Pause", tooltip="Pause this workflow"),
        Binding("r", "release", "Release", tooltip="Release (resume) this workflow"),
        Binding("x", "cancel", "Cancel", tooltip="Cancel this workflow"),
        Binding("t", "retry", "Retry", tooltip="Retry the failed tasks of this workflow"),
        Binding(
            "T",
            "retry_task",
            "Retry task",
            key_display="T",
            tooltip="Retry the selected failed task",
        ),
        Binding("c", "cleanup", "Clean up", tooltip="Clean up (delete) this finished workflow"),
        Binding("f", "filter('failed')", "Failed", tooltip="Show failed tasks only (again: all)"),
        Binding(
            "n", "filter('running')", "Running", tooltip="Show running tasks only (again: all)"
        ),
        Binding("l", "timeline", "Timeline", tooltip="Every attempt on a time axis (Gantt)"),
        Binding(
            "a",
            "signal('approve')",
            "Approve",
            tooltip="Approve the selected wait task (or the only one waiting)",
        ),
        Binding("j", "signal('reject')", "Reject", tooltip="Reject the selected wait task"),
        Binding(
            "d",
            "next_view",
            "View",
            tooltip="Graph view: every task, groups, around the selection, per level",
        ),
    ]

    def __init__(self, wid: str) -> None:
        super().__init__()
        self.wid = str(wid)
        self.view = WorkflowView(self.wid)
        self.view_mode: str | None = None
        self.task_filter = "all"
        self.sel_task: int | None = None
        self.focus_center = 0
        self.laying_out = False
        # a map's items in the task table instead of the tasks (None: the tasks)
        self.items_query: ItemsQuery | None = None
        self.items: list[ItemStatus] = []
        self.sel_item: int | None = None
        self.unserved_note = ""  # ready tasks no live agent serves (engine.unserved)

    def compose(self) -> ComposeResult:
        yield from self.frame()
        yield TextLine(id="wf-header")
        with Horizontal(id="wf-top"):
            yield DagView(id="dag")
            yield LevelsView(id="levels")
        with Horizontal(id="wf-bottom"):
            with Vertical(id="wf-tasks"):
                yield TextLine(id="tasks-title")
                yield TaskTable(id="tasks")
            yield TaskDetail(id="detail")
        yield KeyBar()

    def on_mount(self) -> None:
        super().on_mount()
        self._watch_open()
        self.query_one(DagView).focus()
        self._header()

    def on_resize(self, event: events.Resize) -> None:
        # a narrow terminal narrows the detail first: the task table keeps its number,
        # name, type and state columns (and its scrollbar)
        width = max(DETAIL_MIN, min(DETAIL_WIDTH, event.size.width - TASKS_MIN))
        try:
            self.query_one(TaskDetail).styles.width = width
        except NoMatches:
            pass  # not composed yet

    def on_unmount(self) -> None:
        super().on_unmount()
        self._watch_open()

    def _watch_open(self) -> None:
        wids = [s.wid for s in self.console.live_screens if isinstance(s, WorkflowScreen)]
        self.console.feed.watch_workflows(wids)

    # -- live -------------------------------------------------------------------------

    def absorb(self, changes: Changes) -> None:
        if changes.resync:
            self.pending.resync = True
        elif self.wid in changes.wids:
            self.pending.wids.add(self.wid)

    def wants_read(self, changes: Changes) -> bool:
        return changes.resync or self.wid in changes.wids

    def read(self, engine: Engine, changes: Changes) -> Any:
        status = read_workflow(engine, self.wid)
        prepared = None
        if status is not None and (
            self.view.status is None or len(status.tasks) != len(self.view.looks)
        ):
            draft = WorkflowView(self.wid)
            draft.update(status)
            mode = self.view_mode or draft.default_mode()
            prepared = (draft, mode, self._layout(draft, mode, 0))
        query, items = self.items_query, None
        if query is not None and status is not None:
            try:
                items = query.read(engine, self.wid)
            except NotFoundError:  # cleaned up meanwhile
                items = []
        note = ""
        if status is not None and any(t.state == TaskState.READY for t in status.tasks):
            note = unserved_line(unserved(status, engine.agents()), most=3)
        return status, prepared, query, items, note

    def _layout(self, view: WorkflowView, mode: str, focus: int) -> DagLayout | None:
        """The layout of ``mode`` (cached per definition); runs in a worker thread."""
        if mode == "levels":
            return None
        graph = view.graph(mode, focus)
        return self.console.layouts.get(graph.key, graph.widths(), graph.edges)

    def apply(self, result: Any, changes: Changes) -> None:
        status: WorkflowStatus | None
        status, prepared, query, items, self.unserved_note = result
        if self.items_query is not None:
            if query == self.items_query:
                self.items = items or []
            else:  # the page or filter changed while reading
                self.request()
        if prepared is not None:
            self.view, self.view_mode, lay = prepared
            self.view.update(status)  # same status: no change, keeps looks
            self._show_view(lay)
            changed = True
        else:
            changed = bool(self.view.update(status))
            if not self.view.gone and changed:
                self.query_one(DagView).recolor(
                    self.view.looks, self.view.levels(), self.view.map_counts
                )
        if self.view.gone:
            self._header()
            return
        if changed:
            self.query_one(LevelsView).show(self.view.levels())
        self._tasks()
        self._header()

    def _show_view(self, lay: DagLayout | None) -> None:
        dag = self.query_one(DagView)
        if self.view_mode == "levels" or lay is None:
            dag.show_levels(self.view.levels(), self.view.looks)
        else:
            graph = self.view.graph(self.view_mode or "tasks", self.focus_center)
            dag.show_graph(graph, lay, self.view.looks, self.view.map_counts)
            if self.sel_task is not None:
                dag.select_task(self.sel_task)
        self.query_one(LevelsView).show(self.view.levels())

    def _tasks(self) -> None:
        if self.items_query is not None:
            self._items()
            return
        table = self.query_one(TaskTable)
        rows = self.view.filtered(self.task_filter)
        table.show(rows, self.console.clock)
        title = {"all": "All tasks", "failed": "Failed tasks", "running": "Running tasks"}
        extra = f" · first {len(rows) - table.truncated:,} shown" if table.truncated else ""
        self.query_one("#tasks-title", TextLine).set(
            Content.from_markup(
                "[b]$title[/b] [dim]($n) · f failed only · n running only$extra[/]",
                title=title[self.task_filter],
                n=f"{len(rows):,}",
                extra=extra,
            )
        )
        if self.sel_task is None and rows:
            # opened: a failed workflow's first failed task, else the first task
            failed = [t.index for t in rows if t.state == TaskState.FAILED]
            self.sel_task = failed[0] if failed else rows[0].index
            table.select_task(self.sel_task)
            self.query_one(DagView).select_task(self.sel_task)
        self._detail()

    def _items(self) -> None:
        """The open map's page of items in the task table, and the selected one."""
        query, table = self.items_query, self.query_one(TaskTable)
        assert query is not None
        task = self.view.tasks[query.task]
        table.show_items(self.items, task, self.console.clock)
        title = {"all": "Items", "failed": "Failed items", "running": "Running items"}
        self.query_one("#tasks-title", TextLine).set(
            Content.from_markup(
                "[b]$title of $name[/b] [dim]($n) · page $page/$pages · [ ] page · "
                "f failed · n running · esc tasks[/]",
                title=title[query.filter],
                name=task.name,
                n=f"{query.count(task):,}",
                page=f"{query.page + 1:,}",
                pages=f"{query.pages(task):,}",
            )
        )
        if self.items and self.sel_item not in {i.index for i in self.items}:
            self.sel_item = self.items[0].index
        self._detail()

    def _detail(self) -> None:
        if self.items_query is not None:
            item = next((i for i in self.items if i.index == self.sel_item), None)
            the_map = self.view.tasks[self.items_query.task]
            self.query_one(TaskDetail).show_item(item, the_map, self.console.clock)
            return
        tasks = self.view.tasks
        at = self.sel_task
        task = tasks[at] if at is not None and at < len(tasks) else None
        st = self.view.status
        why = st.why(task) if task is not None and st is not None else None
        self.query_one(TaskDetail).show(task, self.console.clock, why)

    def _header(self) -> None:
        view = self.view
        st = view.status
        if view.gone:
            text = Content.from_markup(
                "[b]Workflow $wid[/b] [dim]· cleaned up: nothing is kept of it any more[/]",
                wid=self.wid,
            )
        elif st is None:
            text = Content.from_markup("[b]Workflow $wid[/b] [dim]· reading…[/]", wid=self.wid)
        else:
            counts = view.counts()
            state = str(st.state)
            parts = [
                f"[b]Workflow $wid[/b] · [b]$name[/b] · [b {markup_var(state)}]$glyph $state[/]"
                + (" ($reason)" if st.reason else ""),
                "· [b]$ok[/b]/$n succeeded",
            ]
            values: dict[str, object] = {
                "wid": self.wid,
                "name": st.name,
                "glyph": WORKFLOW_GLYPH.get(state, ""),
                "state": state,
                "reason": st.reason or "",
                "ok": f"{st.succeeded:,}",
                "n": f"{st.total:,}",
            }
            for look in (
                "running", "suspended", "retrying", "ready", "failed", "upstream_failed",
                "skipped", "cancelled",
            ):  # fmt: skip
                if counts.get(look):
                    parts.append(f"· [{markup_var(look)}]{GLYPH[look]} ${look}[/]")
                    values[look] = f"{counts[look]:,} {look}"
                    if look == "failed" and state == "succeeded":
                        values[look] += " (handled)"  # by failure branches, or in finally
            if st.parent is not None:  # a child run: the run whose task started it
                parts.append("· child of [b]$parent[/b]")
                values["parent"] = st.parent.split(":", 1)[0]
            parts.append("· created $age ago")
            values["age"] = self.console.clock.age(st.created_at)
            if st.deadline is not None and not st.finished_at:
                parts.append("· deadline in [b]$deadline[/b]")
                left = max(0.0, st.deadline - self.console.clock.now())
                values["deadline"] = self.console.clock.since(0.0, left)
            if st.start_at is not None:  # scheduled: starts then (r starts it now)
                parts.append("· starts [b]$at[/b] (in $left)")
                values["at"] = self.console.clock.stamp(st.start_at)
                values["left"] = self.console.clock.since(self.console.clock.now(), st.start_at)
            if st.finished_at:
                parts.append("· took $took")
                values["took"] = self.console.clock.since(st.created_at, st.finished_at)
            if st.input is not None:
                shown = json.dumps(st.input, separators=(",", ":"), ensure_ascii=False)
                parts.append("· input [b]$input[/b]")
                values["input"] = shown if len(shown) <= 60 else shown[:59] + "…"
            if self.unserved_note:  # ready tasks that would wait for ever
                parts.append("· [b yellow]⚠ $unserved[/]")
                values["unserved"] = self.unserved_note
            view_name = MODE_NAMES.get(self.view_mode or "", "…")
            if self.laying_out:
                view_name += " (laying out…)"
            parts.append("[dim]· graph: $view (d)[/]")
            values["view"] = view_name
            text = Content.from_markup(" ".join(parts), **values)
        self.query_one("#wf-header", TextLine).set(text)

    # -- selection --------------------------------------------------------------------

    @on(DagView.Selected)
    def _dag_selected(self, event: DagView.Selected) -> None:
        if self.items_query is not None and event.task != self.items_query.task:
            self._close_items()
        if event.chosen and self._map(event.task) is not None:
            self._open_items(event.task)
            return
        if event.chosen and self._open_child(event.task):
            return
        self.sel_task = event.task
        self.query_one(TaskTable).select_task(event.task)
        self._detail()
        if event.chosen and self.view_mode == "focus" and event.task != self.focus_center:
            self._change_view("focus", event.task)

    @on(LiveTable.Highlighted, "#tasks")
    def _row_highlighted(self, event: LiveTable.Highlighted) -> None:
        if event.key is None:
            return
        if self.items_query is not None:
            self.sel_item = int(event.key)
            self._detail()
            return
        task = int(event.key)
        if task == self.sel_task:
            return
        self.sel_task = task
        self.query_one(DagView).select_task(task)
        self._detail()

    @on(LiveTable.Selected, "#tasks")
    def _row_selected(self, event: LiveTable.Selected) -> None:
        at = self.sel_task
        if self.items_query is None and at is not None and self._map(at) is not None:
            self._open_items(at)
            return
        if self.items_query is None and at is not None and self._open_child(at):
            return
        if self.view_mode == "focus" and at is not None and at != self.focus_center:
            self._change_view("focus", at)

    def _open_child(self, task: int) -> bool:
        """Open task ``task``'s child run (a run: task's), if it has one."""
        tasks = self.view.tasks
        child = tasks[task].child if 0 <= task < len(tasks) else None
        if child is None:
            return False
        self.app.goto(child)  # type: ignore[attr-defined]
        return True

    # -- a map's items ----------------------------------------------------------------

    def _map(self, task: int) -> TaskStatus | None:
        """Task ``task`` if it is a map."""
        tasks = self.view.tasks
        if 0 <= task < len(tasks) and tasks[task].items is not None:
            return tasks[task]
        return None

    def _open_items(self, task: int) -> None:
        """Show map ``task``'s items in the task table, first page."""
        self.sel_task = task
        self.items_query = ItemsQuery(task, self.view.tasks[task].name)
        self._new_items()
        self.query_one(TaskTable).focus()

    def _close_items(self) -> None:
        """Back to the tasks, the map still selected."""
        self.items_query = None
        self.query_one(TaskTable).clear()
        self._tasks()
        if self.sel_task is not None:
            self.query_one(TaskTable).select_task(self.sel_task)

    def _new_items(self) -> None:
        """The items' page or filter changed: show it as soon as it is read."""
        self.items, self.sel_item = [], None
        self.query_one(TaskTable).clear()
        self._tasks()
        self.request()

    @on(TaskTable.Page)
    def _page(self, event: TaskTable.Page) -> None:
        query = self.items_query
        if query is not None:
            turned = query.turned(event.delta, self.view.tasks[query.task])
            if turned != query:
                self.items_query = turned
                self._new_items()

    # -- views and filters ------------------------------------------------------------

    def action_filter(self, which: str) -> None:
        """Show only failed (or only running) tasks; again to show all."""
        if self.items_query is not None:
            self.items_query = self.items_query.filtered(which)
            self._new_items()
            return
        self.task_filter = "all" if self.task_filter == which else which
        self.query_one(TaskTable).clear()
        self._tasks()

    def action_next_view(self) -> None:
        if self.view.status is None:
            return
        modes = list(DAG_MODES)
        if len(self.view.tasks) > BIG:
            modes.remove("tasks")
        at = modes.index(self.view_mode) if self.view_mode in modes else -1
        self._change_view(modes[(at + 1) % len(modes)], self.sel_task or 0)

    def _change_view(self, mode: str, focus: int) -> None:
        self.view_mode = mode
        self.focus_center = focus
        self.laying_out = True
        self._header()
        self._lay_out(mode, focus)

    @work(thread=True, group="layout", exclusive=True, exit_on_error=False)
    def _lay_out(self, mode: str, focus: int) -> None:
        lay = self._layout(self.view, mode, focus)
        self.app.call_from_thread(self._laid_out, mode, focus, lay)

    def _laid_out(self, mode: str, focus: int, lay: DagLayout | None) -> None:
        if mode != self.view_mode or focus != self.focus_center:
            return
        self.laying_out = False
        self._show_view(lay)
        self._header()

    # -- actions ----------------------------------------------------------------------

    def action_back(self) -> None:
        if self.items_query is not None:
            self._close_items()
            return
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()

    def action_timeline(self) -> None:
        from .timeline import TimelineScreen

        self.app.push_screen(TimelineScreen(self.wid))

    def action_pause(self) -> None:
        self.post_message(RunAction(actions.pause, self.wid))

    def action_release(self) -> None:
        self.post_message(RunAction(actions.release, self.wid))

    def action_cancel(self) -> None:
        self.post_message(PlanAction(actions.plan_cancel, self.wid))

    def action_retry(self) -> None:
        self.post_message(PlanAction(actions.plan_retry, self.wid))

    def action_cleanup(self) -> None:
        self.post_message(PlanAction(actions.plan_cleanup, self.wid))

    def action_signal(self, how: str) -> None:
        """Approve or reject the selected wait task (one waiting for a signal), asking for
        a comment first; the signal records who did it (the console's user). Approving
        with another task selected approves the one task that waits, if only one does."""
        tasks = self.view.tasks
        task = (
            tasks[self.sel_task]
            if self.sel_task is not None and self.sel_task < len(tasks)
            else None
        )
        if task is None or task.wait is None or "signal" not in task.wait or task.state.terminal:
            # approving the one task that waits needs no choosing; a rejection (it fails
            # the task) is only ever of the task selected
            waiting = waiting_for_signal(tasks)
            if how != "approve" or len(waiting) != 1:
                self.notify("Select a task waiting for a signal first", severity="warning")
                return
            task = waiting[0]
        assert task.wait is not None
        name = task.wait["signal"]

        def answered(comment: str | None) -> None:
            if comment is not None:
                self.post_message(
                    RunAction(actions.signal, self.wid, name, how == "reject", comment)
                )

        verb = "Approve" if how == "approve" else "Reject"
        self.app.push_screen(
            PromptScreen(
                f"{verb} {task.name} (signal {name})",
                "a comment, recorded with your name (optional)",
                optional=True,
            ),
            answered,
        )

    def action_retry_task(self) -> None:
        tasks = self.view.tasks
        query = self.items_query
        if query is not None:
            item = next((i for i in self.items if i.index == self.sel_item), None)
            if item is None or item.state != "failed":
                self.notify("Select a failed item first", severity="warning")
                return
            name = f"{query.name}[{item.index}]"
            self.post_message(RunAction(actions.retry_task, self.wid, name))
            return
        if self.sel_task is None or self.sel_task >= len(tasks):
            self.notify("Select a failed task first", severity="warning")
            return
        self.post_message(RunAction(actions.retry_task, self.wid, tasks[self.sel_task].name))
