"""Random sequences of every operation (hypothesis stateful testing), invariants after each.

Agents are driven step by step (claim, succeed, fail, lose the lease, restart) while an
operator pauses, releases, cancels, retries and cleans up. After every step the stored
state must be self-consistent: counters, per-workflow tallies, queue and backoff
membership, parents' countdowns and the agents' running sets.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

import pytest
from cluster_support import flush
from engine_helpers import Hand, assert_stats_agree, scan_keys
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from engine import Engine, NotFoundError, StateError, Task, Workflow
from engine.core.model import decode_json
from engine.core.rules import RULES, counts, decide, workflow_result
from engine.store.codec import RULE_BASE
from engine.store.codec import parse_record as task_record
from engine.store.keys import ShardKeys

AGENTS = ("A", "B")
TYPES = ("", "t")


@st.composite
def small_dags(draw: st.DrawFn) -> Workflow:
    n = draw(st.integers(1, 6))
    wf = Workflow("wf", retry_backoff=0.0)
    for i in range(n):
        parents = sorted(draw(st.sets(st.integers(0, i - 1), max_size=2))) if i else []
        rule = draw(st.sampled_from([None, None, None, *RULES[1:], "finally"])) if parents else None
        wf.task(
            f"t{i}",
            payload=i,
            type=draw(st.sampled_from(TYPES)),
            priority=draw(st.integers(0, 2)),
            after=[f"t{p}" for p in parents],
            max_attempts=draw(st.integers(1, 2)),
            trigger=None if rule == "finally" else rule,
            finally_=rule == "finally",
        )
    return wf


class EngineMachine(RuleBasedStateMachine):
    """The engine under random operations; the model is what the test knows it holds."""

    url: str  # set by the fixture below

    def __init__(self) -> None:
        super().__init__()
        flush(self.url)  # every master of a cluster
        self.engine = Engine.connect(self.url)
        self.hands = {a: Hand(self.engine, a) for a in AGENTS}
        self.held: dict[str, list[Task]] = {a: [] for a in AGENTS}
        self.stale: list[tuple[str, Task]] = []  # outcomes a zombie may still report
        self.wids: list[str] = []

    def teardown(self) -> None:
        self.engine.close()

    # -- helpers --------------------------------------------------------------------

    def _state(self, wid: str) -> str | None:
        return self.engine.redis.hget(self.engine.keys.shard_of(wid).workflow(wid), "st")

    def _gate_full(self, wid: str) -> bool:
        """Whether the run's concurrency key (if any) is at its limit."""
        shard = self.engine.keys.shard_of(wid)
        raw = self.engine.redis.hget(shard.workflow(wid), "g")
        if raw is None:
            return False
        return any(
            int(self.engine.redis.hget(shard.gates, g) or 0) >= limit
            for g, limit in json.loads(raw)
        )

    def _steer(self, op: str, wid: str, allowed: set[str]) -> None:
        before = self._state(wid)
        full = self._gate_full(wid)
        try:
            getattr(self.engine, op)(wid)
        except NotFoundError:
            assert before is None
        except StateError as e:
            if op == "retry" and before in allowed:
                assert full and "at its limit" in str(e), (op, before, str(e))
                return
            assert before is not None and before not in allowed, (op, before)
        else:
            assert before in allowed, (op, before)

    # -- rules ------------------------------------------------------------------------

    @rule(wf=small_dags())
    def push(self, wf: Workflow) -> None:
        self.wids.append(self.engine.push(wf))

    @rule(wf=small_dags(), limit=st.integers(1, 2), key=st.sampled_from(["x", "y"]))
    def push_gated(self, wf: Workflow, limit: int, key: str) -> None:
        """A run under a concurrency key: over the limit it waits queued."""
        wf.name = f"gated{limit}"  # one limit per workflow name, as a file would say
        wf.concurrency = {"key": "k", "limit": limit}
        self.wids.append(self.engine.push(wf, {"k": key}))

    @rule(
        agent=st.sampled_from(AGENTS),
        task_type=st.sampled_from([*TYPES, TYPES]),
        count=st.integers(1, 3),
    )
    def claim(self, agent: str, task_type: str | tuple[str, ...], count: int) -> None:
        try:
            tasks = self.hands[agent].claim(task_type, count)
        except Exception as e:  # noqa: BLE001 - only the lease error is expected
            assert "RFLEASE" in str(e)
            return
        assert len(tasks) <= count
        self.held[agent].extend(tasks)

    @precondition(lambda self: any(self.held.values()))
    @rule(data=st.data(), ok=st.booleans())
    def report(self, data: st.DataObject, ok: bool) -> None:
        agent = data.draw(st.sampled_from([a for a in AGENTS if self.held[a]]))
        task = data.draw(st.sampled_from(self.held[agent]))
        self.held[agent].remove(task)
        key = self.engine.keys.shard_of(task.workflow_id).workflow(task.workflow_id)
        rec = expand({str(task.index): self.engine.redis.hget(key, str(task.index))})
        s, a, g = (rec.get(f"{task.index}{f}") for f in "sag")
        expected = int(s == "running" and a == str(task.attempt) and g == agent)
        hand = self.hands[agent]
        got = hand.succeed(task, task.name) if ok else hand.fail(task, "no")
        assert got == expected

    @precondition(lambda self: bool(self.stale))
    @rule(data=st.data())
    def zombie_reports(self, data: st.DataObject) -> None:
        agent, task = data.draw(st.sampled_from(self.stale))
        self.stale.remove((agent, task))
        assert self.hands[agent].succeed(task, "zombie") == 0

    @rule(agent=st.sampled_from(AGENTS))
    def lose_lease(self, agent: str) -> None:
        self.hands[agent].expire()
        self.engine.maintain(max_lost=2)
        # Tasks it held were handed on: reports of them must be rejected from now on.
        self.stale.extend((agent, t) for t in self.held[agent])
        self.held[agent] = []
        self.hands[agent].register()

    @rule(agent=st.sampled_from(AGENTS))
    def restart(self, agent: str) -> None:
        taken = self.hands[agent].register()
        self.stale.extend((agent, t) for t in self.held[agent])
        assert {(t.workflow_id, t.index) for t in taken} <= {
            (t.workflow_id, t.index) for t in self.held[agent]
        }
        self.held[agent] = taken

    @rule(agent=st.sampled_from(AGENTS))
    def stop(self, agent: str) -> None:
        self.hands[agent].stop()
        self.stale.extend((agent, t) for t in self.held[agent])
        self.held[agent] = []
        self.hands[agent].register()

    @rule(agent=st.sampled_from(AGENTS))
    def stop_before_starting(self, agent: str) -> None:
        """The agent stops with tasks it never started: it will never report them."""
        self.hands[agent].stop(unstarted=self.held[agent])
        self.held[agent] = []
        self.hands[agent].register()

    @rule()
    def maintain(self) -> None:
        self.engine.maintain(max_lost=2)

    @precondition(lambda self: bool(self.wids))
    @rule(data=st.data(), op=st.sampled_from(["pause", "release", "cancel", "retry", "cleanup"]))
    def steer(self, data: st.DataObject, op: str) -> None:
        wid = data.draw(st.sampled_from(self.wids))
        allowed = {
            "pause": {"running"},
            "release": {"paused"},
            "cancel": {"running", "paused", "queued"},
            "retry": {"failed"},
            "cleanup": {"succeeded", "failed", "cancelled"},
        }[op]
        self._steer(op, wid, allowed)
        if op == "cleanup" and self._state(wid) is None:
            self.wids.remove(wid)

    @precondition(lambda self: bool(self.wids))
    @rule(data=st.data())
    def retry_one_task(self, data: st.DataObject) -> None:
        wid = data.draw(st.sampled_from(self.wids))
        status = self.engine.status(wid)
        task = data.draw(st.sampled_from(status.tasks))
        full = self._gate_full(wid)
        try:
            self.engine.retry(wid, tasks=[task.name])
        except StateError as e:
            if status.state == "failed" and task.state == "failed":
                assert full and "at its limit" in str(e)
                return
            assert task.state != "failed" or status.state not in ("running", "paused", "failed")
        else:
            assert task.state == "failed"
            assert status.state in ("running", "paused", "failed")

    # -- invariants -------------------------------------------------------------------

    @invariant()
    def counters_agree(self) -> None:
        assert_stats_agree(self.engine)

    @invariant()
    def gates_agree(self) -> None:
        """Each concurrency key counts exactly its running (or paused) runs, never more than
        its limit; a queued run waits in its key's queue, and only while the key is full."""
        r = self.engine.redis
        for shard in self.engine.keys.all_shards():  # a gate lives on one shard
            holders: Counter[str] = Counter()
            waiting: dict[str, set[str]] = {}
            limits: dict[str, int] = {}
            for wid in r.zrange(shard.all, 0, -1):
                st_, raw = r.hmget(shard.workflow(wid), ["st", "g"])
                if raw is None:
                    continue
                ((g, limit),) = json.loads(raw)
                limits[g] = limit
                if st_ in ("running", "paused"):
                    holders[g] += 1
                elif st_ == "queued":
                    waiting.setdefault(g, set()).add(wid)
            counted = {g: int(n) for g, n in r.hgetall(shard.gates).items()}
            assert counted == {g: n for g, n in holders.items() if n}
            for g, n in holders.items():
                assert n <= limits[g], (g, n)
            for g in limits:
                queue = set(r.zrange(shard.gate_queue(g), 0, -1))
                assert queue == waiting.get(g, set()), (g, queue, waiting.get(g))
                if queue:
                    assert holders[g] >= limits[g], (g, "a run waits while its key has room")

    @invariant()
    def every_workflow_is_consistent(self) -> None:
        r = self.engine.redis
        for shard in self.engine.keys.all_shards():
            self._shard_is_consistent(r, shard)

    def _shard_is_consistent(self, r: Any, shard: ShardKeys) -> None:
        """One shard's workflows, queues, running sets and definitions agree."""
        queued = {m for t in TYPES for m in r.zrange(shard.queue(t), 0, -1)}
        delayed = set(r.zrange(shard.delayed, 0, -1))
        running_sets = {a: r.smembers(shard.running_of(a)) for a in AGENTS}
        live = dict(r.zrange(shard.agents_live, 0, -1, withscores=True))
        seen_members: set[str] = set()
        uses: Counter[str] = Counter()
        for wid in r.zrange(shard.all, 0, -1):
            raw = r.hgetall(shard.workflow(wid))
            uses[raw["d"]] += 1
            raw = expand({**r.hgetall(shard.definition(raw["d"])), **raw})
            wst, n = raw["st"], int(raw["n"])
            tally: Counter[str] = Counter(raw.get(f"{i}s", "waiting") for i in range(n))
            assert int(raw["ok"]) == tally["succeeded"]
            assert int(raw.get("bad", 0)) == tally["failed"]
            assert int(raw.get("skip", 0)) == tally["skipped"]
            assert int(raw.get("uf", 0)) == tally["upstream_failed"]
            unfinished = tally["waiting"] + tally["ready"] + tally["running"]
            assert int(raw.get("left", 0)) == unfinished, (wid, raw)  # absent: 0
            assert r.zscore(shard.by_state(wst), wid) is not None
            if wst in ("running", "paused"):
                assert unfinished > 0
            elif wst == "queued":
                assert unfinished > 0 and tally["running"] == 0
            elif wst in ("succeeded", "failed"):
                assert unfinished == 0
                ups = [[int(p) for p in raw.get(f"{i}U", "").split(",") if p] for i in range(n)]
                rules = [raw.get(f"{i}G", "all_success") for i in range(n)]
                states = [raw.get(f"{i}s", "waiting") for i in range(n)]
                assert workflow_result(states, ups, rules)[0] == wst, (wid, raw)
            else:
                assert tally["waiting"] == tally["ready"] == 0
            for i in range(n):
                s = raw.get(f"{i}s", "waiting")
                member = f"{wid}:{i}"
                seen_members.add(member)
                in_queue, in_delay = member in queued, member in delayed
                if s == "ready" and wst == "running":
                    assert in_queue != in_delay, (member, in_queue, in_delay)
                elif s == "ready" and wst == "paused":
                    assert not in_queue
                else:
                    assert not in_queue and not in_delay, (member, s, wst)
                parents = [
                    raw.get(f"{p}s", "waiting") for p in raw.get(f"{i}U", "").split(",") if p
                ]
                rule = raw.get(f"{i}G", "all_success")
                ps, pf, pk = counts(parents)
                verdict = decide(rule, len(parents), ps, pf, pk) if parents else "run"
                if s == "waiting":
                    assert verdict is None, (member, verdict, raw)
                    # the parents' ends so far are counted (the default rule: one parent
                    # needs no count, and a failure would have decided it)
                    want = ps + RULE_BASE * pk
                    if f"{i}G" in raw:
                        want += RULE_BASE**2 * pf
                    elif len(parents) == 1:
                        want = 0
                    assert int(raw.get(f"{i}w", 0)) == want, (member, raw)
                elif s in ("skipped", "upstream_failed"):
                    assert verdict == s, (member, verdict, raw)  # else it could run
                elif s != "cancelled":
                    # it ran or may run now: its rule let it, unless a parent it did not
                    # wait for was retried since
                    assert verdict == "run" or "ready" in parents or "waiting" in parents, (
                        member,
                        verdict,
                        raw,
                    )
                # every failure and every lost lease ended an attempt that was started
                tried, failed, lost = (int(raw.get(f"{i}{f}", 0)) for f in "afl")
                assert tried >= failed + lost, (member, raw)
                holder = raw.get(f"{i}g") if s == "running" else None
                for a in AGENTS:
                    assert (member in running_sets[a]) == (holder == a), (member, a, s)
                if holder is not None and holder in AGENTS:
                    assert holder in live  # a running task's agent holds a lease
                if s == "succeeded" and raw.get(f"{i}o") is not None:
                    assert decode_json(raw[f"{i}o"]) == raw[f"{i}N"]
        # every stored definition is used, and knows by how many workflows
        stored = {k.rsplit(":", 1)[1] for k in scan_keys(r, match=shard.definition("*"))}
        assert stored == set(uses)
        for digest, used in uses.items():
            assert int(r.hget(shard.definition(digest), "r")) == used
        # nothing queued, delayed or held that does not belong to a stored task
        for member in queued | delayed | set().union(*running_sets.values()):
            assert member in seen_members, member


def expand(raw: dict[str, str | None]) -> dict[str, str]:
    """Each task's record ("3": state|attempts|ready|begin|done|agent) as one field per
    part ("3s", "3a", "3q", "3b", "3d", "3g"; empty parts left out)."""
    out: dict[str, str] = {}
    for key, value in raw.items():
        if value is None:
            continue
        if key.isdigit():
            for part, v in zip("saqbdg", task_record(value), strict=True):
                if v:
                    out[f"{key}{part}"] = v
        else:
            out[key] = value
    return out


@pytest.fixture()
def machine_url(redis_url: str) -> str:
    EngineMachine.url = redis_url
    return redis_url


@pytest.mark.slow
def test_random_operations_keep_the_state_consistent(machine_url: str) -> None:
    run_state_machine_as_test(
        EngineMachine,
        settings=settings(
            # REDISFLOW_STATEFUL_EXAMPLES=2000 for a deeper search than the suite's default
            max_examples=int(os.environ.get("REDISFLOW_STATEFUL_EXAMPLES", "60")),
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
