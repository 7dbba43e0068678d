"""Templates & Schedules: stored templates with their runs, and the schedules that run them."""

from __future__ import annotations

from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content

from engine import Engine, ScheduleInfo, TemplateInfo, plural

from ..data import schedules as sd
from ..data.feed import Changes
from ..widgets.key_bar import KeyBar
from ..widgets.live_table import Cell, LiveTable, Row
from ..widgets.looks import WORKFLOW_GLYPH, markup_var
from ..widgets.text_line import TextLine
from .base import PlanAction
from .catalog_detail import ScheduleDetailScreen, TemplateDetailScreen
from .run_dialogs import RunsTemplates

TEMPLATE_COLUMNS = (
    ("name", "Template", 28),
    ("version", "Version", 8),
    ("runs", "Runs", 9),
    ("updated", "Updated", 9),
    ("source", "Source", 44),
)
# fits 140 columns; a paused or ended schedule says so where its next due time would be
SCHEDULE_COLUMNS = (
    ("name", "Schedule", 16),
    ("template", "Template", 12),
    ("when", "When", 20),
    ("zone", "Time zone", 16),
    ("next", "Next due (local)", 21),
    ("last", "Last run", 14),
    ("overlap", "Overlap", 12),
    ("runs", "Runs", 5),
    ("skipped", "Skipped", 7),
    ("missed", "Missed", 6),
)
TEMPLATE_ACTIONS = frozenset({"run_template"})
SCHEDULE_ACTIONS = frozenset({"pause_schedule", "trigger_schedule"})


def template_row(t: TemplateInfo, age: str) -> Row:
    """The cells of one template."""
    return (t.name, f"v{t.version}", f"{t.runs:,}", age, t.source)


def schedule_row(s: ScheduleInfo, now: float) -> Row:
    """The cells of one schedule."""
    state = sd.schedule_state(s)
    glyph, look = sd.STATE_LOOKS[state]
    run, run_state = sd.last_run_parts(s)
    last: Cell = run
    if run_state:
        last = [(f"{run} ", ""), (f"{WORKFLOW_GLYPH.get(run_state, '')} {run_state}", run_state)]
    return (
        s.name,
        s.template,
        sd.cadence_words(s),
        s.timezone,
        sd.next_due_text(s, now) if state == "active" else (f"{glyph} {state}", look),
        last,
        sd.overlap_text(s),
        f"{s.runs:,}",
        (f"{s.skipped:,}", "bold") if s.skipped else "0",
        (f"{s.missed:,}", "stale") if s.missed else "0",
    )


