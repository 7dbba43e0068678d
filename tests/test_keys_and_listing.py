"""What gush and redis.workflow users have: gush's ``before:`` edges, a run found by the
caller's own key, listing by creation time without reading every workflow (gush's
``by_ts``), and changing or clearing a run's retention (gush's ``expire_workflow``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from engine_helpers import cli, one_line_error, snapshot
from test_http_server import serving

from engine import Engine, Workflow
from engine.connect.urls import open_client
from engine.errors import DefinitionError, NotFoundError
from engine.http import HttpConfig, create_app
from engine.spec.definition import resolve, validate
from engine.spec.loader import load_text
from engine.store import by_time

MINUTE_MS = 60_000

# -- before: ------------------------------------------------------------------------------


def parents(wf: Workflow) -> dict[str, list[str]]:
    validate(wf)
    ups, _ = resolve(wf)
    return {t.name: sorted(p) for t, p in zip(wf.tasks, ups, strict=True)}


def test_before_in_the_builder_is_after_reversed() -> None:
    wf = Workflow("w")
    fetch = wf.task("fetch", before=["parse", "store"])  # named before they exist
    wf.task("parse")
    store = wf.task("store", after=["parse"])
    wf.task("notify", after=[store])
    wf.task("prepare", before=fetch)  # one task, not a list
    assert parents(wf) == {
        "fetch": ["prepare"],
        "parse": ["fetch"],
        "store": ["fetch", "parse"],
        "notify": ["store"],
        "prepare": [],
    }
    assert parents(wf)["store"] == ["fetch", "parse"]  # validating again adds nothing


def test_before_and_after_for_one_edge_is_one_edge() -> None:
    wf = Workflow("w")
    wf.task("a", before=["b"])
    wf.task("b", after=["a"])
    assert parents(wf) == {"a": [], "b": ["a"]}


@pytest.mark.parametrize("ext", ["yaml", "json"])
def test_before_in_files(ext: str) -> None:
    doc = {
        "name": "gush",
        "tasks": [
            {"name": "fetch", "before": ["parse"]},
            {"name": "parse"},
            {"name": "report", "before": "parse", "after": ["fetch"]},
        ],
    }
    text = json.dumps(doc) if ext == "json" else _yaml(doc)
    (wf,) = load_text(text, f"gush.{ext}")
    assert parents(wf) == {"fetch": [], "parse": ["fetch", "report"], "report": ["fetch"]}


def _yaml(doc: dict[str, object]) -> str:
    import yaml

    return str(yaml.safe_dump(doc, sort_keys=False))


def test_before_in_a_maps_steps() -> None:
    text = (
        "name: m\ntasks:\n  - name: split\n  - name: each\n    map: split\n    steps:\n"
        "      - {name: load, before: [save]}\n      - {name: save}\n"
    )
    (wf,) = load_text(text, "m.yaml")
    from engine.store.codec import compile_workflow

    compile_workflow(wf)
    assert wf.tasks[1].map is not None and wf.tasks[1].map.steps is not None
    assert wf.tasks[1].map.steps[1].after == ["load"]


BAD_BEFORE = {
    "unknown": (
        "name: w\ntasks:\n  - name: a\n    before: [ghost]\n  - name: b\n",
        r"^bad\.yaml:3: task 'a' runs before unknown task 'ghost' \(workflow 'w'\)$",
    ),
    "itself": (
        "name: w\ntasks:\n  - name: a\n    before: [a]\n",
        r"^bad\.yaml:3: task 'a' runs before itself$",
    ),
    "twice": (
        "name: w\ntasks:\n  - name: a\n    before: [b, b]\n  - name: b\n",
        r"^bad\.yaml:3: task 'a' lists a task twice in before$",
    ),
    "cycle": (
        "name: w\ntasks:\n  - name: a\n    before: [b]\n  - name: b\n    before: [a]\n",
        r"^bad\.yaml:1: workflow 'w' has a cycle: (a -> b -> a|b -> a -> b)$",
    ),
    "cycle with after": (
        "name: w\ntasks:\n  - name: a\n    after: [b]\n  - name: b\n    after: [c]\n"
        "  - name: c\n    before: [b]\n    after: [a]\n",
        r"^bad\.yaml:1: workflow 'w' has a cycle: ",
    ),
    "not names": (
        "name: w\ntasks:\n  - name: a\n    before: [{x: 1}]\n  - name: b\n",
        r"^bad\.yaml:3: before must be a list of task names, not ",
    ),
    "a step before a task outside the steps": (
        "name: m\ntasks:\n  - name: split\n  - name: each\n    map: split\n    steps:\n"
        "      - {name: load, before: [split]}\n",
        r"^bad\.yaml:7: task 'load' runs before unknown task 'split' \(workflow 'each'\) "
        r"\(in the steps of map task 'each'\)$",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_BEFORE))
def test_bad_before_is_one_line_exit_2_nothing_written(
    case: str, tmp_path: Path, cli_env: dict[str, str], redis_url: str
) -> None:
    text, pattern = BAD_BEFORE[case]
    (tmp_path / "bad.yaml").write_text(text)
    client = open_client(redis_url, decode_responses=True)
    before = snapshot(client)
    result = cli("push", "bad.yaml", env=cli_env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    import re

    assert re.search(pattern, one_line_error(result).removeprefix("redisflow: ")), result.stderr
    assert snapshot(client) == before


def test_bad_before_in_the_builder() -> None:
    wf = Workflow("w")
    wf.task("a", before=["nope"], where="build.py:3")
    with pytest.raises(DefinitionError, match=r"^build.py:3: task 'a' runs before unknown task"):
        validate(wf)
    with pytest.raises(DefinitionError, match="before must be a list of tasks"):
        Workflow("w").task("a", before=3)  # type: ignore[arg-type]


def test_a_pushed_before_edge_orders_the_run(engine: Engine) -> None:
    (wf,) = load_text("name: w\ntasks:\n  - {name: a, before: [b]}\n  - name: b\n", "w.yaml")
    wid = engine.push(wf)
    st = engine.status(wid)
    assert st.task("b").parents == ["a"]
    assert str(st.task("b").state) == "waiting" and str(st.task("a").state) == "ready"


# -- a run by its key ------------------------------------------------------------------------


def one_task(name: str = "w") -> Workflow:
    wf = Workflow(name)
    wf.task("a")
    return wf


def test_status_and_steering_by_key(engine: Engine) -> None:
    wid = engine.push(one_task(), key="order-8812")
    engine.push(one_task(), key="order-8813")
    assert engine.id_for_key("order-8812") == wid
    assert engine.status(key="order-8812").id == wid
    assert engine.pause(key="order-8812") == 1
    assert str(engine.status(wid).state) == "paused"
    engine.cancel(key="order-8812")
    assert str(engine.status(key="order-8812").state) == "cancelled"
    with pytest.raises(NotFoundError, match="no workflow has the key 'order-9999'"):
        engine.status(key="order-9999")
    with pytest.raises(DefinitionError, match="not both or neither"):
        engine.status(wid, key="order-8812")
    with pytest.raises(DefinitionError, match="not both or neither"):
        engine.status()
    engine.cleanup(key="order-8812")
    with pytest.raises(NotFoundError):  # the key went with its workflow
        engine.status(key="order-8812")


def test_a_key_routed_by_its_gate_is_found_on_another_shard(redis_url: str) -> None:
    eng = Engine.connect(redis_url, namespace="kg", shards=4)
    try:
        wf = Workflow("deploy", concurrency={"key": "env", "limit": 1})
        wf.task("a")
        gate_shard = eng.keys.shard_for("c/deploy/prod")
        key = next(f"k{n}" for n in range(100) if eng.keys.shard_for(f"k{n}") != gate_shard)
        wid = eng.push(wf, {"env": "prod"}, key=key)
        assert int(wid) % 4 == gate_shard  # not the key's shard
        assert eng.status(key=key).id == wid
    finally:
        eng.close()


def test_cli_takes_key_wherever_it_takes_an_id(
    engine: Engine, cli_env: dict[str, str], redis_url: str
) -> None:
    wid = engine.push(one_task(), key="order-8812")
    result = cli("status", "key:order-8812", "--json", env=cli_env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["id"] == wid
    assert cli("pause", "key:order-8812", env=cli_env).returncode == 0
    assert cli("cancel", "key:order-8812", env=cli_env).returncode == 0
    assert str(engine.status(wid).state) == "cancelled"
    result = cli("expire", "key:order-8812", "1h", "--json", env=cli_env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["id"] == wid
    assert cli("viz", "key:order-8812", env=cli_env).returncode == 0
    client = open_client(redis_url, decode_responses=True)
    before = snapshot(client)
    for args, pattern in (
        (("status", "key:nope"), "no workflow has the key 'nope'"),
        (("cancel", "key:"), "an idempotency key must be a non-empty string"),
        (("status", "keys:x"), "not a workflow id"),
    ):
        result = cli(*args, env=cli_env)
        assert result.returncode == 2, result.stderr
        assert pattern in one_line_error(result)
    assert snapshot(client) == before
    assert cli("cleanup", "key:order-8812", env=cli_env).returncode == 0
    assert engine.count() == 0


# -- listing by creation time ---------------------------------------------------------------


def stamp(engine: Engine, wids: list[str], first_ms: int, step_ms: int = MINUTE_MS) -> None:
    """Give the workflows creation times ``first_ms``, then every ``step_ms``, in order."""
    pipe = engine.redis.pipeline(transaction=False)
    for n, wid in enumerate(wids):
        pipe.hset(engine.keys.shard_of(wid).workflow(wid), "ct", first_ms + n * step_ms)
    pipe.execute()


def test_list_by_creation_time_finds_exactly_the_window(engine: Engine) -> None:
    base = 1_700_000_000_000
    wids = [engine.push(one_task("a" if n % 2 else "b")) for n in range(300)]
    stamp(engine, sorted(wids, key=int), base)
    wids.sort(key=int)
    for n in (10, 11, 150, 151):  # gone from the middle: the search steps over them
        engine.cancel(wids[n])
        engine.cleanup(wids[n])
    alive = [w for n, w in enumerate(wids) if n not in (10, 11, 150, 151)]
    when = {w: base + n * MINUTE_MS for n, w in enumerate(wids)}

    def expect(lo: int | None, hi: int | None, name: str | None = None) -> list[str]:
        return [
            w
            for w in alive
            if (lo is None or when[w] >= lo)
            and (hi is None or when[w] < hi)
            and (name is None or (int(w) - int(wids[0])) % 2 == (name == "a"))
        ]

    for lo_n, hi_n in ((None, 5), (11, 12), (10, 151), (149, None), (0, 300), (299, 300)):
        lo = None if lo_n is None else (base + lo_n * MINUTE_MS) / 1000
        hi = None if hi_n is None else (base + hi_n * MINUTE_MS) / 1000
        want = expect(
            None if lo_n is None else base + lo_n * MINUTE_MS,
            None if hi_n is None else base + hi_n * MINUTE_MS,
        )
        got = engine.list_ids(created_after=lo, created_before=hi, limit=1000, oldest_first=True)
        assert got == want, (lo_n, hi_n)
        assert engine.count(created_after=lo, created_before=hi) == len(want)
        newest = engine.list_ids(created_after=lo, created_before=hi, offset=3, limit=7)
        assert newest == list(reversed(want))[3:10]
    lo, hi = (base + 40 * MINUTE_MS) / 1000, (base + 200 * MINUTE_MS) / 1000
    by_name = engine.list_ids("running", "a", created_after=lo, created_before=hi, limit=1000)
    assert by_name == list(reversed(expect(int(lo * 1000), int(hi * 1000), "a")))
    assert engine.count("running", "a", created_after=lo, created_before=hi) == len(by_name)
    assert engine.count("failed", created_after=lo, created_before=hi) == 0
    assert [s.id for s in engine.list(created_after=lo, created_before=hi, limit=2)] == list(
        reversed(expect(int(lo * 1000), int(hi * 1000)))
    )[:2]


@pytest.mark.single_redis  # counts the server's commands
def test_the_search_reads_a_few_workflows_not_all(engine: Engine) -> None:
    wf = one_task()
    compiled = engine.compile(wf)
    wids: list[str] = []
    while len(wids) < 20_000:
        wids += engine.push_many([compiled] * 1000)
    stamp(engine, sorted(wids, key=int), 1_700_000_000_000, 1000)
    key = engine.keys.shard(0).all
    engine.redis.config_resetstat()
    at = 1_700_000_000_000 + 12_345 * 1000
    rank = by_time.first_at(engine.redis, engine.keys.shard(0), key, at)
    assert rank == 12_345
    stats = engine.redis.info("commandstats")
    reads = sum(stats.get(f"cmdstat_{c}", {}).get("calls", 0) for c in ("hget", "zrange"))
    assert reads < 300, stats  # 20,000 workflows: four steps of 32 probes


def test_list_by_creation_time_over_shards(redis_url: str) -> None:
    eng = Engine.connect(redis_url, namespace="ts", shards=3)
    try:
        wids = sorted((eng.push(one_task()) for _ in range(90)), key=int)
        base = 1_700_000_000_000
        for s in range(3):  # each shard's own, in its own order
            stamp(eng, [w for w in wids if int(w) % 3 == s], base + s, MINUTE_MS)
        lo, hi = (base + 5 * MINUTE_MS) / 1000, (base + 10 * MINUTE_MS) / 1000
        got = eng.list_ids(created_after=lo, created_before=hi, limit=100)
        assert len(got) == 15 and eng.count(created_after=lo, created_before=hi) == 15
        assert got == sorted(got, key=int, reverse=True)
    finally:
        eng.close()


def test_cli_list_since_until(engine: Engine, cli_env: dict[str, str], redis_url: str) -> None:
    wids = sorted((engine.push(one_task()) for _ in range(3)), key=int)
    now_ms = int(engine.server_time() * 1000)
    for wid, ago_ms in zip(wids, (3 * 3600_000, 3600_000, 600_000), strict=True):
        engine.redis.hset(engine.keys.shard_of(wid).workflow(wid), "ct", now_ms - ago_ms)
    result = cli("list", "--since", "2h", "--until", "30m", "--json", env=cli_env)
    assert result.returncode == 0, result.stderr
    page = json.loads(result.stdout)
    assert [w["id"] for w in page["workflows"]] == [wids[1]] and page["total"] == 1
    result = cli("list", "--since", "2h", "--json", env=cli_env)
    assert [w["id"] for w in json.loads(result.stdout)["workflows"]] == [wids[2], wids[1]]
    client = open_client(redis_url, decode_responses=True)
    before = snapshot(client)
    for args, pattern in (
        (("--since", "soon"), "not a duration or a time: 'soon'"),
        (("--since", "30m", "--until", "2h"), "--until 2h is not later than --since 30m"),
    ):
        result = cli("list", *args, env=cli_env)
        assert result.returncode == 2, result.stderr
        assert pattern in one_line_error(result)
    assert snapshot(client) == before


# -- retention ------------------------------------------------------------------------------


def expiry(engine: Engine, wid: str) -> float | None:
    return engine.redis.zscore(engine.keys.shard_of(wid).expire, wid)


def test_expire_a_finished_run(engine: Engine) -> None:
    wid = engine.push(one_task())
    engine.cancel(wid)
    now = engine.server_time()
    due = engine.expire(wid, 3600)
    assert due is not None and now + 3590 < due < now + 3660
    assert expiry(engine, wid) == pytest.approx(due * 1000)
    assert engine.expire(wid, None) is None  # never: +inf, which housekeeping never reaches
    assert expiry(engine, wid) == float("inf")
    assert engine.expire(wid, -1) is None
    due = engine.expire(wid, 60)  # and back
    assert due is not None and expiry(engine, wid) == pytest.approx(due * 1000)


def test_never_outlives_the_deployments_retention(engine: Engine) -> None:
    kept, swept = engine.push(one_task()), engine.push(one_task())
    for wid in (kept, swept):
        engine.cancel(wid)
        # finished long ago, as the deployment's sweep reads it
        engine.redis.zadd(engine.keys.shard_of(wid).by_state("cancelled"), {wid: 1})
    engine.expire(kept, None)
    engine.maintain()
    assert engine.count() == 1 and engine.status(kept).id == kept
    with pytest.raises(NotFoundError):
        engine.status(swept)


def test_a_due_retention_is_cleaned_and_a_changed_one_is_not(engine: Engine) -> None:
    due_wid, moved = engine.push(one_task()), engine.push(one_task())
    for wid in (due_wid, moved):
        engine.cancel(wid)
        engine.expire(wid, 60)
        engine.redis.zadd(engine.keys.shard_of(wid).expire, {wid: 1})  # it fell due
    engine.expire(moved, 3600)  # changed after: re-armed from now
    engine.maintain()
    assert [s.id for s in engine.list()] == [moved]


def test_expire_a_running_run_applies_when_it_ends(engine: Engine) -> None:
    week, never = engine.push(one_task()), engine.push(one_task())
    assert engine.expire(week, 7 * 86400) is None
    assert engine.expire(never, None) is None
    assert expiry(engine, week) is None and expiry(engine, never) is None
    now = engine.server_time()
    engine.cancel(week)
    engine.cancel(never)
    score, week_ms = expiry(engine, week), (now + 7 * 86400) * 1000
    assert score is not None and week_ms - 60_000 < score < week_ms + 60_000
    assert expiry(engine, never) == float("inf")


def test_expire_bad_input(engine: Engine, cli_env: dict[str, str], redis_url: str) -> None:
    wid = engine.push(one_task())
    for bad in (0, -5, float("nan"), True, "7d", 11 * 365 * 86400):
        with pytest.raises(DefinitionError, match="a retention is a number of seconds"):
            engine.expire(wid, bad)  # type: ignore[arg-type]
    with pytest.raises(NotFoundError):
        engine.expire("987654", 60)
    client = open_client(redis_url, decode_responses=True)
    before = snapshot(client)
    for args, pattern in (
        ((wid, "0"), "a retention must be above 0"),
        ((wid, "soon"), "not a duration or 'never': 'soon'"),
        (("abc", "7d"), "not a workflow id"),
        ((wid,), "the following arguments are required: DURATION|never"),
        (("987654", "7d"), "workflow 987654 does not exist"),
    ):
        result = cli("expire", *args, env=cli_env)
        assert result.returncode == 2, result.stderr
        assert pattern in one_line_error(result)
    assert snapshot(client) == before


def test_cli_expire(engine: Engine, cli_env: dict[str, str]) -> None:
    wid = engine.push(one_task())
    result = cli("expire", wid, "7d", env=cli_env)
    assert result.returncode == 0 and "kept 7d once it ends" in result.stdout
    engine.cancel(wid)
    result = cli("expire", wid, "12h", env=cli_env)
    assert result.returncode == 0 and "kept until " in result.stdout
    result = cli("expire", wid, "never", "--json", env=cli_env)
    assert result.returncode == 0
    assert json.loads(result.stdout) == {"id": wid, "ttl": None, "expires_at": None}
    assert expiry(engine, wid) == float("inf")
    event = next(e for e in engine.events() if e.kind == "workflow.retention")
    assert event.wid == wid and event.data["ttl_ms"] == -1 and event.data["by"]


# -- over HTTP ------------------------------------------------------------------------------


@pytest.fixture()
def http(engine: Engine) -> Iterator[httpx.Client]:
    with serving(create_app(engine, HttpConfig())) as base, httpx.Client(base_url=base) as c:
        yield c


def test_http_by_key_and_by_creation_time(engine: Engine, http: httpx.Client) -> None:
    wid = engine.push(one_task(), key="order/8812")
    other = engine.push(one_task())
    stamp(engine, [wid, other], 1_700_000_000_000)
    got = http.get("/v1/workflows/by-key/order%2F8812")
    assert got.status_code == 200, got.text
    assert got.json()["id"] == wid
    assert http.get("/v1/workflows/by-key/order/8812").json()["id"] == wid
    missing = http.get("/v1/workflows/by-key/nope")
    assert missing.status_code == 404 and "no workflow has the key" in missing.json()["error"]
    for bad in ("%20", "caf%C3%A9", "x" * 201):
        assert http.get(f"/v1/workflows/by-key/{bad}").status_code == 400, bad
    page = http.get("/v1/workflows", params={"created_after": "2023-11-14T22:14:00Z"}).json()
    assert [w["id"] for w in page["workflows"]] == [other]
    page = http.get("/v1/workflows", params={"created_before": "2023-11-15T00:13:50+02:00"})
    assert [w["id"] for w in page.json()["workflows"]] == [wid]
    for bad in ("yesterday", "1700000030", "2023-11-14", "2023-13-14T00:00:00Z"):
        got = http.get("/v1/workflows", params={"created_after": bad})
        assert got.status_code == 400 and "is not an RFC 3339 time" in got.text, bad
