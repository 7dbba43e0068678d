"""What every live screen shares: the frame, the read-then-apply cycle, and the app.

A :class:`LiveScreen` accumulates the feed's :class:`~redisflow_tui.data.feed.Changes`.
On each tick of the console (a few times a second) the screen on top decides whether
what it shows may have changed; if so it reads from the engine in a worker thread
(never two reads at once) and applies the result on the UI thread in one batch update.
Screens that are not visible only accumulate, and catch up when shown again.

Screens never import the app: they read the state it shares through :class:`Console`
and ask it to act by posting messages (:class:`OpenWorkflow`, :class:`RunAction`,
:class:`PlanAction`) that bubble up to it. Calls go down, messages go up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, MutableSet
from functools import partial
from typing import Any, ClassVar, Protocol, cast

from textual.app import ComposeResult
from textual.message import Message
from textual.screen import Screen

from engine import Engine, Stats

from ..data.actions import Action
from ..data.clock import Clock
from ..data.events import EventLog
from ..data.feed import UNREACHABLE, Changes, Feed
from ..data.layout import LayoutCache
from ..data.rates import Rates
from ..widgets.app_bar import AppBar, Banner

# After a read that took t seconds the next waits READ_GAP_SHARE * t (at most
# MAX_READ_GAP_S): a 100,000-task workflow takes seconds to read, and re-reading it back
# to back would keep a core and Redis busy for one screen.
READ_GAP_SHARE = 2.0
MAX_READ_GAP_S = 5.0
WRITE_ACTIONS = frozenset(
    {
        "pause",
        "release",
        "cancel",
        "retry",
        "retry_task",
        "cleanup",
        "cleanup_finished",
        "bulk",
        "mark",
        "drain",
        "push_file",
        "run_template",
        "pause_schedule",
        "trigger_schedule",
    }
)


class Console(Protocol):
    """What the console app shares with its screens (the app is one; this names no app)."""

    engine: Engine
    clock: Clock
    read_only: bool
    link: tuple[bool | None, bool]  # (connected: None before the first connect, keyspace)
    stats: Stats | None
    rates: Rates
    event_log: EventLog
    layouts: LayoutCache
    feed: Feed
    live_screens: MutableSet[LiveScreen]  # every live screen, told of each change


class OpenWorkflow(Message):
    """Open workflow ``wid`` on top of the current screen."""

    def __init__(self, wid: str) -> None:
        super().__init__()
        self.wid = wid


class RunAction(Message):
    """Run ``fn(engine, *args)`` off the UI thread and notify its outcome or refusal."""

    def __init__(self, fn: Callable[..., str], *args: Any) -> None:
        super().__init__()
        self.fn = fn
        self.args = args


class PlanAction(Message):
    """Prepare ``planner(engine, *args)`` (reading the counts it shows), confirm, then run."""

    def __init__(self, planner: Callable[..., Action], *args: Any) -> None:
        super().__init__()
        self.planner = planner
        self.args = args


class LiveScreen(Screen[None]):
    """A screen that shows live data read through the engine."""

    MODE: ClassVar[str] = "workflows"
    PERIOD_S: ClassVar[float | None] = None  # re-read this often even with no change

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pending = Changes(resync=True)
        self.reading = False
        self._last_read = 0.0
        self._gap = 0.0  # the least time between two reads: a share of the last one's

    @property
    def console(self) -> Console:
        """What the console app shares (typed)."""
        return cast(Console, self.app)

    def frame(self) -> ComposeResult:
        """The top bar and the connection banner."""
        yield AppBar(self.MODE)
        yield Banner()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in WRITE_ACTIONS and self.console.read_only:
            return False
        return True

    # -- the cycle --------------------------------------------------------------------

    def on_mount(self) -> None:
        self.console.live_screens.add(self)

    def on_unmount(self) -> None:
        self.console.live_screens.discard(self)

    def on_screen_resume(self) -> None:
        self.tick()

    def absorb(self, changes: Changes) -> None:
        """Add changes heard while this screen was not reading."""
        self.pending.merge(changes)

    def request(self) -> None:
        """Re-read everything on the next tick (after the operator changed the view)."""
        self.pending.resync = True
        self.tick()

    def wants_read(self, changes: Changes) -> bool:
        """Whether ``changes`` may change what this screen shows."""
        return bool(changes)

    def read(self, engine: Engine, changes: Changes) -> Any:
        """Read what the screen shows (runs in a worker thread)."""
        return None

    def apply(self, result: Any, changes: Changes) -> None:
        """Show what :meth:`read` returned (runs on the UI thread, in a batch update)."""

    def tick(self) -> None:
        """Start a read if one is due and none is running."""
        if self.reading or not self.is_attached:
            return
        if self.console.link[0] is not True:
            return
        if not self.pending.resync and self._since_read() < self._gap:
            return  # a slow read (a huge workflow): let Redis and the console breathe
        due = self.PERIOD_S is not None and time.monotonic() - self._last_read >= self.PERIOD_S
        if not (due or self.wants_read(self.pending)):
            return
        changes, self.pending = self.pending, Changes()
        self.reading = True
        self.run_worker(
            partial(self._read_in_thread, changes),
            thread=True,
            group="read",
            exit_on_error=False,
        )

    def _since_read(self) -> float:
        return time.monotonic() - self._last_read

    def _read_in_thread(self, changes: Changes) -> None:
        began = time.monotonic()
        try:
            result = self.read(self.console.engine, changes)
        except UNREACHABLE:
            self._call(self._read_failed, changes)
            return
        except Exception as e:  # noqa: BLE001 - shown, and the console keeps going
            self._call(self._read_failed, changes, e)
            return
        self._gap = min(MAX_READ_GAP_S, READ_GAP_SHARE * (time.monotonic() - began))
        self._call(self._applied, result, changes)

    def _call(self, fn: Any, *args: Any) -> None:
        try:
            self.app.call_from_thread(fn, *args)
        except RuntimeError:
            pass  # the app is closing

    def _applied(self, result: Any, changes: Changes) -> None:
        self.reading = False
        self._last_read = time.monotonic()
        if not self.is_attached:
            return
        with self.app.batch_update():
            self.apply(result, changes)

    def _read_failed(self, changes: Changes, error: Exception | None = None) -> None:
        self.reading = False
        if error is None:
            # Redis went away: read it all again once the feed reconnects
            changes.resync = True
            self.pending.merge(changes)
            return
        self._last_read = time.monotonic()
        self.notify(f"{type(error).__name__}: {error}", title="Read failed", severity="error")
