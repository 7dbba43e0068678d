"""Agents: who serves which types, what they run, and whether they are alive."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.widgets import Static

from engine import AgentInfo, Engine

from ..data.agents import LEGEND, counts, plan_drain, read_agents, running_text, thresholds
from ..data.feed import Changes
from ..widgets.key_bar import KeyBar
from ..widgets.live_table import LiveTable, Row
from ..widgets.looks import AGENT_GLYPH, markup_var
from ..widgets.text_line import TextLine
from .base import LiveScreen, PlanAction

COLUMNS = (
    ("id", "Agent", 18),
    ("state", "State", 10),
    ("types", "Types", 18),
    ("running", "Running", 8),
    ("beat", "Heartbeat", 10),
    ("limits", "Thresholds", 22),
    ("host", "Host:pid", 22),
    ("up", "Up", 6),
)


class AgentsScreen(LiveScreen):
    """Every agent with its heartbeat age next to the thresholds that judge it."""

    MODE = "agents"
    PERIOD_S = 1.0  # heartbeat ages move every second
    BINDINGS = [
        Binding(
            "d",
            "drain",
            "Drain",
            tooltip="Ask the selected agent to finish its tasks, then stop",
        ),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.agents: list[AgentInfo] = []
        self.hidden = 0  # agents gone a while, not listed

    def compose(self) -> ComposeResult:
        yield from self.frame()
        yield TextLine(id="agents-counts")
        yield Static(LEGEND, id="agents-legend")
        yield LiveTable(COLUMNS, id="agents")
        yield KeyBar()

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one(LiveTable).focus()

    def absorb(self, changes: Changes) -> None:
        self.pending.resync = self.pending.resync or changes.resync
        self.pending.agents = self.pending.agents or changes.agents

    def wants_read(self, changes: Changes) -> bool:
        return changes.resync or changes.agents

    def read(self, engine: Engine, changes: Changes) -> tuple[list[AgentInfo], int]:
        return read_agents(engine)

    def action_drain(self) -> None:
        key = self.query_one(LiveTable).cursor_key
        agent = next((a for a in self.agents if a.id == key), None)
        if agent is None:
            self.notify("No agent selected", severity="warning")
            return
        self.post_message(PlanAction(plan_drain, agent))

    def _row(self, a: AgentInfo) -> Row:
        clock = self.console.clock
        state = str(a.state)
        return (
            a.id,
            (f"{AGENT_GLYPH.get(state, '')} {state}", state),
            ", ".join(t or '""' for t in a.types),
            running_text(a),
            (clock.ago(a.heartbeat_age), "" if state == "online" else "bold"),
            thresholds(a),
            f"{a.host}:{a.pid}",
            clock.age(a.started_at) if a.started_at else "-",
        )

    def apply(self, result: Any, changes: Changes) -> None:
        self.agents, self.hidden = result
        self.query_one(LiveTable).set_rows([(a.id, self._row(a)) for a in self.agents])
        by = counts(self.agents)
        parts = ["[b]Agents[/b]"]
        values: dict[str, object] = {}
        for state, n in by.items():
            parts.append(f"[{markup_var(state)}]{AGENT_GLYPH[state]} ${state}[/]")
            values[state] = f"{n} {state}"
        running = sum(len(a.running) for a in self.agents if str(a.state) != "stopped")
        parts.append("[dim]· $running tasks running$hidden[/]")
        values["running"] = f"{running:,}"
        values["hidden"] = f" · {self.hidden:,} gone a while, hidden" if self.hidden else ""
        self.query_one("#agents-counts", TextLine).set(
            Content.from_markup("  ".join(parts), **values)
        )