class SchedulesScreen(RunsTemplates):
    """Templates (run one with an input) and schedules (pause, unpause, trigger, detail)."""

    MODE = "schedules"
    PERIOD_S = 2.0  # next-due times count down; latest runs change state
    BINDINGS = [
        Binding("enter", "open", "Detail", tooltip="Show the selected schedule or template"),
        Binding("r", "run_template", "Run…", tooltip="Run the selected template with an input"),
        Binding(
            "p", "pause_schedule", "Pause/unpause", tooltip="Pause or unpause the selected schedule"
        ),
        Binding("t", "trigger_schedule", "Trigger now", tooltip="Run the selected schedule now"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.catalog: sd.Catalog | None = None

    def compose(self) -> ComposeResult:
        yield from self.frame()
        yield TextLine(Content.from_markup("[dim]reading…[/]"), id="templates-title")
        yield LiveTable(TEMPLATE_COLUMNS, id="templates")
        yield TextLine(id="schedules-title")
        yield LiveTable(SCHEDULE_COLUMNS, id="schedules")
        yield KeyBar()

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#templates", LiveTable).focus()

    # -- live -------------------------------------------------------------------------

    def absorb(self, changes: Changes) -> None:
        # runs pushed or cleaned change the counts; the period covers state changes
        self.pending.resync = self.pending.resync or changes.resync
        self.pending.pushed += changes.pushed
        self.pending.cleaned += changes.cleaned

    def wants_read(self, changes: Changes) -> bool:
        return bool(changes.resync or changes.pushed or changes.cleaned)

    def read(self, engine: Engine, changes: Changes) -> sd.Catalog:
        return sd.read_catalog(engine)

    def apply(self, result: Any, changes: Changes) -> None:
        catalog: sd.Catalog = result
        self.catalog = catalog
        clock = self.console.clock
        now = clock.now()
        self.query_one("#templates", LiveTable).set_rows(
            [(t.name, template_row(t, clock.age(t.put_at))) for t in catalog.templates]
        )
        self.query_one("#schedules", LiveTable).set_rows(
            [(s.name, schedule_row(s, now)) for s in catalog.schedules]
        )
        self._titles(catalog, now)

    def _titles(self, catalog: sd.Catalog, now: float) -> None:
        n = len(catalog.templates)
        if n:
            runs = sum(t.runs for t in catalog.templates)
            text = Content.from_markup(
                "[b]Templates[/b] · $n · $runs pushed · [dim]r runs the selected one "
                "with an input · enter shows it · tab: schedules[/]",
                n=f"{n:,}",
                runs=plural(runs, "run"),
            )
        else:
            text = Content.from_markup(
                "[b]Templates[/b] · none yet [dim](redisflow template put FILE)[/]"
            )
        self.query_one("#templates-title", TextLine).set(text)
        self.query_one("#schedules-title", TextLine).set(self._schedules_title(catalog, now))

    def _schedules_title(self, catalog: sd.Catalog, now: float) -> Content:
        schedules = catalog.schedules
        if not schedules:
            return Content.from_markup(
                "[b]Schedules[/b] · none yet [dim](redisflow schedule put FILE)[/]"
            )
        by = {state: 0 for state in sd.STATE_LOOKS}
        for s in schedules:
            by[sd.schedule_state(s)] += 1
        parts = [Content.from_markup("[b]Schedules[/b] · $n", n=f"{len(schedules):,}")]
        for state, count in by.items():
            if count:
                glyph, look = sd.STATE_LOOKS[state]
                parts.append(
                    Content.from_markup(
                        f"[{markup_var(look)}]$glyph $n $state[/]",
                        glyph=glyph,
                        n=f"{count:,}",
                        state=state,
                    )
                )
        due = [s for s in schedules if sd.schedule_state(s) == "active"]
        if due:
            first = min(due, key=lambda s: s.next_due or 0.0)
            parts.append(
                Content.from_markup(
                    "next: [b]$name[/b] $when",
                    name=first.name,
                    when=sd.next_due_text(first, now),
                )
            )
        return Content(" · ").join(parts)

    # -- focus and keys -----------------------------------------------------------------

    def on_descendant_focus(self) -> None:
        self.refresh_bindings()

    def _focused_table(self) -> str | None:
        focused = self.focused
        return focused.id if isinstance(focused, LiveTable) else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        allowed = super().check_action(action, parameters)
        if not allowed:
            return allowed
        table = self._focused_table()
        if action in TEMPLATE_ACTIONS:
            return table == "templates"
        if action in SCHEDULE_ACTIONS:
            return table == "schedules"
        return True

    def _selected(self, table: str) -> str | None:
        key = self.query_one(f"#{table}", LiveTable).cursor_key
        if key is None:
            self.notify(f"No {table[:-1]} selected", severity="warning")
        return key

    @on(LiveTable.Selected)
    def _row_selected(self, event: LiveTable.Selected) -> None:
        self.action_open()

    def action_open(self) -> None:
        table = self._focused_table() or "schedules"
        name = self._selected(table)
        if name is None:
            return
        if table == "templates":
            self.app.push_screen(TemplateDetailScreen(name))
        else:
            self.app.push_screen(ScheduleDetailScreen(name))

    def action_run_template(self) -> None:
        name = self._selected("templates")
        if name is None or self.catalog is None:
            return
        info = next((t for t in self.catalog.templates if t.name == name), None)
        self.ask_run(name, info.version if info else 0)

    def action_pause_schedule(self) -> None:
        if name := self._selected("schedules"):
            self.post_message(PlanAction(sd.plan_pause, name))

    def action_trigger_schedule(self) -> None:
        if name := self._selected("schedules"):
            self.post_message(PlanAction(sd.plan_trigger, name))
