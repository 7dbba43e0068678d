"""Going on while Redis is away: which failures pass by themselves, and how long to pause
between tries.

Two shapes of retry, used everywhere the engine keeps trying:

* a loop that runs until stopped (the agent's, the scheduler's, the wait keeper's)
  counts its consecutive failures in a :class:`Backoff` and pauses as it says;
* one call tried again for a while (a push's calls, reading the rate limits, an agent
  connecting): :func:`patiently`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import redis
from redis.backoff import AbstractBackoff, EqualJitterBackoff

from engine.errors import NotReplicatedError, is_out_of_memory

T = TypeVar("T")

RETRY_BACKOFF = EqualJitterBackoff(cap=5.0, base=0.1)  # jitter: agents don't return in step

# Replies of a server that is loading, failing over, or short of memory or disk: the same
# call goes through later. Connection errors are transient too, but for a refused password.
TRANSIENT_REPLIES = (
    redis.exceptions.BusyLoadingError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.OutOfMemoryError,
    redis.exceptions.TryAgainError,
    redis.exceptions.MasterDownError,
    redis.exceptions.ClusterDownError,
)
TRANSIENT_CODES = ("MISCONF", "BUSY ")
# Of those, the replies of a server that ran nothing: a cluster shard failing over, a
# replica answering for a master gone, a server loading its data. A call answered so may be
# sent again at once; a full memory is reported instead (it lasts until someone acts).
NOT_RUN_REPLIES = tuple(e for e in TRANSIENT_REPLIES if e is not redis.exceptions.OutOfMemoryError)
# Redis not answering at all: what a call tried again by :func:`patiently` waits out
UNREACHABLE: tuple[type[BaseException], ...] = (redis.ConnectionError, redis.TimeoutError)


def transient(error: BaseException) -> bool:
    """True for a failure that passes by itself: Redis away, restarting or overloaded."""
    if isinstance(error, redis.AuthenticationError):
        return False
    if isinstance(error, NotReplicatedError):  # replicas behind or away: written, go on
        return True
    if isinstance(error, (redis.ConnectionError, redis.TimeoutError, *TRANSIENT_REPLIES)):
        return True
    if is_out_of_memory(error):  # Redis 6.2: inside the script's error reply
        return True
    return isinstance(error, redis.ResponseError) and str(error).startswith(TRANSIENT_CODES)


class Backoff:
    """The consecutive failures of a loop that goes on while Redis is away, and the
    pause after each (``policy``: :data:`RETRY_BACKOFF` by default)."""

    def __init__(self, policy: AbstractBackoff = RETRY_BACKOFF) -> None:
        self.policy = policy
        self.failures = 0

    def succeeded(self) -> None:
        """A turn went through: the next failure pauses the shortest time again."""
        self.failures = 0

    def failed(self) -> float:
        """Count a failure; seconds to pause before the next try."""
        self.failures += 1
        return self.policy.compute(self.failures)


def patiently(
    call: Callable[[], T],
    within_s: float,
    *,
    errors: tuple[type[BaseException], ...] = UNREACHABLE,
    first_s: float = 0.1,
    most_s: float = 2.0,
) -> T:
    """``call()``, called again after each of ``errors`` for up to ``within_s`` seconds,
    pausing ``first_s`` then twice as long each time (at most ``most_s``); the error that
    comes when the next pause would end past that time is raised."""
    deadline = time.monotonic() + within_s
    pause = first_s
    while True:
        try:
            return call()
        except errors:
            if time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, most_s)
