"""A confirmation for destructive and bulk actions: exactly what, and how many."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen[bool]):
    """Ask before acting; dismisses with ``True`` to go ahead."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n", "answer(False)", "No"),
        Binding("escape", "answer(False)", "Keep", show=False),
    ]

    def __init__(self, title: str, body: str, verb: str) -> None:
        super().__init__()
        self.title_ = title
        self.body = body
        self.verb = verb

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(self.title_, id="dialog-title")
            yield Static(self.body, id="dialog-body")
            with Horizontal(id="dialog-buttons"):
                yield Button(f"{self.verb} (y)", variant="error", id="yes")
                yield Button("Keep (n)", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
