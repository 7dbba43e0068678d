"""Key names: ``keys.py`` and ``lua/lib/keys.lua`` agree.

Each side's half runs against the other's, the Lua on a real Redis.
"""

from __future__ import annotations

from lua_helpers import run_lua

from engine import Engine


def test_key_names_agree(engine: Engine) -> None:
    shard = engine.keys.shard(0)  # its hash tag: the deployment's (a cluster's spread tags)
    got = run_lua(
        engine,
        """
        return {K_SEQ, K_DELAYED, K_ALL, K_NAMES, K_STATS, K_TYPES, K_AGENTS, K_AGENTS_SEEN,
          K_AGENTS_LIVE, K_AGENTS_STATE, K_EVENTS, K_EVCHAN, wkey('7'), k_definition('ab'),
          k_queue('io'), k_wake('io'), k_state('failed'), k_name('nightly'), k_running('a1'),
          k_items(wkey('7'), '2'), k_pending(wkey('7'), '2'), k_flying(wkey('7'), '2'),
          k_failed(wkey('7'), '2'), K_SCHEDULED, K_TIMEOUTS,
          K_DEADLINES, k_input(wkey('7')), K_AGENTS_DRAIN}
        """,
    )
    assert got == [
        shard.seq, shard.delayed, shard.all, shard.names, shard.stats, shard.types,
        shard.agents, shard.agents_seen, shard.agents_live, shard.agents_state, shard.events,
        shard.event_channel, shard.workflow(7), shard.definition("ab"), shard.queue("io"),
        shard.wake("io"), shard.by_state("failed"), shard.by_name("nightly"),
        shard.running_of("a1"), shard.map_items(7, 2), shard.map_pending(7, 2),
        shard.map_flying(7, 2), shard.map_failed(7, 2), shard.scheduled, shard.timeouts,
        shard.deadlines, shard.workflow_input(7), shard.agents_drain,
    ]  # fmt: skip
