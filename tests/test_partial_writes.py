# ruff: noqa: F811
"""A refusal never hides a write: a push of many workflows goes to Redis in several
script calls, each atomic but not all together; when Redis runs out of memory part-way,
what was written is reported exactly (the engine's PartialWriteError, the CLI's ids and
exit code 4, one HTTP answer per run) and what was not is said so.

Each test runs on a redis-server of its own module with ``maxmemory`` and ``noeviction``:
either memory is filled for real (a limit about 1 MB above what is used, a push of many
times that), or a hook lowers the limit after a known number of calls."""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import redis
from engine_helpers import ROOT, cli, scan_keys, snapshot
from own_server import admin, redis62, server  # noqa: F401 (fixtures, named in signatures)

from engine import EmbeddedRedis, Engine, PartialWriteError, Workflow
from engine.cli.main import run as cli_run
from engine.http import create_app
from engine.http.auth import github_signature
from engine.http.batcher import RunBatcher
from engine.http.triggers import new_trigger
from engine.schedules import parse_schedule
from engine.schedules.scheduler import Scheduler
from engine.store.scripts import Scripts

SAMPLE = str(ROOT / "demos" / "task-list-sample.yaml")
WORKFLOW_KEY = re.compile(r"^rf:\{rf:\d+\}:w:(\d+)$")
HOUR = 3_600_000
PIPELINE = "name: pipeline\ntasks:\n  - name: fetch\n  - name: total\n    after: [fetch]\n"
SECRET = "partial-writes-secret-0123456789"


def sample() -> Workflow:
    wf = Workflow("wf")
    a = wf.task("a", payload="x" * 100)
    wf.task("b", after=[a])
    return wf


def stored(client: redis.Redis) -> set[str]:
    """The ids of the workflows in Redis, read from the keyspace itself."""
    found = (WORKFLOW_KEY.match(k) for k in scan_keys(client, "rf:*:w:*"))
    return {m.group(1) for m in found if m}


def used(admin: redis.Redis) -> int:
    return int(admin.info("memory")["used_memory"])


def room(admin: redis.Redis, spare: int) -> None:
    """Let Redis use ``spare`` bytes more than it does now, then refuse (noeviction)."""
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", used(admin) + spare)


def full(admin: redis.Redis) -> None:
    """Memory over the limit from now on: every write refused."""
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", 1)


@pytest.fixture()
def engine(server: EmbeddedRedis, admin: redis.Redis) -> Iterator[Engine]:
    with Engine.connect(server.url) as eng:
        yield eng


def full_after(monkeypatch: pytest.MonkeyPatch, engine: Engine, admin: redis.Redis, n: int) -> None:
    """Fill memory once ``n`` push round trips of ``engine`` have been answered."""
    send = engine._send_push
    sent = [0]

    def counted(batch: Any) -> list[Any]:
        out = send(batch)
        sent[0] += 1
        if sent[0] == n:
            full(admin)
        return out

    monkeypatch.setattr(engine, "_send_push", counted)


def full_after_ticks(monkeypatch: pytest.MonkeyPatch, admin: redis.Redis, n: int) -> None:
    """Fill memory once ``n`` tick.lua calls (any engine's) have been answered."""
    run = Scripts.run
    sent = [0]

    def counted(self: Scripts, call: Any, short: Any = None) -> Any:
        out = run(self, call, short)
        if call.name == "tick":
            sent[0] += 1
            if sent[0] == n:
                full(admin)
        return out

    monkeypatch.setattr(Scripts, "run", counted)


# -- the engine -------------------------------------------------------------------------


