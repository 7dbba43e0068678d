"""Bounds on a workflow that a command line checks before it reads one: the largest
payload, the most tasks, the longest retention. Kept apart from :mod:`.definition` (which
re-exports them) so that reading them loads nothing else."""

from __future__ import annotations

DEFAULT_MAX_PAYLOAD = 1024 * 1024  # bytes of a payload, an input or an output
DEFAULT_MAX_TASKS = 100_000  # tasks per workflow, unless validate() is given another limit
MAX_TTL = 10 * 365 * 86400.0  # seconds: how long a finished workflow may be kept
