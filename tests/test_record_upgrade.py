"""An agent of this release does not start beside agents of a release that writes the
task record's earlier form (they would misread the compact one): its registration is
refused, writing nothing, and it waits, saying which, until they have stopped. Records
of either form read alike (test_codec_record)."""

from __future__ import annotations

import json
import logging
import time

import pytest
from engine_helpers import agent_thread

from engine import Engine, Workflow
from engine.errors import EarlierReleaseError
from engine.store.codec import RECORD_FORM


def one_task() -> Workflow:
    wf = Workflow("one")
    wf.task("a")
    return wf


def register_earlier(engine: Engine, agent_id: str) -> None:
    """An agent of an earlier release, live: its registry entry names no record form."""
    info = {"types": [""], "concurrency": 1, "lease_s": 30, "heartbeat_s": 10}
    for shard in engine.keys.all_shards():
        engine.store.calls.register(shard, agent_id, json.dumps(info), 30_000)


def current_info() -> str:
    return json.dumps({"types": [""], "records": RECORD_FORM})


def test_a_start_beside_an_earlier_release_s_agents_is_refused_and_writes_nothing(
    engine: Engine,
) -> None:
    register_earlier(engine, "old-1")
    register_earlier(engine, "old-2")
    shard = engine.keys.shard(0)
    before = engine.redis.hgetall(shard.agents)
    with pytest.raises(EarlierReleaseError) as caught:
        engine.store.calls.register(shard, "new-1", current_info(), 30_000, first=True)
    assert sorted(str(caught.value).split()) == ["old-1", "old-2"]
    assert engine.redis.hgetall(shard.agents) == before
    assert engine.redis.zscore(shard.agents_live, "new-1") is None
    # registering again (a lease lost after the start) is not held back, nor is the
    # agent's own entry of its earlier release (restarted upgraded)
    engine.store.calls.register(shard, "new-1", current_info(), 30_000)
    engine.store.calls.stop(shard, "old-2")
    engine.store.calls.register(shard, "old-1", current_info(), 30_000, first=True)
    engine.store.calls.register(shard, "new-3", current_info(), 30_000, first=True)
    assert {a.id: a.records for a in engine.store.reads.agents()}["new-3"] == RECORD_FORM


def test_an_agent_waits_for_an_earlier_release_s_agents_to_stop(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    register_earlier(engine, "old-1")
    wid = engine.push(one_task())
    caplog.set_level(logging.WARNING, logger="redisflow.agent")
    with agent_thread(engine, {"": lambda t: "done"}, "new-1", heartbeat_s=0.2) as agent:
        deadline = time.monotonic() + 20
        while "waits to start" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "waits to start" in caplog.text and "old-1" in caplog.text
        assert agent.processed == 0
        assert engine.status(wid).tasks[0].state == "ready"
        assert "new-1" not in {a.id for a in engine.store.reads.agents()}  # not registered
        for shard in engine.keys.all_shards():
            engine.store.calls.stop(shard, "old-1")
        while engine.status(wid).state != "succeeded" and time.monotonic() < deadline + 20:
            time.sleep(0.05)
    assert engine.status(wid).state == "succeeded"
    assert {a.id: a.records for a in engine.store.reads.agents()}["new-1"] == RECORD_FORM


def test_the_agents_listing_names_an_earlier_release_s_agents(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    from engine_helpers import cli

    register_earlier(engine, "old-9")
    for shard in engine.keys.all_shards():
        engine.store.calls.register(shard, "new-9", current_info(), 30_000)
    out = cli("agents", env=cli_env)
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "1 of these agents is of an earlier redisflow release (old-9)" in text
    for shard in engine.keys.all_shards():
        engine.store.calls.stop(shard, "old-9")
    out = cli("agents", env=cli_env)
    assert "earlier redisflow release" not in out.stdout
