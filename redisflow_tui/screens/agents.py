"""Agents: who serves which types, what they run, and whether they are alive."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.content import Content
from textual.widgets import DataTable, Footer, Static

from engine import AgentInfo, Engine

from ..data.agents import LEGEND, counts, running_text, sort_agents, thresholds
from ..data.feed import Changes
from ..widgets.looks import AGENT_GLYPH, look_text, markup_var
from .base import LiveScreen

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

    def __init__(self) -> None:
        super().__init__()
        self.agents: list[AgentInfo] = []
        self._rows: dict[str, tuple[str, ...]] = {}

    def compose(self) -> ComposeResult:
        yield from self.frame()
        yield Static(id="agents-counts")
        yield Static(LEGEND, id="agents-legend")
        table: DataTable[object] = DataTable(id="agents", cursor_type="row", zebra_stripes=True)
        yield table
        yield Footer()

    def on_mount(self) -> None:
        super().on_mount()
        table = self.query_one(DataTable)
        for key, label, width in COLUMNS:
            table.add_column(label, key=key, width=width)
        table.focus()

    def wants_read(self, changes: Changes) -> bool:
        return changes.resync or changes.agents

    def read(self, engine: Engine, changes: Changes) -> list[AgentInfo]:
        return sort_agents(engine.agents())

    def apply(self, result: Any, changes: Changes) -> None:
        self.agents = result
        table: DataTable[object] = self.query_one(DataTable)
        clock = self.console.clock
        seen = set()
        keys = [c[0] for c in COLUMNS]
        for a in self.agents:
            seen.add(a.id)
            beat = clock.ago(a.heartbeat_age)
            up = clock.age(a.started_at) if a.started_at else "-"
            plain = (
                a.id,
                str(a.state),
                ", ".join(t or '""' for t in a.types),
                running_text(a),
                beat,
                thresholds(a),
                f"{a.host}:{a.pid}",
                up,
            )
            cells: list[object] = list(plain)
            cells[1] = look_text(self.app, str(a.state))
            cells[4] = Text(beat, style="bold" if str(a.state) != "online" else "")
            old = self._rows.get(a.id)
            if old is None:
                table.add_row(*cells, key=a.id)
            else:
                for k, key in enumerate(keys):
                    if old[k] != plain[k]:
                        table.update_cell(a.id, key, cells[k])
            self._rows[a.id] = plain
        for gone in [k for k in self._rows if k not in seen]:
            table.remove_row(gone)
            del self._rows[gone]
        by = counts(self.agents)
        parts = ["[b]Agents[/b]"]
        values: dict[str, object] = {}
        for state, n in by.items():
            parts.append(f"[{markup_var(state)}]{AGENT_GLYPH[state]} ${state}[/]")
            values[state] = f"{n} {state}"
        running = sum(len(a.running) for a in self.agents if str(a.state) != "stopped")
        parts.append("[dim]· $running tasks running[/]")
        values["running"] = f"{running:,}"
        self.query_one("#agents-counts", Static).update(
            Content.from_markup("  ".join(parts), **values)
        )
