"""The base of the console's line-API views: component styles read once, lines kept.

``render_line`` runs for every visible line on every refresh; reading a component
class's style there each time costs more than drawing the line. A :class:`LineView`
keeps each style it read, and the lines a subclass chose to keep, until the theme or
the CSS changes.
"""

from __future__ import annotations

from typing import ClassVar

from rich.style import Style
from textual.scroll_view import ScrollView
from textual.strip import Strip


class LineView(ScrollView):
    """A scroll view drawn line by line, with a cache of its component styles.

    A look ``x`` is the component class ``<STYLE_PREFIX>--x``; the empty look is no style.
    """

    STYLE_PREFIX: ClassVar[str] = ""
    ROW_STYLES: ClassVar[frozenset[str]] = frozenset()
    """Looks that are a whole line's style rather than colours laid over the text."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._styles: dict[str, Style] = {}
        self._lines: dict[int, Strip] = {}  # rendered lines a subclass keeps, by row

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._lines.clear()

    def _component(self, look: str) -> str:
        """The look whose component class draws ``look`` (itself unless overridden)."""
        return look

    def _style(self, look: str) -> Style:
        style = self._styles.get(look)
        if style is None:
            name = self._component(look)
            style = self._styles[look] = (
                self.get_component_rich_style(
                    f"{self.STYLE_PREFIX}--{name}", partial=name not in self.ROW_STYLES
                )
                if name
                else Style()
            )
        return style
