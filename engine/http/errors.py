"""The one error the HTTP layer raises: a status, a message, and why (for the counters)."""

from __future__ import annotations


class HttpError(Exception):
    """Answer ``status`` with ``{"error": message}``.

    ``reason`` is a short word for ``redisflow_http_rejected_total`` (``bad_signature``,
    ``too_large``...): set for a rejected request that would have pushed a run.
    """

    def __init__(self, status: int, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason
