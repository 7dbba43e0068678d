"""How a state looks, in one table: its glyph, and its colour as each front end draws it.

The CLI colours a state with a rich style, the console with a theme variable of its own
(and bold for a few), ``redisflow viz`` with a fill and a stroke. Task, workflow and
agent states share a row where they share a name (``running``, ``failed``...);
``retrying`` is how the console shows a ready task waiting out its backoff.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.model import AgentState, WorkflowState


@dataclass(frozen=True)
class Look:
    """How one state looks."""

    glyph: str  # in the console's chips, tables and legends, and in viz's node labels
    theme: str  # the console's colour: a theme variable (``$name`` in its CSS)
    style: str | None = None  # the CLI's colour: a rich style (None: plain)
    bold: bool = False  # the console draws it bold
    graph: tuple[str, str] | None = None  # viz: fill and stroke (None: neither colour nor glyph)


LOOKS: dict[str, Look] = {
    # a task's looks, in the order the console lists them
    "waiting": Look("○", "foreground-muted", "dim", graph=("#f4f4f4", "#9e9e9e")),
    "ready": Look("◌", "text-primary", "blue", graph=("#e3f2fd", "#1e88e5")),
    "retrying": Look("↻", "text-error"),
    "running": Look("▶", "accent", "cyan", bold=True, graph=("#e0f7fa", "#00838f")),
    "suspended": Look("◷", "warning"),
    "succeeded": Look("✔", "success", "green", graph=("#e8f5e9", "#2e7d32")),
    "failed": Look("✖", "error", "red", bold=True, graph=("#ffebee", "#c62828")),
    "upstream_failed": Look("⇣", "text-warning", "dark_orange", graph=("#fff3e0", "#e65100")),
    "skipped": Look("↷", "foreground-muted", "dim", graph=("#fafafa", "#9e9e9e")),
    "cancelled": Look("⊘", "text-secondary", "magenta", graph=("#f3e5f5", "#6a1b9a")),
    # a workflow's other states
    "paused": Look("‖", "text-primary", "yellow"),
    "scheduled": Look("◷", "text-primary", "blue"),
    "queued": Look("⋯", "text-primary", "blue"),
    # an agent's
    "online": Look("●", "success", "green"),
    "stale": Look("◌", "warning", "yellow"),
    "dead": Look("✖", "error", "red", bold=True),
    "stopped": Look("○", "foreground-muted", "dim"),
    "draining": Look("◐", "text-warning", "cyan"),
}

# How a task can look: its states, with "retrying" for a ready task in backoff.
TASK_LOOKS = (
    "waiting",
    "ready",
    "retrying",
    "running",
    "suspended",
    "succeeded",
    "failed",
    "upstream_failed",
    "skipped",
    "cancelled",
)
WORKFLOW_STATES = tuple(s.value for s in WorkflowState)
AGENT_STATES = tuple(s.value for s in AgentState)


def glyphs(states: tuple[str, ...]) -> dict[str, str]:
    """The glyph of each of ``states`` (each once, in that order)."""
    return {s: LOOKS[s].glyph for s in dict.fromkeys(states)}
