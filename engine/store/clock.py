"""Redis's clock: the time the scripts stamp with, read by the Python half too."""

from __future__ import annotations

import redis


def server_time(client: redis.Redis) -> float:
    """Redis's clock, in epoch seconds."""
    sec, usec = client.time()
    return sec + usec / 1e6


def now_ms(client: redis.Redis) -> int:
    """Redis's clock, in epoch ms."""
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000
