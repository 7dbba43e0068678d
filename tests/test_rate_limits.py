"""Per-key rate limits (engine/spec/rate_limits.py, lua/lib/rate_limits.lua) on a real redis-server:
a bucket per (task type, key), GCRA on Redis's clock taken in claim.lua."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import Hand, agent_thread, cli, one_line_error, scan_keys, snapshot, wait_for
from own_server import redis62  # noqa: F401 - the fixture
from test_http_server import client  # noqa: F401 - the fixture

from engine import Agent, DefinitionError, EmbeddedRedis, Engine, Task, Workflow
from engine.spec.loader import load_text
from engine.spec.rate_limits import RateLimit
from engine.store.calls import Claimed, ClaimRows
from engine.store.codec import compile_workflow
from engine.store.keys import bucket_id


def limited(
    limit: int = 1, per: str = "1h", burst: int = 1, key: str = "input.cust", routed: bool = False
) -> Workflow:
    """One task of type "api" with a rate limit. ``routed``: its runs go to the shard of
    their key (a concurrency key on the same field, never reached), so on a Redis Cluster
    one bucket holds for them all."""
    wf = Workflow("limited", concurrency={"key": "cust", "limit": 1_000_000} if routed else None)
    wf.task("call", type="api", rate_limit={"key": key, "limit": limit, "per": per, "burst": burst})
    return wf


def claim(engine: Engine, hand: Hand, task_type: str = "api", count: int = 100) -> list[Task]:
    """One claim on every shard; the tasks in all."""
    got: list[Task] = []
    for shard in engine.keys.all_shards():
        call = engine.store.calls.claim_call(shard, hand.id, [task_type], count)
        got += engine.store.scripts.run(call)
    return got


def claim_reply(engine: Engine, hand: Hand, wid: str, count: int = 100) -> Claimed:
    """One claim on the shard of workflow ``wid``."""
    shard = engine.keys.shard_of(wid)
    reply: Claimed = engine.store.scripts.run(
        engine.store.calls.claim_call(shard, hand.id, ["api"], count)
    )
    return reply


def rate_keys(engine: Engine) -> dict[str, Any]:
    """Every rate-limit queue and bucket key, and every bucket member still standing in a
    type queue or P:delayed."""
    found: dict[str, Any] = {}
    for key in scan_keys(engine.redis):
        if ":rq:" in key or ":rb:" in key:
            found[key] = engine.redis.pttl(key)
        elif key.endswith(":delayed") or ":q:" in key:
            for m in engine.redis.zrange(key, 0, -1):
                if m.startswith("~"):
                    found[f"{key} {m}"] = "member"
    return found


def done(engine: Engine, hand: Hand, tasks: list[Task]) -> None:
    for t in tasks:
        assert hand.report(t, "ok", "null") == 1


# -- definitions: builder, files, the deployment's -----------------------------------------


BAD_SPECS = [
    ({"key": "input.c", "limit": 0}, "limit must be a whole number from 1"),
    ({"key": "input.c", "limit": 5, "burst": 0}, "burst must be a whole number from 1"),
    ({"key": "input.c", "limit": 5, "per": "1w"}, "per must be a period like 1s"),
    ({"key": "input.c", "limit": 5, "per": "fortnight"}, "per must be a period like 1s"),
    ({"limit": 5}, "rate_limit needs a key"),
    ({"key": "input.", "limit": 5}, "must name a field after 'input.'"),
    ({"key": "c", "limit": 5, "rate": 3}, "unknown option(s) rate"),
    ({"key": "c", "limit": True}, "limit must be a whole number"),
]


@pytest.mark.parametrize(("spec", "says"), BAD_SPECS)
def test_a_bad_rate_limit_is_one_clear_line(spec: dict[str, Any], says: str) -> None:
    wf = Workflow("w")
    wf.task("a", rate_limit=spec)
    with pytest.raises(DefinitionError) as e:
        compile_workflow(wf)
    assert says in str(e.value) and "task 'a'" in str(e.value) and "\n" not in str(e.value)


def test_files_and_templates_carry_rate_limits() -> None:
    text = """\
