"""Running a template from the console: ask for its input, then offer to open the run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from engine import DefinitionError, NotFoundError, RunResult, StateError, visible

from ..data.schedules import parse_input, run_outcome, run_template
from .base import LiveScreen, OpenWorkflow


@dataclass(frozen=True)
class RunInput:
    """The input a run gets (``None``: no input)."""

    value: Any


class RunInputScreen(ModalScreen[RunInput | None]):
    """Asks for a run's input as JSON (may be empty); refuses a bad JSON in place, saying
    where it is wrong. Dismisses with :class:`RunInput`, or ``None`` on Escape."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, template: str, version: int) -> None:
        super().__init__()
        self.template = template
        self.version = version

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(
                Content.from_markup(
                    "Run template [b]$name[/b] (v$version)",
                    name=self.template,
                    version=str(self.version),
                ),
                id="dialog-title",
            )
            yield Input(
                placeholder='input as JSON, e.g. {"region": "eu"}; empty for none',
                id="run-input",
            )
            yield Static("", id="dialog-error")
            yield Static("Enter runs it · Esc cancels", id="dialog-hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        try:
            value = parse_input(event.value)
        except DefinitionError as e:
            error = self.query_one("#dialog-error", Static)
            error.update(Content(visible(str(e), multiline=True)))  # no markup
            error.add_class("-shown")
            return
        self.dismiss(RunInput(value))

    @on(Input.Changed)
    def _changed(self) -> None:
        self.query_one("#dialog-error", Static).remove_class("-shown")

    def action_cancel(self) -> None:
        self.dismiss(None)


class RunPushedScreen(ModalScreen[bool]):
    """Says a run was pushed and offers to open it; dismisses with ``True`` to open."""

    BINDINGS = [
        Binding("o", "answer(True)", "Open"),
        Binding("y", "answer(True)", "Open", show=False),
        Binding("n", "answer(False)", "Stay", show=False),
        Binding("escape", "answer(False)", "Stay"),
    ]

    def __init__(self, outcome: str, wid: str) -> None:
        super().__init__()
        self.outcome = outcome
        self.wid = wid

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(self.outcome, id="dialog-title")
            yield Static(f"Open workflow {self.wid} now?", id="dialog-body")
            with Horizontal(id="dialog-buttons"):
                yield Button("Open (o)", variant="primary", id="open")
                yield Button("Stay (esc)", id="stay")

    def on_mount(self) -> None:
        self.query_one("#open", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "open")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class RunsTemplates(LiveScreen):
    """A live screen that runs templates: asks for the input, pushes in a worker thread,
    then offers to open the run (or says why the engine refused)."""

    def ask_run(self, template: str, version: int) -> None:
        """Ask for an input, then push a run of ``template``."""

        def answered(got: RunInput | None) -> None:
            if got is not None:
                self.push_run(template, got.value)

        self.app.push_screen(RunInputScreen(template, version), answered)

    @work(thread=True, group="run", exit_on_error=False)
    def push_run(self, template: str, value: Any) -> None:
        """Push a run of ``template`` with input ``value`` (in a worker thread)."""
        try:
            result = run_template(self.console.engine, template, value)
        except Exception as e:  # noqa: BLE001 - every refusal becomes a notification
            self.app.call_from_thread(self._run_refused, template, e)
            return
        self.app.call_from_thread(self._run_pushed, result)

    def _run_refused(self, template: str, error: Exception) -> None:
        if isinstance(error, DefinitionError | NotFoundError | StateError):
            title, text = f"Run of {template} refused", str(error)
        else:
            title, text = f"Run of {template} failed", f"{type(error).__name__}: {error}"
        self.notify(text, title=title, severity="error")

    def _run_pushed(self, result: RunResult) -> None:
        self.request()

        def answered(yes: bool | None) -> None:
            if yes:
                self.post_message(OpenWorkflow(result.id))

        self.app.push_screen(RunPushedScreen(run_outcome(result), result.id), answered)
