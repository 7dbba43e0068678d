"""The console app: its screens and keys, the live feed, and running actions.

One thread worker runs :class:`~redisflow_tui.data.feed.Feed` for the app's life and only
posts connection messages; a timer (4 Hz) drains the coalesced changes and hands them to
the screens, the visible one reading and applying inside ``batch_update``. Every
(re)connect resyncs everything from Redis.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import redis
from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.reactive import reactive
from textual.screen import Screen
from textual.worker import get_current_worker

from engine import (
    DefinitionError,
    Engine,
    NotFoundError,
    RedisflowError,
    StateError,
    Stats,
    visible,
)

from .commands import ConsoleCommands
from .data import actions
from .data.clock import Clock
from .data.events import EventLog
from .data.feed import EVENT_BUFFER, UNREACHABLE, Changes, Connected, Feed, FeedMessage, Lost
from .data.layout import LayoutCache
from .data.rates import Rates
from .screens.agents import AgentsScreen
from .screens.base import WRITE_ACTIONS, LiveScreen, OpenWorkflow, PlanAction, RunAction
from .screens.confirm import ConfirmScreen
from .screens.events import EventsScreen
from .screens.help import HelpScreen
from .screens.prompt import PromptScreen
from .screens.schedules import SchedulesScreen
from .screens.workflow import WorkflowScreen
from .screens.workflows import WorkflowsScreen

HISTORY = 2000  # events read from the stream on (re)connect


class FeedEvent(Message):
    """A connection message from the feed thread."""

    def __init__(self, payload: FeedMessage) -> None:
        super().__init__()
        self.payload = payload


class RedisflowApp(App[None]):
    """The redisflow operator console.

    Args:
        engine: the deployment to watch and steer.
        read_only: hide every action that changes state.
        clock: what renders times (a frozen one in tests).
        label: how the top bar names the deployment (default: its URL).
        keyspace: also listen to keyspace notifications when the server allows.
        tick_s: how often coalesced changes are applied.
    """

    CSS_PATH = "app.tcss"
    TITLE = "redisflow"
    COMMANDS = App.COMMANDS | {ConsoleCommands}
    MODES = {
        "workflows": WorkflowsScreen,
        "agents": AgentsScreen,
        "events": EventsScreen,
        "schedules": SchedulesScreen,
    }
    DEFAULT_MODE = "workflows"
    BINDINGS = [
        # before whatever has focus (but a dialog: check_action)
        Binding("1", "show('workflows')", "Workflows", show=False, priority=True),
        Binding("2", "show('agents')", "Agents", show=False, priority=True),
        Binding("3", "show('events')", "Events", show=False, priority=True),
        Binding("4", "show('schedules')", "Schedules", show=False, priority=True),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="Help: every key"),
        Binding("g", "goto", "Go to", tooltip="Go to a workflow by id"),
        Binding("o", "push_file", "Push", tooltip="Push a workflow file (YAML or JSON)"),
        Binding(
            "C",
            "cleanup_finished",
            "Clean all",
            key_display="C",
            tooltip="Clean up all finished workflows",
        ),
        Binding(
            "H",
            "history",
            "History",
            key_display="H",
            show=False,
            tooltip="Run-time history per task type and template: counts, quantiles, the day",
        ),  # fmt: skip
        Binding("ctrl+t", "next_theme", "Next theme", show=False),
        Binding("q", "quit", "Quit", show=False),
    ]

    link: reactive[tuple[bool | None, bool]] = reactive((None, False))
    """(connected: None before the first connect, keyspace notifications on)."""
    lost: reactive[str] = reactive("")
    """Why Redis cannot be reached, while it cannot."""

    def __init__(
        self,
        engine: Engine,
        *,
        read_only: bool = False,
        clock: Clock | None = None,
        label: str | None = None,
        keyspace: bool = True,
        tick_s: float = 0.25,
        theme: str | None = None,
        open_wid: str | None = None,
    ) -> None:
        super().__init__()
        self.open_wid = open_wid  # the workflow shown first (--open), over the list
        self.engine = engine
        self.read_only = read_only
        self.clock = clock or Clock()
        self.label = label or engine.url
        self.tick_s = tick_s
        self.feed = Feed(engine, keyspace=keyspace)
        self.event_log = EventLog()
        self.rates = Rates()
        self.layouts = LayoutCache()
        self.stats: Stats | None = None
        self.live_screens: weakref.WeakSet[LiveScreen] = weakref.WeakSet()
        self._unnamed: list[Any] = []  # live events waiting for their task names
        self._naming = False
        self._stop = threading.Event()
        self._history_due = False
        self._was_lost = False
        if theme:
            self.theme = theme

    # -- lifecycle ----------------------------------------------------------------------

    def on_mount(self) -> None:
        self.run_worker(self._listen, thread=True, name="feed", group="feed", exit_on_error=False)
        self.run_worker(self._check_server, thread=True, name="health", exit_on_error=False)
        self.set_interval(self.tick_s, self._tick)
        self.set_interval(1.0, self._sample)
        if self.open_wid:
            self.goto(self.open_wid)

    def _check_server(self) -> None:
        """Warn, and keep the warning up, when the server's settings can lose workflows
        (an eviction policy other than noeviction, memory near maxmemory)."""
        try:
            warnings = self.engine.server_warnings()
        except redis.RedisError:
            return
        for warning in warnings:
            self.call_from_thread(
                self.notify, warning, title="Redis settings", severity="error", timeout=3600
            )

    def _listen(self) -> None:
        worker = get_current_worker()

        def post(message: FeedMessage) -> None:
            self.post_message(FeedEvent(message))

        self.feed.run(self._stop, post, lambda: worker.is_cancelled)

    def exit(self, *args: Any, **kwargs: Any) -> None:
        self._stop.set()
        super().exit(*args, **kwargs)

    def on_unmount(self) -> None:
        self._stop.set()

    def on_feed_event(self, event: FeedEvent) -> None:
        msg = event.payload
        if isinstance(msg, Connected):
            self.clock.skew = msg.skew
            self.link = (True, msg.keyspace)
            self.lost = ""
            self._history_due = True
            self._sample()
            if self._was_lost:
                self.notify("Redis is back; everything was read again.", title="Reconnected")
            self._was_lost = False
            self._tick()
        elif isinstance(msg, Lost):
            self.link = (False, self.link[1])
            self.lost = msg.error
            self._was_lost = True

    def _tick(self) -> None:
        changes = self.feed.drain()
        if changes.resync:
            self._history_due = True
        self.event_log.add_live(changes.events, changes.dropped)
        if changes.events:
            self._unnamed.extend(changes.events)
            del self._unnamed[:-EVENT_BUFFER]  # more than a drain's worth: the newest
            if not self._naming:
                self._naming = True
                self._name_events(self._unnamed)
                self._unnamed = []
        self.rates.add_finished(changes.finished)
        screen_changes = Changes(
            resync=changes.resync,
            wids=changes.wids,
            pushed=changes.pushed,
            cleaned=changes.cleaned,
            stats=changes.stats,
            agents=changes.agents,
        )
        for screen in list(self.live_screens):
            screen.absorb(screen_changes)
        if self._history_due and self.link[0]:
            self._history_due = False
            self._read_history()
        top = self.live_screen
        if top is not None:
            top.tick()

    @property
    def live_screen(self) -> LiveScreen | None:
        """The live screen on top of the current stack (under any modal)."""
        for screen in reversed(self.screen_stack):
            if isinstance(screen, LiveScreen):
                return screen
        return None

    @work(thread=True, group="history", exit_on_error=False)
    def _read_history(self) -> None:
        try:
            history = self.engine.events(HISTORY)
        except Exception:  # noqa: BLE001 - Redis away or slow: read it again next tick
            self._history_due = True
            return
        self.call_from_thread(self._apply_history, history)

    @work(thread=True, group="names", exit_on_error=False)
    def _name_events(self, events: list[Any]) -> None:
        """Fill in the task names of live events (read off the UI thread), then redraw."""
        try:
            self.engine.name_tasks(events)
        except Exception:  # noqa: BLE001 - names are a nicety: the log shows #index without
            pass
        self.call_from_thread(self._events_named)

    def _events_named(self) -> None:
        self._naming = False
        self.event_log.version += 1
        for screen in self.live_screens:
            if screen.MODE == "events":
                screen.tick()

    def _apply_history(self, history: list[Any]) -> None:
        self.event_log.load_history(history)
        self.rates.load_history(history)

    @work(thread=True, group="sample", exclusive=True, exit_on_error=False)
    def _sample(self) -> None:
        if self.link[0] is not True:
            return
        try:
            stats = self.engine.stats()
        except UNREACHABLE:
            return
        self.call_from_thread(self._apply_sample, stats)

    def _apply_sample(self, stats: Stats) -> None:
        self.stats = stats
        self.rates.sample_queue(self.clock.now(), sum(stats.queued.values()))

    # -- navigation ---------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in WRITE_ACTIONS and self.read_only:
            return False
        if action == "show":
            return self._tabs_switch()
        return True

    def _tabs_switch(self) -> bool:
        """Whether 1–4 switch tabs now: from any widget (a box being typed in keeps
        them: widgets.filter_box), but not while a dialog waits for an answer."""
        screen = self.screen
        return not screen.is_modal or isinstance(screen, HelpScreen)

    def action_show(self, mode: str) -> None:
        """Show one of the main screens (closing the help first)."""
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss()
        if self.current_mode != mode:
            self.switch_mode(mode)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.BINDINGS, read_only=self.read_only))

    def action_history(self) -> None:
        from .screens.history import HistoryScreen

        if not isinstance(self.screen, HistoryScreen):
            self.push_screen(HistoryScreen())

    def action_next_theme(self) -> None:
        names = sorted(self.available_themes)
        self.theme = names[(names.index(self.theme) + 1) % len(names)]
        self.notify(f"Theme: {self.theme}")

    def on_open_workflow(self, message: OpenWorkflow) -> None:
        self.open_workflow(message.wid)

    def open_workflow(self, wid: str) -> None:
        """Open one workflow's screen on top of the current one."""
        top = self.screen
        if isinstance(top, WorkflowScreen) and top.wid == wid:
            return
        self.push_screen(WorkflowScreen(wid))

    def action_goto(self) -> None:
        def answered(wid: str | None) -> None:
            if wid:
                self.goto(wid)

        self.push_screen(
            PromptScreen("Go to workflow", "workflow id, e.g. 42", numeric=True), answered
        )

    @work(thread=True, group="goto", exit_on_error=False)
    def goto(self, wid: str) -> None:
        """Open workflow ``wid`` if it exists, else say so."""
        wid = wid.strip()
        try:
            self.engine.state(wid)
        except NotFoundError:
            self.call_from_thread(
                self.notify, f"No workflow {wid} (never pushed, or cleaned up)", severity="warning"
            )
            return
        except (ValueError, *UNREACHABLE) as e:
            self.call_from_thread(self.notify, str(e), severity="error")
            return
        self.call_from_thread(self.open_workflow, wid)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """A notification, shown as plain text: its message is often an error's, which
        may hold brackets (no markup) or terminal escapes (shown, not obeyed)."""
        super().notify(
            visible(message, multiline=True),
            title=visible(title),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    # -- actions ------------------------------------------------------------------------

    def action_push_file(self) -> None:
        def answered(path: str | None) -> None:
            if path:
                self.act(actions.push_file, path)

        self.push_screen(
            PromptScreen("Push a workflow file", "path to a YAML or JSON file", paths=True),
            answered,
        )

    def action_cleanup_finished(self) -> None:
        self.plan(actions.plan_cleanup_finished)

    def on_run_action(self, message: RunAction) -> None:
        self.act(message.fn, *message.args)

    def on_plan_action(self, message: PlanAction) -> None:
        self.plan(message.planner, *message.args)

    @work(thread=True, group="act", exit_on_error=False)
    def act(self, fn: Callable[..., str], *args: Any) -> None:
        """Run an engine action in a thread and notify its outcome or refusal."""
        try:
            outcome = fn(self.engine, *args)
        except Exception as e:  # noqa: BLE001 - every failure becomes a notification
            self.call_from_thread(self._refused, e)
            return
        self.call_from_thread(self._done, outcome)

    @work(thread=True, group="act", exit_on_error=False)
    def plan(self, planner: Callable[..., actions.Action], *args: Any) -> None:
        """Prepare an action (reading the counts it shows), then ask to confirm it."""
        try:
            action = planner(self.engine, *args)
        except Exception as e:  # noqa: BLE001
            self.call_from_thread(self._refused, e)
            return
        self.call_from_thread(self._confirm, action)

    def _confirm(self, action: actions.Action) -> None:
        if not action.confirm:
            self.act(action.run)
            return

        def answered(ok: bool | None) -> None:
            if ok:
                self.act(action.run)

        self.push_screen(ConfirmScreen(action.title, action.body, action.verb), answered)

    def _done(self, outcome: str) -> None:
        self.notify(outcome, title="Done")
        top = self.live_screen
        if top is not None:
            top.request()

    def _refused(self, error: Exception) -> None:
        if isinstance(error, StateError | NotFoundError):
            self.notify(str(error), title="Refused by the engine", severity="warning")
        elif isinstance(error, DefinitionError):
            self.notify(str(error), title="Invalid workflow file", severity="error")
        elif isinstance(error, redis.ConnectionError | redis.TimeoutError):
            self.notify(str(error), title="Redis unreachable", severity="error")
        elif isinstance(error, RedisflowError | OSError):
            self.notify(str(error), title="Failed", severity="error")
        else:
            self.notify(f"{type(error).__name__}: {error}", title="Failed", severity="error")

    # -- palette ------------------------------------------------------------------------

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Next theme", "Switch to the next colour theme", self.action_next_theme)
