"""How long one blocking read may block: the store's reads and the URL options agree on it."""

from __future__ import annotations

from typing import Any


def block_slice_ms(client: Any) -> int:
    """The longest a blocking read (``XREAD BLOCK``) on ``client`` may block at once: well
    under its connection's read timeout, so that waiting is not taken for a frozen Redis."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
    timeout = kwargs.get("socket_timeout")
    if not timeout:
        return 2**31 - 1
    return max(50, int(min(timeout * 1000 - 1000, timeout * 500)))
