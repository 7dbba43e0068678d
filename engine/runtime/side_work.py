"""What an agent runs beside its tasks, each in a thread of its own: its wait keeper
(:class:`~engine.runtime.wait_keeper.WaitKeeper`), and whatever it is handed
(``Agent(side=[...])``: a scheduler, :class:`engine.schedules.scheduler.SchedulerThread`).
The agent starts each before its first claim and stops each, last started first, when it
stops: it knows nothing else of them."""

from __future__ import annotations

from typing import Protocol


class SideWork(Protocol):
    """Work beside an agent's tasks: started once, stopped once."""

    def start(self) -> object:
        """Start it (in a thread of its own); what it returns is not used."""
        ...

    def stop(self) -> None:
        """Stop it: nothing of it acts once this returns, or its thread ends soon."""
        ...
