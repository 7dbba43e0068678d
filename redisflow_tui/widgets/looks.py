"""Colours and glyphs of states, taken from the current theme."""

from __future__ import annotations

from collections.abc import Iterable

from rich.style import Style
from rich.text import Text
from textual.app import App
from textual.color import Color

from ..data.dag import GLYPH

# theme variable per task look / workflow state (the same names CSS uses)
LOOK_VARS = {
    "waiting": "foreground-muted",
    "ready": "text-primary",
    "retrying": "text-error",
    "running": "accent",
    "suspended": "warning",
    "succeeded": "success",
    "failed": "error",
    "upstream_failed": "text-warning",
    "skipped": "foreground-muted",
    "cancelled": "text-secondary",
    "paused": "text-primary",
    "scheduled": "text-primary",
    "queued": "text-primary",
    "online": "success",
    "stale": "warning",
    "dead": "error",
    "stopped": "foreground-muted",
    "draining": "text-warning",
}
BOLD = frozenset({"running", "failed", "dead"})
WORKFLOW_GLYPH = {
    "scheduled": "◷",
    "queued": "⋯",
    "running": "▶",
    "paused": "‖",
    "succeeded": "✔",
    "failed": "✖",
    "cancelled": "⊘",
}
AGENT_GLYPH = {"online": "●", "stale": "◌", "dead": "✖", "stopped": "○", "draining": "◐"}


def theme_color(app: App[object], variable: str) -> str:
    """A theme variable as an opaque ``#rrggbb`` (alpha blended over the background)."""
    variables = app.theme_variables
    value = variables.get(variable) or variables.get("foreground", "#e0e0e0")
    try:
        color = Color.parse(value)
    except Exception:  # noqa: BLE001 - "auto 60%" and the like: fall back
        return Color.parse(variables.get("foreground", "#e0e0e0")).hex
    if color.a < 1:
        background = Color.parse(variables.get("background", "#000000"))
        color = background + color
    return color.hex


def look_style(app: App[object], look: str) -> Style:
    """The Rich style of a state (task look, workflow or agent state)."""
    return Style(color=theme_color(app, LOOK_VARS.get(look, "foreground")), bold=look in BOLD)


def look_text(app: App[object], look: str, label: str | None = None, glyph: bool = True) -> Text:
    """``✔ succeeded`` in the state's colour."""
    mark = GLYPH.get(look) or WORKFLOW_GLYPH.get(look) or AGENT_GLYPH.get(look) or "•"
    text = label if label is not None else look
    return Text(f"{mark} {text}" if glyph else text, style=look_style(app, look))


def markup_var(look: str) -> str:
    """The content-markup colour of a state, e.g. ``$success``."""
    return "$" + LOOK_VARS.get(look, "foreground")


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


def look_css(widget: str, prefix: str, looks: Iterable[str], bold: Iterable[str] = ()) -> str:
    """Component-class CSS ``<widget> > .<prefix>--<look>`` from :data:`LOOK_VARS`.

    Every widget that colours states takes its rules from here, so they all agree.
    ``dim`` is the muted colour; a look not in the palette gets only its boldness.
    """
    strong = set(bold)
    palette = {**LOOK_VARS, "dim": "foreground-muted"}
    rules = []
    for look in looks:
        colour = f" color: ${palette[look]};" if look in palette else ""
        style = " text-style: bold;" if look in strong else ""
        rules.append(f"{widget} > .{prefix}--{look} {{{colour}{style} }}")
    return "\n".join(rules) + "\n"
