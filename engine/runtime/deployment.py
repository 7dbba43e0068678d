"""What the engine's own modules need of a deployment handle, as Protocols.

:class:`engine.Engine` (``engine/client.py``) is the public API and is built on the
modules below it: the agent, the scheduler, the wait keeper, child runs, task logs,
schedules' management. They take one of these Protocols rather than ``Engine`` itself,
so none of them imports ``client.py`` (an ``Engine`` fits each of them).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from engine.core.model import RunResult, TemplateInfo
    from engine.store import Keyspace, Store
    from engine.store.codec import CompiledWorkflow


class Deployment(Protocol):
    """A deployment's store and key names, who acts (as events record it), and the
    largest payload it takes."""

    store: Store
    keys: Keyspace
    actor: str
    max_payload: int


class Runner(Deployment, Protocol):
    """A deployment that also starts and cancels runs of templates (schedules' ticks,
    child runs)."""

    def template(self, name: str, version: int | None = None) -> TemplateInfo: ...

    def compile_template(
        self, name: str, version: int | None = None
    ) -> tuple[CompiledWorkflow, int]: ...

    max_descendants: int  # the most child runs under one run (engine.runtime.child_runs)

    def run(
        self,
        name: str,
        input: Any = None,
        *,
        key: str | None = None,
        version: int | None = None,
        start_in: float | None = None,
        start_at: datetime | None = None,
        parent: str | None = None,
        depth: int = 0,
        root: str | None = None,
    ) -> RunResult: ...

    def cancel(self, wid: str | int | None = None, *, key: str | None = None) -> int: ...


class Host(Runner, Protocol):
    """What an agent works for: a :class:`Runner` whose housekeeping it takes its turn
    at (``Engine.maintain``)."""

    def maintain(
        self,
        max_lost: int = 5,
        limit: int = 200,
        keeper: str = "",
        hold_s: float = 0.0,
        lease_s: float = 0.0,
        waits: bool = True,
        sweep_s: float = 0.05,
    ) -> list[int]: ...
