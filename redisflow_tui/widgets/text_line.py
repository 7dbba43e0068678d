"""A fixed-size line of text that repaints only when its content changes."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static


class TextLine(Static):
    """A :class:`Static` for status lines updated several times a second.

    Its size comes from CSS (no layout pass on update), and setting the same content
    again costs nothing.
    """

    def __init__(self, content: Content | str = "", *, id: str | None = None) -> None:
        super().__init__(content, id=id)
        self._last: Content | str | None = None

    def set(self, content: Content | str) -> None:
        """Show ``content`` unless it is already shown (same text and same styles)."""
        if _same(content, self._last):
            return
        self._last = content
        self.update(content, layout=False)


def _same(a: Content | str, b: Content | str | None) -> bool:
    # Content's == compares the plain text alone: a change of colour or of a
    # highlighted part must still repaint
    if isinstance(a, Content) and isinstance(b, Content):
        return a.plain == b.plain and a.spans == b.spans
    return type(a) is type(b) and a == b
