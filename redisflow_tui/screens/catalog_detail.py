"""One schedule (settings, next ticks, recent runs) or one template (its text, recent runs)."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.widgets import Static

from engine import Engine, NotFoundError, TemplateInfo, WorkflowSummary, plural

from ..data import schedules as sd
from ..data.feed import Changes
from ..widgets.key_bar import KeyBar
from ..widgets.live_table import LiveTable
from ..widgets.looks import markup_var
from ..widgets.text_line import TextLine
from ..widgets.workflow_table import WorkflowTable
from .base import OpenWorkflow, PlanAction
from .run_dialogs import RunsTemplates


def _lines(rows: list[tuple[str, str]]) -> Table:
    """Labels and values in two columns (a long value wraps under itself)."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    for label, value in rows:
        grid.add_row(label, value)
    return grid


class DetailScreen(RunsTemplates):
    """What both details share: a title, the recent runs, going back, opening a run."""

    MODE = "schedules"
    PERIOD_S = 2.0

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name_ = name

    def _reading(self) -> Content:
        return Content.from_markup("[b]$name[/b] · [dim]reading…[/]", name=self.name_)

    def absorb(self, changes: Changes) -> None:
        self.pending.resync = self.pending.resync or changes.resync
        self.pending.pushed += changes.pushed

    def wants_read(self, changes: Changes) -> bool:
        return bool(changes.resync or changes.pushed)

    def show_runs(self, title: Content, runs: list[WorkflowSummary]) -> None:
        self.query_one("#detail-runs-title", TextLine).set(title)
        self.query_one(WorkflowTable).show(runs, self.console.clock)

    def show_gone(self, what: str) -> None:
        self.query_one("#detail-title", TextLine).set(
            Content.from_markup("[b $error]$what no longer exists[/]", what=what)
        )

    @on(LiveTable.Selected, "#detail-runs")
    def _run_selected(self, event: LiveTable.Selected) -> None:
        self.post_message(OpenWorkflow(event.key))

    def action_open_run(self) -> None:
        wid = self.query_one(WorkflowTable).selected_wid
        if wid is None:
            self.notify("No run selected", severity="warning")
        else:
            self.post_message(OpenWorkflow(wid))

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()


class ScheduleDetailScreen(DetailScreen):
    """A schedule's settings and counters, its next ticks, and its template's runs."""

    BINDINGS = [
        Binding("escape", "back", "Back", tooltip="Back to the schedules"),
        Binding("enter", "open_run", "Open run", tooltip="Open the selected run"),
        Binding("p", "pause_schedule", "Pause/unpause", tooltip="Pause or unpause this schedule"),
        Binding("t", "trigger_schedule", "Trigger now", tooltip="Run this schedule now"),
    ]

    def compose(self) -> ComposeResult:
        yield from self.frame()
        yield TextLine(self._reading(), id="detail-title")
        with Horizontal(id="detail-top"):
            yield Static(id="detail-settings")
            yield Static(id="detail-ticks")
        yield TextLine(id="detail-runs-title")
        yield WorkflowTable(id="detail-runs")
        yield KeyBar()

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one(WorkflowTable).focus()

    def read(self, engine: Engine, changes: Changes) -> sd.ScheduleDetail | None:
        try:
            return sd.read_detail(engine, self.name_)
        except NotFoundError:
            return None

    def apply(self, result: Any, changes: Changes) -> None:
        if result is None:
            self.show_gone(f"Schedule {self.name_}")
            return
        detail: sd.ScheduleDetail = result
        info = detail.info
        now = self.console.clock.now()
        state = sd.schedule_state(info)
        glyph, look = sd.STATE_LOOKS[state]
        self.query_one("#detail-title", TextLine).set(
            Content.from_markup(
                f"Schedule [b]$name[/b] · [{markup_var(look)}]$glyph $state[/] · $counters",
                name=info.name,
                glyph=glyph,
                state=state,
                counters=sd.counters(info),
            )
        )
        rows = sd.settings(info)
        run, run_state = sd.last_run_parts(info)
        rows.append(("latest run", f"{run} {run_state}".strip()))
        if info.last_tick is not None:
            rows.append(("last tick", f"{sd.local_time(info.last_tick, info.timezone, now)} "
                         f"({sd.relative(info.last_tick, now)})"))  # fmt: skip
        self.query_one("#detail-settings", Static).update(_lines(rows))
        self.query_one("#detail-ticks", Static).update(self._ticks(detail, now))
        self.show_runs(
            Content.from_markup(
                "[b]Recent runs of template $template[/b] [dim](by this schedule or "
                "otherwise; enter opens one)[/]",
                template=info.template,
            ),
            detail.runs,
        )

    def _ticks(self, detail: sd.ScheduleDetail, now: float) -> Content:
        info = detail.info
        head = Content.from_markup("[b]Next ticks[/b] [dim]($zone)[/]", zone=info.timezone)
        if info.paused:
            return head + Content.from_markup("\n[dim]none while paused[/]")
        if not detail.ticks:
            return head + Content.from_markup("\n[dim]none: the schedule has ended[/]")
        lines = [head]
        for t in detail.ticks:
            due = t.due_ms / 1000
            jitter = (t.due_ms - t.tick_ms) / 1000
            text = Content.assemble(
                f"{t.local:%a %Y-%m-%d %H:%M %Z}",
                (f"  {sd.relative(due, now)}", "dim"),
                (f" (+{jitter:.1f}s jitter)", "dim") if jitter else "",
                (f"  {t.note}", "$warning") if t.note else "",
            )
            lines.append(text)
        return Content("\n").join(lines)

    def action_pause_schedule(self) -> None:
        self.post_message(PlanAction(sd.plan_pause, self.name_))

    def action_trigger_schedule(self) -> None:
        self.post_message(PlanAction(sd.plan_trigger, self.name_))


class TemplateDetailScreen(DetailScreen):
    """A template's latest version as it was put, and its recent runs."""

    BINDINGS = [
        Binding("escape", "back", "Back", tooltip="Back to the templates"),
        Binding("enter", "open_run", "Open run", tooltip="Open the selected run"),
        Binding("r", "run_template", "Run…", tooltip="Run this template with an input"),
    ]

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.info: TemplateInfo | None = None

    def compose(self) -> ComposeResult:
        yield from self.frame()
        yield TextLine(self._reading(), id="detail-title")
        with VerticalScroll(id="detail-text-box"):
            yield Static(id="detail-text")
        yield TextLine(id="detail-runs-title")
        yield WorkflowTable(id="detail-runs")
        yield KeyBar()

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one(WorkflowTable).focus()

    def read(self, engine: Engine, changes: Changes) -> Any:
        try:
            info = engine.template(self.name_)
        except NotFoundError:
            return None
        return info, engine.list(template=self.name_, limit=sd.RUNS_SHOWN)

    def apply(self, result: Any, changes: Changes) -> None:
        if result is None:
            self.show_gone(f"Template {self.name_}")
            return
        info, runs = result
        self.info = info
        self.query_one("#detail-title", TextLine).set(
            Content.from_markup(
                "Template [b]$name[/b] · v$version (the latest; runs start from it) · "
                "$runs · put $age ago from $source",
                name=info.name,
                version=str(info.version),
                runs=plural(info.runs, "run"),
                age=self.console.clock.age(info.put_at),
                source=info.source,
            )
        )
        self.query_one("#detail-text", Static).update(Content(info.text or ""))
        self.show_runs(Content.from_markup("[b]Recent runs[/b] [dim](enter opens one)[/]"), runs)

    def action_run_template(self) -> None:
        self.ask_run(self.name_, self.info.version if self.info else 0)
