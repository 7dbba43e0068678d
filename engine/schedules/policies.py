"""The choices a schedule's ``overlap`` and ``catchup`` take (docs/schedules.md), apart
from :mod:`.spec` (which re-exports them) so that a command line can offer them without
loading the schedules."""

from __future__ import annotations

# while the previous run goes on: skip the tick, keep one or every tick for after it,
# cancel the previous run, or run alongside it
OVERLAP = ("skip", "buffer_one", "buffer_all", "cancel_other", "allow_all")
# ticks missed (no scheduler up, paused): none, the latest (within a window), each one, or
# one run carrying them all
CATCHUP = ("none", "latest", "all", "coalesce")