def test_a_push_stopped_part_way_names_exactly_what_was_written(
    engine: Engine, admin: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("engine.client.PUSH_BATCH", 10)  # 10 workflows per call
    monkeypatch.setattr("engine.client.PUSH_PIPELINE", 2)  # 2 calls per round trip
    full_after(monkeypatch, engine, admin, 2)
    wf = engine.compile(sample())
    with pytest.raises(PartialWriteError) as caught:
        engine.push_many([wf] * 100)
    e = caught.value
    assert e.exit_code == 4
    assert len(e.stored_ids) == 40 and set(e.stored_ids) == stored(admin)
    assert e.done == [*e.stored_ids, *[None] * 60]
    assert e.failed == list(range(40, 100)) and e.unknown == [] and e.written == 40
    assert isinstance(e.cause, redis.exceptions.OutOfMemoryError)
    assert str(e).startswith("40 of 100 workflow(s) were pushed") and "60 were not" in str(e)
    # a refusal at the first call: nothing written, and said so by the cause itself
    before = snapshot(admin)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        engine.push_many([wf] * 100)
    assert snapshot(admin) == before
    # memory freed, the rest pushed once: no duplicate
    admin.config_set("maxmemory", 0)
    rest = engine.push_many([wf] * len(e.failed))
    assert stored(admin) == set(e.stored_ids) | set(rest) and len(stored(admin)) == 100
    assert engine.count() == 100


def test_runs_stopped_part_way_each_say_what_they_did(
    engine: Engine, admin: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.spec.flow import Pushed, RunRequest

    monkeypatch.setattr("engine.client.PUSH_BATCH", 3)
    monkeypatch.setattr("engine.client.PUSH_PIPELINE", 1)
    wf = engine.compile(sample())
    first = engine.push(wf, key="k1")  # already there: its run is named, nothing written
    full_after(monkeypatch, engine, admin, 1)
    runs = [RunRequest(wf, key="k1"), RunRequest(wf, {"n": 1}), RunRequest(wf, {"n": 2})]
    runs += [RunRequest(wf, {"n": n}) for n in range(3, 7)]
    with pytest.raises(PartialWriteError) as caught:
        engine.push_runs(runs)
    e = caught.value
    assert e.done[0] == Pushed(first, existing=True)
    assert all(isinstance(d, Pushed) and not d.existing for d in e.done[1:3])
    assert e.done[3:] == [None] * 4 and e.failed == [3, 4, 5, 6]
    assert stored(admin) == {first, *e.stored_ids} and len(stored(admin)) == 3


def test_a_reply_lost_part_way_says_which_runs_may_have_been_written(
    engine: Engine, admin: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis going away for good during a push (past push_retry_s): the round trip without
    a reply is neither stored nor refused for sure."""
    monkeypatch.setattr("engine.client.PUSH_BATCH", 10)
    monkeypatch.setattr("engine.client.PUSH_PIPELINE", 1)
    send, sent = engine._send_push, [0]

    def lost(batch: Any) -> list[Any]:
        sent[0] += 1
        out = send(batch)
        if sent[0] == 2:  # written, but its reply never came
            raise redis.ConnectionError("Connection closed by server.")
        return out

    monkeypatch.setattr(engine, "_send_push", lost)
    with pytest.raises(PartialWriteError) as caught:
        engine.push_many([sample()] * 30)
    e = caught.value
    assert (len(e.stored_ids), e.unknown, e.failed) == (
        10,
        list(range(10, 20)),
        list(range(20, 30)),
    )
    assert "10 were not and 10 may have been (no reply came)" in str(e)
    assert set(e.stored_ids) < stored(admin) and len(stored(admin)) == 20


# -- the CLI ----------------------------------------------------------------------------


def test_push_copies_prints_the_ids_written_and_exits_4(
    server: EmbeddedRedis, admin: redis.Redis
) -> None:
    """The report's case: `push --copies` past maxmemory, filling memory for real."""
    env = {**os.environ, "REDISFLOW_URL": server.url}
    room(admin, 1024 * 1024)  # room for about a thousand of the 20,000
    out = cli("push", SAMPLE, "--copies", "20000", env=env)
    assert out.returncode == 4, out.stderr
    ids = out.stdout.split()
    assert 0 < len(ids) < 20000
    assert len(set(ids)) == len(ids) and set(ids) == stored(admin)
    assert out.stderr.strip().splitlines() == [
        f"redisflow: partly written: {len(ids)} of 20000 workflows stored (ids above); the "
        "rest were not: Redis is out of memory (maxmemory reached, policy noeviction); free "
        "memory (e.g. `redisflow cleanup --finished`) or raise maxmemory"
    ]
    # --json: the ids written, how many of how many
    before = stored(admin)
    room(admin, 1024 * 1024)
    out = cli("push", SAMPLE, "--copies", "20000", "--json", env=env)
    assert out.returncode == 4, out.stderr
    got = json.loads(out.stdout)
    assert set(got["ids"]) == stored(admin) - before and got["ids"]
    assert (got["written"], got["total"]) == (len(got["ids"]), 20000)
    assert "partly written" in out.stderr
    # nothing written at all: exit 3, "nothing was written", no id (memory over the limit
    # from the start: what the last push left may have freed a little since)
    full(admin)
    out = cli("push", SAMPLE, "--copies", "20000", env=env)
    assert out.returncode == 3 and out.stdout == ""
    assert "nothing was written" in out.stderr


# -- HTTP -------------------------------------------------------------------------------


class FullInABatch:
    """Memory runs out in the middle of a batch of runs the server pushes: its first
    push is held until all ``n`` runs have reached the batchers (so the next batches are
    as big as they can be), and memory is filled after the first call (10 runs) of the
    first push of more than 10 runs. No timing: the batches' sizes are recorded."""

    def __init__(self, m: pytest.MonkeyPatch, engines: list[Engine], admin: redis.Redis, n: int):
        self.admin, self.n = admin, n
        self.arrived, self.ready = 0, threading.Event()
        self.held, self.size, self.filled = False, 0, False
        self.cut: int | None = None  # the size of the push that memory ran out in
        run = RunBatcher.run

        async def counted(batcher: RunBatcher, *a: Any) -> Any:
            self.arrived += 1
            if self.arrived == n:
                self.ready.set()
            return await run(batcher, *a)

        m.setattr(RunBatcher, "run", counted)
        m.setattr("engine.client.PUSH_BATCH", 10)  # 10 runs per call
        m.setattr("engine.client.PUSH_PIPELINE", 1)  # a call per round trip
        for eng in engines:
            m.setattr(eng, "push_runs", self.push_runs(eng.push_runs))
            m.setattr(eng, "_send_push", self.send(eng._send_push))

    def push_runs(self, push: Any) -> Any:
        def sized(runs: Any, **kw: Any) -> Any:
            self.size = len(runs)
            return push(runs, **kw)

        return sized

    def send(self, send: Any) -> Any:
        def watched(batch: Any) -> list[Any]:
            if not self.held:
                self.held = True
                assert self.ready.wait(60), f"{self.arrived} of {self.n} runs arrived"
            out = send(batch)
            if self.size > 10 and not self.filled:
                self.filled, self.cut = True, self.size
                full(self.admin)
            return out

        return watched


def test_runs_batched_together_are_answered_each_for_itself(
    engine: Engine, admin: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs arriving together, memory running out while their batch is pushed: 202 with
    its id for each run stored, 503 for each of the others only; webhook deliveries the
    same."""
    engine.put_template(PIPELINE)
    engine.put_trigger(new_trigger("gh", "pipeline", "github", SECRET, "X-GitHub-Delivery"))
    app = create_app(engine)
    body = b'{"ref": "main"}'
    signed = {"X-Hub-Signature-256": github_signature(SECRET, body)}
    signed["Content-Type"] = "application/json"

    async def post_all(requests: list[tuple[str, dict[str, Any]]]) -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            return list(await asyncio.gather(*(http.post(u, **kw) for u, kw in requests)))

    alone = "this run was not written: Redis is out of memory"
    whole = "Redis is out of memory (maxmemory reached, policy noeviction): nothing was written"
    runs = [("/v1/templates/pipeline/runs", {"json": {"n": n}}) for n in range(1200)]
    hooks = [
        ("/v1/triggers/gh", {"content": body, "headers": {**signed, "X-GitHub-Delivery": f"d{n}"}})
        for n in range(300)
    ]
    as_trigger = app.state.redisflow.engine_as_trigger(engine.trigger("gh"))
    for requests in (runs, hooks):
        admin.config_set("maxmemory", 0)
        before = stored(admin)
        with monkeypatch.context() as m:
            hook = FullInABatch(m, [engine, as_trigger], admin, len(requests))
            replies = asyncio.run(post_all(requests))
        assert hook.cut is not None
        accepted = [r.json()["id"] for r in replies if r.status_code == 202]
        refused = [r.json()["error"] for r in replies if r.status_code == 503]
        assert len(accepted) + len(refused) == len(requests)
        assert len(set(accepted)) == len(accepted) and set(accepted) == stored(admin) - before
        # the runs of that batch not stored: each its own 503 (the first 10 got 202s); the
        # next batches were refused whole, nothing written
        assert sum(e.startswith(alone) for e in refused) == hook.cut - 10
        assert all(e.startswith((alone, whole)) for e in refused), set(refused)


# -- schedules --------------------------------------------------------------------------


def overdue(engine: Engine, name: str, **settings: Any) -> int:
    """An hourly schedule catching up six ticks (catchup all): its newest tick."""
    now = engine.store.now_ms()
    newest = now - 10 * 60_000
    spec = {"name": name, "template": "job", "every": "1h", "offset": f"{newest % HOUR}ms"}
    settings = {"catchup": "all", "overlap": "allow_all", **settings}
    engine.put_schedule(parse_schedule({**spec, **settings}))
    shard = engine.keys.shard_of_schedule(name)
    due = newest - 5 * HOUR
    engine.redis.hset(shard.schedule(name), mapping={"nt": due, "nx": due})
    engine.redis.zadd(shard.schedules_due, {name: due})
    return newest


def runs_of(engine: Engine, name: str) -> list[str]:
    ids = engine.list_ids(limit=10_000)
    return sorted(w for w in ids if (engine.status(w).input or {}).get("schedule") == name)


def test_a_tick_refused_leaves_no_record_and_fires_once_later(
    engine: Engine, admin: redis.Redis
) -> None:
    engine.put_template("name: job\ntasks:\n  - name: work\n", name="job")
    newest = overdue(engine, "s")
    full(admin)
    before = snapshot(admin)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        Scheduler(engine).run_due()
    assert snapshot(admin) == before  # no tick recorded, due time unchanged: retried
    admin.config_set("maxmemory", 0)
    assert Scheduler(engine).run_due() == 1
    assert engine.store.schedules.fired_ticks("s") == [newest - k * HOUR for k in range(5, -1, -1)]
    assert len(runs_of(engine, "s")) == 6
    assert Scheduler(engine).run_due() == 0  # fired: not pushed again
    assert len(runs_of(engine, "s")) == 6


def test_a_scheduler_still_reads_its_schedules_while_memory_is_full(
    engine: Engine, admin: redis.Redis
) -> None:
    """heads.lua only reads (``flags=no-writes``): a full Redis still answers it, so a
    scheduler pass plans and only its tick call is refused."""
    engine.put_template("name: job\ntasks:\n  - name: work\n", name="job")
    overdue(engine, "s")
    full(admin)
    shard = engine.keys.shard_of_schedule("s")
    [head] = engine.store.schedules.schedule_heads(shard, [("s", 0)])
    assert head.version is not None and head.next_tick is not None


def test_a_pass_stopped_part_way_keeps_what_it_fired(
    engine: Engine, admin: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.put_template("name: job\ntasks:\n  - name: work\n", name="job")
    monkeypatch.setattr("engine.schedules.scheduler.SCHEDULES_PER_CALL", 1)  # a call per schedule
    overdue(engine, "a")
    overdue(engine, "b")
    full_after_ticks(monkeypatch, admin, 1)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        Scheduler(engine).run_due()
    done = {n: len(engine.store.schedules.fired_ticks(n)) for n in ("a", "b")}
    assert sorted(done.values()) == [0, 6]  # the first call's schedule fired, the other not
    assert {n: len(runs_of(engine, n)) for n in ("a", "b")} == done
    admin.config_set("maxmemory", 0)
    assert Scheduler(engine).run_due() == 1  # only the one refused
    assert {n: len(engine.store.schedules.fired_ticks(n)) for n in ("a", "b")} == {"a": 6, "b": 6}
    assert {n: len(runs_of(engine, n)) for n in ("a", "b")} == {"a": 6, "b": 6}


def test_a_backfill_stopped_part_way_reports_the_ticks_it_recorded(
    engine: Engine,
    server: EmbeddedRedis,
    admin: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    engine.put_template("name: job\ntasks:\n  - name: work\n", name="job")
    engine.put_schedule(parse_schedule({"name": "s", "template": "job", "every": "1h"}))
    monkeypatch.setattr("engine.schedules.scheduler.BACKFILL_CHUNK", 2)  # 2 ticks per call
    now = engine.store.now_ms()
    start, end = (now // HOUR - 6) * HOUR, (now // HOUR - 1) * HOUR
    full_after_ticks(monkeypatch, admin, 2)
    span = [datetime.fromtimestamp(t / 1000, UTC).isoformat() for t in (start, end)]
    args = ["schedule", "backfill", "s", "--from", span[0], "--to", span[1], "--json"]
    code = cli_run([*args, "--url", server.url])
    out, err = capsys.readouterr()
    assert code == 4, err
    ticks = json.loads(out)["ticks"]
    assert [t["what"] for t in ticks] == ["fired", "buffered", "buffered", "buffered"]
    assert [t["tick"] for t in ticks] == engine.store.schedules.fired_ticks("s")
    assert sorted(t["run"] for t in ticks) == runs_of(engine, "s")
    assert err.strip() == (
        "redisflow: partly written: 4 of 6 ticks stored (listed above); the rest were not: "
        "Redis is out of memory (maxmemory reached, policy noeviction); free memory (e.g. "
        "`redisflow cleanup --finished`) or raise maxmemory"
    )
    admin.config_set("maxmemory", 0)
    again = engine.backfill_schedule(
        "s", *(datetime.fromtimestamp(t / 1000, UTC) for t in (start, end))
    )
    assert [o.what for o in again] == ["dup"] * 4 + ["buffered"] * 2
    assert len(runs_of(engine, "s")) == 6


# -- Redis 6.2: no #!lua, a script is refused at its first write --------------------------


def test_on_6_2_a_refused_script_wrote_nothing_and_a_partial_push_is_exact(
    redis62: EmbeddedRedis,
) -> None:
    from engine.cli.common import cause_of

    admin62 = redis.Redis.from_url(redis62.url, decode_responses=True)
    try:
        admin62.flushall()
        with Engine.connect(redis62.url) as engine:
            assert admin62.info("server")["redis_version"].startswith("6.2.")
            wf = engine.compile(sample())
            engine.push(wf)
            full(admin62)
            before = snapshot(admin62)
            with pytest.raises(redis.ResponseError) as refused:
                engine.push_many([wf] * 10)
            assert "OOM command not allowed" in str(refused.value)  # at push's first write
            assert snapshot(admin62) == before
            room(admin62, 1024 * 1024)
            with pytest.raises(PartialWriteError) as caught:
                engine.push_many([wf] * 20000)
            e = caught.value
            assert 0 < e.written < 20000 and set(e.stored_ids) | {"1"} == stored(admin62)
            assert cause_of(e.cause).startswith("Redis is out of memory")
    finally:
        admin62.config_set("maxmemory", 0)
        admin62.flushall()
        admin62.close()
