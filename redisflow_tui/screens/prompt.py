"""A one-line question: a workflow id to go to, a file to push."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from ..widgets.path_suggester import PathSuggester


class PromptScreen(ModalScreen[str | None]):
    """Asks for one value; dismisses with it, or ``None`` on Escape."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(
        self,
        title: str,
        placeholder: str,
        *,
        numeric: bool = False,
        paths: bool = False,
        optional: bool = False,
    ) -> None:
        super().__init__()
        self.optional = optional  # Enter on nothing answers "" (Esc still None)
        self.title_ = title
        self.placeholder = placeholder
        self.numeric = numeric
        self.paths = paths

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(self.title_, id="dialog-title")
            yield Input(
                placeholder=self.placeholder,
                type="integer" if self.numeric else "text",
                suggester=PathSuggester() if self.paths else None,
                id="prompt",
            )
            hint = "Tab completes · Enter goes · Esc cancels" if self.paths else "Enter · Esc"
            yield Static(hint, id="dialog-hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        value = event.value.strip()
        self.dismiss(value if value or self.optional else None)

    def action_cancel(self) -> None:
        self.dismiss(None)