name: sync
rate_limits:
  crm: {key: input.account, limit: 10, per: 1m}
tasks:
  - name: fetch
    type: crm
  - name: push
    type: crm
    after: [fetch]
    rate_limit: {key: payload.region, limit: 2, per: 1s, burst: 4}
    payload: {region: eu}
  - name: note
    after: [push]
"""
    [wf] = load_text(text, "sync.yaml")
    c = compile_workflow(wf)
    static = c.definition
    assert c.digest.endswith("+L")
    assert "0L" in static and "1L" in static and "2L" not in static
    assert static[static.index("0L") + 1] == "6000000|1|@"  # 10 per minute: one per 6 s
    assert static[static.index("1L") + 1] == "500000|4|=eu"  # the payload's field: fixed
    assert c.rate_keys == [(0, "fetch", "account")]
    bad = text.replace("limit: 10, per: 1m", "limit: 10, per: 1fortnight")
    with pytest.raises(DefinitionError, match=r"^sync.yaml:.*rate_limits of type 'crm'"):
        compile_workflow(load_text(bad, "sync.yaml")[0])
    nofield = text.replace("payload: {region: eu}", "payload: {zone: eu}")
    with pytest.raises(DefinitionError, match="payload has no field 'region'"):
        compile_workflow(load_text(nofield, "sync.yaml")[0])


def test_a_map_or_a_wait_task_cannot_have_a_rate_limit() -> None:
    wf = Workflow("m")
    src = wf.task("src")
    wf.task("each", map=src, rate_limit={"key": "k", "limit": 1})
    with pytest.raises(DefinitionError, match="a map cannot have a rate limit"):
        compile_workflow(wf)
    waits = Workflow("w")
    waits.task("hold", wait={"sleep": "1h"}, rate_limit={"key": "k", "limit": 1})
    with pytest.raises(DefinitionError, match="a wait task .* cannot have a rate limit"):
        compile_workflow(waits)
    child = Workflow("c")
    child.task("sub", run="enrich", rate_limit={"key": "k", "limit": 1})
    with pytest.raises(DefinitionError, match="a wait task .* cannot have a rate limit"):
        compile_workflow(child)


def test_an_input_without_the_key_field_pushes_nothing(engine: Engine) -> None:
    wf = limited()
    before = snapshot(engine.redis)
    with pytest.raises(DefinitionError) as e:
        engine.push_many([wf, wf], [{"cust": "a"}, {"other": 1}])
    assert str(e.value) == (
        "workflow 'limited': its input has no field 'cust', which the rate limit key of "
        "task 'call' names"
    )
    assert snapshot(engine.redis) == before


def test_the_deployment_limit_applies_to_types_without_their_own(engine: Engine) -> None:
    engine.put_rate_limit("api", key="input.cust", limit=1, per="1h", burst=2)
    assert engine.rate_limits() == {"api": RateLimit("input.cust", 1, "1h", 2)}
    wf = Workflow("plain")
    wf.task("call", type="api")
    wf.task("other", type="db")
    wids = [engine.push(wf, {"cust": "x"}) for _ in range(4)]
    hand = Hand(engine)
    got = claim(engine, hand)
    # burst 2 per shard: on one Redis exactly 2 (see the cluster test below)
    assert len(got) == 2 or engine.keys.shards > 1
    assert len(claim(engine, hand, "db")) == 4  # another type is not limited
    # its own limit wins over the deployment's
    own = Workflow("own")
    own.task("call", type="api", rate_limit={"key": "vip", "limit": 100, "per": "1s", "burst": 5})
    more = [engine.push(own, {"cust": "x"}) for _ in range(3)]
    assert len(claim(engine, hand)) == 3
    engine.delete_rate_limit("api")
    assert engine.rate_limits() == {}
    assert engine.status(wids[-1]).tasks[0].rate_key == "x"
    assert engine.status(more[0]).tasks[0].rate_key == "vip"
    with pytest.raises(DefinitionError, match="limit must be a whole number"):
        engine.put_rate_limit("api", key="k", limit=0)
    assert engine.rate_limits() == {}


# -- the claim: tokens, next token time, no agent slot -----------------------------------------


@pytest.mark.single_redis
def test_a_claim_takes_the_tokens_there_are_and_says_when_the_next_comes(engine: Engine) -> None:
    wf = limited(limit=2, per="1s", burst=3)
    wids = [engine.push(wf, {"cust": "a"}) for _ in range(5)]
    hand = Hand(engine)
    reply = claim_reply(engine, hand, wids[0])
    assert [t.workflow_id for t in reply] == wids[:3]  # the burst, oldest first
    assert reply.next_at_ms is not None and reply.now_ms is not None
    # the bucket is empty: 3 taken at 500 ms each from now, a token every 500 ms
    assert 499 <= reply.next_at_ms - reply.now_ms <= 501
    assert reply.token_in_s is not None and 0.49 <= reply.token_in_s <= 0.51
    # meanwhile nothing more: the bucket waits in P:delayed, not in the type's queue
    shard = engine.keys.shard_of(wids[0])
    assert engine.redis.zrange(shard.queue("api"), 0, -1) == []
    member = "~" + bucket_id("api", "a")
    assert engine.redis.zscore(shard.delayed, member) == reply.next_at_ms
    again = claim_reply(engine, hand, wids[0])
    assert list(again) == [] and again.next_at_ms is None  # nothing popped: nothing to say
    # the status says why they wait, and until when
    st = engine.status(wids[3])
    assert st.tasks[0].state == "ready"
    assert st.tasks[0].throttled_until == reply.next_at_ms / 1000
    assert st.tasks[0].rate_key == "a"
    # its time comes (the bucket's TAT moved back: as if the time had passed)
    engine.redis.hincrby(shard.bucket("api", "a"), "t", -1_000_000)
    engine.redis.zadd(shard.delayed, {member: 0})
    got = claim_reply(engine, hand, wids[0])
    assert [t.workflow_id for t in got] == wids[3:5]
    assert list(rate_keys(engine)) == [shard.bucket("api", "a")]  # no queue, no member
    assert 0 < engine.redis.pttl(shard.bucket("api", "a")) <= 1500  # gone once full again


@pytest.mark.single_redis
def test_a_bucket_is_one_member_whatever_its_backlog(engine: Engine) -> None:
    wf = limited(limit=1, per="1h")
    engine.push_many([wf] * 300, [{"cust": "a"}] * 300)
    shard = engine.keys.shard(0)
    member = "~" + bucket_id("api", "a")
    assert engine.redis.zrange(shard.queue("api"), 0, -1) == [member]  # not 300
    assert engine.redis.zcard(shard.rate_queue("api", "a")) == 300
    hand = Hand(engine)
    reply = claim_reply(engine, hand, engine.list_ids()[0])
    assert len(reply) == 1 and reply.next_at_ms is not None
    # out of tokens: the bucket waits as one entry of P:delayed; its queue is untouched
    assert engine.redis.zrange(shard.delayed, 0, -1) == [member]
    assert engine.redis.zcard(shard.queue("api")) == 0
    assert engine.redis.zcard(shard.rate_queue("api", "a")) == 299


@pytest.mark.single_redis
def test_a_throttled_key_slows_no_other_key_nor_plain_tasks(engine: Engine) -> None:
    wf = limited(limit=1, per="1h")
    plain = Workflow("plain")
    plain.task("call", type="api")
    slow = [engine.push(wf, {"cust": "slow"}) for _ in range(3)]
    hand = Hand(engine)
    assert [t.workflow_id for t in claim(engine, hand)] == slow[:1]
    fast = [engine.push(wf, {"cust": f"k{n}"}) for n in range(5)]
    easy = [engine.push(plain) for _ in range(5)]
    got = claim(engine, hand)
    assert sorted(t.workflow_id for t in got) == sorted(fast + easy)
    assert all(engine.status(w).tasks[0].state == "ready" for w in slow[1:])


def test_a_throttled_task_holds_no_agent_slot(engine: Engine) -> None:
    wf = limited(limit=1, per="1h", routed=True)
    plain = Workflow("plain")
    plain.task("call", type="api")
    ran: list[str] = []
    with agent_thread(engine, {"api": lambda t: ran.append(t.workflow_id)}, concurrency=1) as a:
        slow = [engine.push(wf, {"cust": "slow"}) for _ in range(3)]
        wait_for(lambda: engine.status(slow[0]).state == "succeeded", 30, "the first to run")
        easy = [engine.push(plain) for _ in range(4)]
        wait_for(lambda: all(engine.state(w) == "succeeded" for w in easy), 30, "the plain ones")
        assert a._inflight == 0  # one slot, free: the throttled tasks hold none
    assert sorted(ran) == sorted([slow[0], *easy])
    for w in slow[1:]:
        t = engine.status(w).tasks[0]
        assert t.state == "ready" and t.agent is None and t.throttled_until is not None


@pytest.mark.same_on_cluster
def test_status_says_a_throttled_task_waits_and_until_when(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    wf = limited(limit=1, per="1h")
    first, second = engine.push(wf, {"cust": "a"}), engine.push(wf, {"cust": "a"})
    hand = Hand(engine)
    assert [t.workflow_id for t in claim(engine, hand)] == [first]
    waiting = second
    out = cli("status", waiting, env=cli_env)
    assert out.returncode == 0 and "throttled, next at" in out.stdout
    assert (
        json.loads(cli("status", waiting, "--json", env=cli_env).stdout)["tasks"][0]["rate_key"]
        == "a"
    )


def test_the_agent_sleeps_until_the_next_token_the_claim_names(engine: Engine) -> None:
    agent = Agent(engine, "sleeper", {"api": lambda t: None}, idle_check_s=30)
    reply = ClaimRows([10_250, 10_000])  # claim.lua's reply: a token in 250 ms, no task
    assert agent._claimed([reply], engine.keys.shard(0)) == []
    assert 0.2 < agent._next_due() <= 0.25
    assert agent._next_due() == pytest.approx(30, abs=1)  # used once: the next wait is its own


def test_retries_later_starts_and_template_runs_go_through_their_bucket(engine: Engine) -> None:
    tries: Counter[str] = Counter()

    def flaky(task: Task) -> None:
        tries[task.workflow_id] += 1
        if tries[task.workflow_id] == 1:
            raise RuntimeError("once")

    wf = Workflow("flaky", retry_backoff=0.0)
    fast = {"key": "input.cust", "limit": 1000, "per": "1s", "burst": 1000}
    wf.task("call", type="api", max_attempts=2, rate_limit=fast)
    now = engine.push(wf, {"cust": "a"})
    later = engine.push(wf, {"cust": "a"}, start_in=0.2)
    engine.put_template(
        "name: tpl\ntasks:\n  - {name: call, type: api, max_attempts: 2, "
        "rate_limit: {key: input.cust, limit: 1000, per: 1s, burst: 1000}}\n"
    )
    run = engine.run("tpl", {"cust": "b"}).id
    with agent_thread(engine, {"api": flaky}):
        wait_for(lambda: all(engine.state(w) == "succeeded" for w in (now, later, run)), 30, "all")
    assert tries == {now: 2, later: 2, run: 2}
    assert engine.status(run).tasks[0].rate_key == "b"
    assert all(":rb:" in k for k in rate_keys(engine))


def test_a_schedules_runs_take_their_key_from_their_input(engine: Engine) -> None:
    from engine.schedules import parse_schedule
    from engine.schedules.scheduler import Scheduler

    engine.put_template(
        "name: job\ntasks:\n  - {name: work, type: api, "
        "rate_limit: {key: input.schedule, limit: 1, per: 1h}}\n"
    )
    engine.put_schedule(parse_schedule({"name": "nightly", "template": "job", "every": "1h"}))
    shard = engine.keys.shard_of_schedule("nightly")
    now = int(engine.server_time() * 1000) - 1000  # due a second ago
    engine.redis.hset(shard.schedule("nightly"), mapping={"nt": now, "nx": now})
    engine.redis.zadd(shard.schedules_due, {"nightly": now})
    assert Scheduler(engine).run_due() == 1
    [wid] = engine.list_ids()
    assert engine.status(wid).tasks[0].rate_key == "nightly"


# -- agents racing one key ---------------------------------------------------------------------


@pytest.mark.slow
def test_agents_racing_one_key_never_beat_its_rate(engine: Engine, capsys: Any) -> None:
    limit, burst, n = 20, 3, 50
    wf = limited(limit=limit, per="1s", burst=burst, routed=True)
    other = [engine.push(wf, {"cust": f"other{k}"}) for k in range(10)]
    wids = [engine.push(wf, {"cust": "hot"}) for _ in range(n)]
    lock = threading.Lock()
    by_agent: Counter[str] = Counter()

    def work(task: Task) -> None:
        with lock:
            by_agent[threading.current_thread().name] += 1

    with (
        agent_thread(engine, {"api": work}, "r1", concurrency=4),
        agent_thread(engine, {"api": work}, "r2", concurrency=4),
        agent_thread(engine, {"api": work}, "r3", concurrency=4),
    ):
        wait_for(lambda: all(engine.state(w) == "succeeded" for w in wids + other), 60, "every run")
    # starts on Redis's clock (ms): any window holds at most burst + limit * its length
    starts = sorted(engine.status(w).tasks[0].started_at or 0 for w in wids)
    interval_ms = 1000 / limit
    for a in range(n):
        for b in range(a, n):
            span_ms = (starts[b] - starts[a]) * 1000
            assert b - a + 1 <= burst + (span_ms + 1) / interval_ms, (a, b, span_ms)
    achieved = (n - burst) / (starts[-1] - starts[0])
    with capsys.disabled():
        print(f"\nrate limit {limit}/s burst {burst}, 3 agents: achieved {achieved:.2f}/s")
    assert achieved <= limit * 1.01
    assert rate_keys(engine) == {k: v for k, v in rate_keys(engine).items() if ":rb:" in k}


# -- pause, cancel, cleanup ---------------------------------------------------------------------


def test_pause_cancel_and_cleanup_leave_no_throttled_task_behind(engine: Engine) -> None:
    wf = limited(limit=1, per="1h")
    wids = [engine.push(wf, {"cust": "a"}) for _ in range(4)]
    spread = [engine.push(wf, {"cust": f"b{k}"}) for k in range(2)]
    hand = Hand(engine)
    first = claim(engine, hand)  # one per bucket (per shard): the rest throttled
    assert rate_keys(engine)
    paused = [w for w in wids + spread if engine.status(w).tasks[0].state == "ready"]
    for w in paused:
        assert engine.pause(w) == 1
    assert all(":rb:" in k for k in rate_keys(engine))  # only the buckets, expiring
    for w in paused:
        assert engine.release(w) == 1
    assert any(":rq:" in k for k in rate_keys(engine))
    for w in paused:
        assert engine.cancel(w) == 1
    done(engine, hand, first)
    for w in wids + spread:
        engine.cleanup(w)
    left = rate_keys(engine)
    assert left and all(":rb:" in k and 0 < ttl <= 3_600_000 for k, ttl in left.items())
    assert engine.count() == 0


def test_an_idle_bucket_goes_when_it_is_full_again_and_then_starts_full(engine: Engine) -> None:
    hand = Hand(engine)
    # distinct keys, each run done and cleaned up: each bucket is kept exactly until its
    # tokens are all back (its t, the theoretical arrival time), not a moment longer
    slow = limited(limit=1, per="30s")
    wids = [engine.push(slow, {"cust": f"k{n}"}) for n in range(40)]
    done(engine, hand, claim(engine, hand))
    for w in wids:
        engine.cleanup(w)
    buckets = rate_keys(engine)
    assert len(buckets) == 40 and all(":rb:" in k for k in buckets)
    for key in buckets:
        t_us = int(engine.redis.hget(key, "t"))
        assert engine.redis.pexpiretime(key) == -(-t_us // 1000)  # the ms it is full again
        assert 0 < engine.redis.pttl(key) <= 30_000
    # a bucket emptied by a burst: gone once it refilled, and the next take starts full
    quick = limited(limit=2, per="1s", burst=3, routed=True)  # a token every 500 ms
    first = [engine.push(quick, {"cust": "a"}) for _ in range(3)]
    shard = engine.keys.shard_of(first[0])
    assert sorted(t.workflow_id for t in claim(engine, hand)) == sorted(first)
    bucket = shard.bucket("api", "a")
    assert engine.redis.pttl(bucket) > 0
    wait_for(lambda: not engine.redis.exists(bucket), timeout=60, what="the bucket refilled")
    again = [engine.push(quick, {"cust": "a"}) for _ in range(4)]
    reply = claim_reply(engine, hand, again[0])
    assert [t.workflow_id for t in reply] == again[:3]  # the whole burst at once: full
    assert reply.next_at_ms is not None  # and the fourth waits for a token


# -- on a Redis Cluster: per shard --------------------------------------------------------------


def test_buckets_are_per_shard_unless_runs_are_routed_by_the_key(engine: Engine) -> None:
    shards = engine.keys.shards
    wf = limited(limit=1, per="1h", burst=2)
    for _ in range(4 * shards):
        engine.push(wf, {"cust": "x"})
    hand = Hand(engine)
    got = claim(engine, hand)
    assert len(got) == 2 * shards  # each shard's bucket gives its burst: limit × shards
    routed = limited(limit=1, per="1h", burst=2, routed=True)  # runs go to hash(key)
    for _ in range(4 * shards):
        engine.push(routed, {"cust": "t"})
    assert len(claim(engine, hand)) == 2  # one shard, one bucket: exact


def test_rate_limits_on_redis_6_2(redis62: EmbeddedRedis) -> None:  # noqa: F811
    with Engine.connect(redis62.url) as engine:
        engine.redis.flushall()
        wf = limited(limit=2, per="1s", burst=2)
        wids = [engine.push(wf, {"cust": "a"}) for _ in range(3)]  # ZADD XX LT: 6.2's
        hand = Hand(engine)
        reply = claim_reply(engine, hand, wids[0])
        assert [t.workflow_id for t in reply] == wids[:2]
        assert reply.next_at_ms is not None and reply.now_ms is not None
        assert 499 <= reply.next_at_ms - reply.now_ms <= 501
        assert engine.pause(wids[2]) == 1 and engine.release(wids[2]) == 1
        assert engine.cancel(wids[2]) == 1
        assert all(":rb:" in k for k in rate_keys(engine))


# -- the command line and HTTP ------------------------------------------------------------------


@pytest.mark.same_on_cluster
def test_rate_limit_commands(engine: Engine, cli_env: dict[str, str], tmp_path: Path) -> None:
    r = cli("rate-limit", "put", "api", "--key", "input.cust", "--limit", "5", "--per", "1m",
            "--burst", "2", env=cli_env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "5 per 1m per input.cust, burst 2" in r.stdout
    r = cli("rate-limit", "list", "--json", env=cli_env)
    assert json.loads(r.stdout) == {
        "rate_limits": {"api": {"key": "input.cust", "limit": 5, "per": "1m", "burst": 2}}
    }
    before = snapshot(engine.redis)
    for args, says in (
        (("--limit", "0"), "limit must be a whole number from 1"),
        (("--limit", "3", "--burst", "0"), "burst must be a whole number from 1"),
        (("--limit", "3", "--per", "3x"), "per must be a period like 1s"),
    ):
        r = cli("rate-limit", "put", "db", "--key", "k", *args, env=cli_env)
        assert r.returncode == 2 and says in one_line_error(r)
    assert snapshot(engine.redis) == before
    # the deployment's limit applies to `redisflow push`, and a missing field is refused
    f = tmp_path / "wf.yaml"
    f.write_text("name: w\ntasks:\n  - {name: a, type: api}\n")
    r = cli("push", str(f), "--input", '{"nope": 1}', env=cli_env)
    assert r.returncode == 2 and "input has no field 'cust'" in one_line_error(r)
    assert snapshot(engine.redis) == before
    r = cli("push", str(f), "--input", '{"cust": "c1"}', env=cli_env)
    assert r.returncode == 0, r.stderr
    wid = r.stdout.split()[0] if r.stdout.split()[0].isdigit() else engine.list_ids()[0]
    assert engine.status(wid).tasks[0].rate_key == "c1"
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: w\ntasks:\n  - {name: a, rate_limit: {key: k, limit: 2, per: 1y}}\n")
    r = cli("push", str(bad), env=cli_env)
    assert r.returncode == 2 and one_line_error(r).count("per must be a period") == 1
    assert cli("rate-limit", "delete", "api", env=cli_env).returncode == 0
    r = cli("rate-limit", "delete", "api", env=cli_env)
    assert r.returncode != 0 and "no rate limit for task type 'api'" in one_line_error(r)


def test_http_refuses_a_bad_rate_limit_and_writes_nothing(
    engine: Engine,
    client: Any,  # noqa: F811
) -> None:
    def state() -> dict[str, Any]:  # less the HTTP API's own counters (rejected requests)
        return {k: v for k, v in snapshot(engine.redis).items() if not k.endswith(":http")}

    before = state()
    body = {"name": "w", "tasks": [{"name": "a", "rate_limit": {"key": "k", "limit": 0}}]}
    http = client()
    r = http.post("/v1/workflows", json=body)
    assert r.status_code == 400 and "limit must be a whole number" in r.json()["error"]
    r = http.put("/v1/templates/w", json=body)
    assert r.status_code == 400
    assert state() == before
    good = {"name": "w", "tasks": [{"name": "a", "rate_limit": {"key": "input.c", "limit": 1}}]}
    assert http.put("/v1/templates/w", json=good).status_code == 201
    after_put = state()
    r = http.post("/v1/templates/w/runs", json={"d": 1})
    assert r.status_code == 400 and "no field 'c'" in r.json()["error"]
    assert state() == after_put
    assert before != after_put


def test_rate_limits_over_http(engine: Engine, client: Any) -> None:  # noqa: F811
    http = client()
    body = {"key": "input.cust", "limit": 5, "per": "1m", "burst": 2}
    r = http.put("/v1/rate-limits/api", json=body)
    assert (r.status_code, r.json()) == (200, {"type": "api", **body})
    assert http.get("/v1/rate-limits").json() == {"rate_limits": {"api": body}}
    assert engine.rate_limits() == {"api": RateLimit("input.cust", 5, "1m", 2)}
    for bad, says in (
        ({"key": "k", "limit": 0}, "limit must be a whole number from 1"),
        ({"key": "k", "limit": 1, "per": "1y"}, "per must be a period like 1s"),
        ({"limit": 1}, "rate_limit needs a key"),
        ({"key": "k", "limit": 1, "speed": 2}, "unknown option(s) speed"),
    ):
        r = http.put("/v1/rate-limits/db", json=bad)
        assert r.status_code == 400 and says in r.json()["error"], r.json()
    assert list(engine.rate_limits()) == ["api"]
    assert http.delete("/v1/rate-limits/api").json() == {"removed": "api"}
    assert http.delete("/v1/rate-limits/api").status_code == 404
    assert engine.rate_limits() == {}


def test_no_rate_limit_no_cost() -> None:
    """The plain path: a definition without a rate limit has no "L" feature (so no step
    reads its fields), and claim.lua's only extra is a byte test per member."""
    from engine.store.scripts import script_commands

    wf = Workflow("plain")
    wf.task("a")
    assert "+" not in compile_workflow(wf).digest
    # what a bucket needs is in the agent's scripts, so in its ACL role
    assert script_commands("claim") >= {"PEXPIREAT", "PERSIST", "ZPOPMIN"}
