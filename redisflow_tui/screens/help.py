"""Every key of every screen, and what the glyphs and colours mean."""

from __future__ import annotations

from collections.abc import Iterable

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from ..data.dag import GLYPH
from ..data.home import WORKFLOW_STATES
from ..data.schedules import STATE_LOOKS
from ..widgets.looks import WORKFLOW_GLYPH, markup_var
from .agents import AgentsScreen
from .base import WRITE_ACTIONS
from .catalog_detail import ScheduleDetailScreen
from .events import EventsScreen
from .schedules import SchedulesScreen
from .workflow import WorkflowScreen
from .workflows import WorkflowsScreen

INTRO = (
    "redisflow watches and steers the workflows in one Redis. Everything shown is read "
    "from Redis through the engine and kept live by its events; nothing is stored here."
)


KEY_NAMES = {
    "slash": "/",
    "question_mark": "?",
    "escape": "esc",
    "left_square_bracket": "[",
    "right_square_bracket": "]",
}


def _keys(title: str, bindings: list[Binding], read_only: bool) -> Content:
    """A titled list of keys and what they do."""
    parts: list[Content] = [Content.from_markup("[b $text-primary]$title[/]", title=title)]
    for b in bindings:
        action = b.action.split("(")[0]
        if read_only and action in WRITE_ACTIONS:
            continue
        key = KEY_NAMES.get(b.key, b.key_display or b.key)
        parts.append(Content.assemble("  ", (f"{key:<8}", "bold"), " ", b.description or action))
    return Content("\n").join(parts)


def _states_legend() -> Content:
    """Workflow states (the waiting ones explained) and schedule states, one line each."""
    lines = [Content.from_markup("[b $text-primary]Workflow and schedule states[/]")]
    workflows = [Content("  ")]
    for state in WORKFLOW_STATES:
        workflows.append(
            Content.from_markup(
                f"[{markup_var(state)}]$glyph $state[/]  ",
                glyph=WORKFLOW_GLYPH[state],
                state=state,
            )
        )
    lines.append(Content("").join(workflows))
    lines.append(
        Content(
            "  queued: waits for a slot of its concurrency key (or its schedule's) · "
            "scheduled: pushed to start at a set time (push --at / --in)"
        )
    )
    schedules = [Content("  a schedule is  ")]
    for state, (glyph, look) in STATE_LOOKS.items():
        schedules.append(
            Content.from_markup(f"[{markup_var(look)}]$glyph $state[/]  ", glyph=glyph, state=state)
        )
    schedules.append(Content("(ended: no tick left, past its end_at)"))
    lines.append(Content("").join(schedules))
    return Content("\n").join(lines)


def _only(bindings: Iterable[object]) -> list[Binding]:
    return [b for b in bindings if isinstance(b, Binding)]


class HelpScreen(ModalScreen[None]):
    """The keys of the console, screen by screen.

    Args:
        app_keys: the app's own bindings (shown as working everywhere).
        read_only: leave out the keys of actions that change state.
    """

    BINDINGS = [
        Binding("escape", "dismiss", "Close"),
        Binding("question_mark", "dismiss", "Close"),
        Binding("q", "dismiss", "Close", show=False),
    ]

    def __init__(self, app_keys: Iterable[BindingType] = (), *, read_only: bool = False) -> None:
        super().__init__()
        self.app_keys = _only(app_keys)
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        common = list(self.app_keys)
        common += [
            Binding("ctrl+p", "command_palette", "Palette: every action, go to id"),
            Binding("tab", "focus_next", "Next pane"),
            Binding("ctrl+q", "quit", "Quit"),
        ]
        sections: list[tuple[str, list[Binding]]] = [
            ("Everywhere", common),
            ("Workflows (1)", _only(WorkflowsScreen.BINDINGS)),
            ("Workflow (enter on a row)", _only(WorkflowScreen.BINDINGS)),
            (
                "Graph",
                [
                    Binding("arrows", "move", "Move between tasks (click works too)"),
                    Binding("enter", "choose", "Select; in “around” view, centre on it"),
                ],
            ),
            (
                "Agents (2)",
                [
                    Binding("↑↓", "move", "Move (refreshed every second)"),
                    *_only(AgentsScreen.__dict__.get("BINDINGS", [])),
                ],
            ),
            (
                "Events (3)",
                [*_only(EventsScreen.BINDINGS), Binding("enter", "open", "Open its workflow")],
            ),
            (
                "Templates & Schedules (4)",
                [
                    Binding("tab", "focus_next", "Templates ⇄ schedules"),
                    *_only(SchedulesScreen.BINDINGS),
                ],
            ),
            ("Schedule (enter on a row)", _only(ScheduleDetailScreen.BINDINGS)),
        ]
        with VerticalScroll(id="help"):
            yield Static(Content.from_markup("[b]redisflow console — keys[/b]"), id="help-title")
            yield Static(INTRO, classes="help-intro")
            with Grid(id="help-grid"):
                for title, bindings in sections:
                    if bindings:
                        yield Static(_keys(title, bindings, self.read_only), classes="help-section")
            legend = ["[b $text-primary]Task states[/]"]
            for look, glyph in GLYPH.items():
                if look not in ("paused", "scheduled", "queued"):
                    legend.append(f"  [{markup_var(look)}]{glyph} {look}[/]")
            legend.append(
                "  retrying: failed an attempt, waiting out its backoff · skipped: a branch "
                "not taken · upstream_failed: a parent failed, so its trigger rule cannot be "
                "met · edges take the colour of the task they lead to; dashed (╌ ╎) into a "
                "failure branch (on_failure, one_failed, all_failed)"
            )
            yield Static(Content.from_markup("\n".join(legend)), classes="help-section")
            yield Static(_states_legend(), classes="help-section")
            if self.read_only:
                yield Static(
                    Content.from_markup("[reverse $warning] read-only [/]: actions are hidden."),
                    classes="help-section",
                )
