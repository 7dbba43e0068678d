"""Running the shared Lua helpers (``engine/store/lua/lib``) on a real Redis."""

from __future__ import annotations

from typing import Any

from engine import Engine
from engine.store.scripts import lib_for, with_fields


def run_lua(engine: Engine, body: str, *args: Any) -> Any:
    """Run ``body`` after the shared helpers it uses (as a script carries them: the whole
    library passes Lua's 200 locals), on shard 0 (ARGV[3...] are ``args``)."""
    lib = lib_for(body)
    shard = engine.keys.shard(0)
    source = with_fields(f"{lib}\n{body}")
    return engine.redis.eval(source, 1, shard.seq, shard.prefix, 100, *args)
