"""Which action to take on every workflow a filter matches (the count is confirmed next)."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

# action -> (button label, key)
CHOICES = {
    "retry": ("Retry", "t"),
    "cancel": ("Cancel", "x"),
    "pause": ("Pause", "p"),
    "release": ("Release", "r"),
    "cleanup": ("Clean up", "c"),
}


class BulkChoiceScreen(ModalScreen[str | None]):
    """Choose an action for every workflow matching ``described``; dismisses with it (or
    ``None`` to do nothing)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *(Binding(key, f"choose('{action}')", label) for action, (label, key) in CHOICES.items()),
        Binding("escape", "choose(None)", "Keep", show=False),
    ]

    def __init__(self, described: str) -> None:
        super().__init__()
        self.described = described

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static("Act on every workflow that matches", id="dialog-title")
            yield Static(
                f"{self.described}. The next step says exactly how many, and asks.",
                id="dialog-body",
            )
            with Horizontal(id="dialog-buttons"):
                for action, (label, key) in CHOICES.items():
                    yield Button(f"{label} ({key})", id=f"bulk-{action}")
                yield Button("Keep (esc)", variant="primary", id="bulk-none")

    def on_mount(self) -> None:
        self.query_one("#bulk-none", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        chosen = (event.button.id or "").removeprefix("bulk-")
        self.dismiss(chosen if chosen in CHOICES else None)

    def action_choose(self, action: str | None) -> None:
        self.dismiss(action)
