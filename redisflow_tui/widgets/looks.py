"""Colours and glyphs of states (:data:`engine.LOOKS`), taken from the current theme."""

from __future__ import annotations

from collections.abc import Iterable

from rich.style import Style
from rich.text import Text
from textual.app import App
from textual.color import Color

from engine import AGENT_STATES, LOOKS, WORKFLOW_STATES, glyphs

# theme variable per task look / workflow / agent state (the same names CSS uses)
LOOK_VARS = {s: look.theme for s, look in LOOKS.items()}
BOLD = frozenset(s for s, look in LOOKS.items() if look.bold)
WORKFLOW_GLYPH = glyphs(WORKFLOW_STATES)
AGENT_GLYPH = glyphs(AGENT_STATES)


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
    mark = LOOKS[look].glyph if look in LOOKS else "•"
    text = label if label is not None else look
    return Text(f"{mark} {text}" if glyph else text, style=look_style(app, look))


def markup_var(look: str) -> str:
    """The content-markup colour of a state, e.g. ``$success``."""
    return "$" + LOOK_VARS.get(look, "foreground")


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
