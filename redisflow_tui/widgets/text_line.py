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
        """Show ``content`` unless it is already shown."""
        if content == self._last:
            return
        self._last = content
        self.update(content, layout=False)
