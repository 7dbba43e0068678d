"""What a run's hash keeps of itself, and runs stored by an earlier release.

A run named as its definition's first run keeps no name field; a finished run keeps its
finish as ms after its creation and no count of tasks left. Every read (status, lists,
filters, counts, cleanup) sees what it saw when each run held its own.
"""

from __future__ import annotations

from engine_helpers import assert_stats_agree, run_agent

from engine import Engine, Task, Workflow
from engine.store.codec import D_RUN_NAME, F_AT_END, F_DIGEST


def two_steps(name: str) -> Workflow:
    wf = Workflow(name)
    a = wf.task("a", payload="A")
    wf.task("b", payload="B", after=[a])
    return wf


def ok(task: Task) -> str:
    return task.name


def stored(engine: Engine, wid: str) -> dict[str, str]:
    return engine.redis.hgetall(engine.keys.shard_of(wid).workflow(wid))


def definition_of(engine: Engine, wid: str) -> str:
    return engine.keys.shard_of(wid).definition(stored(engine, wid)[F_DIGEST])


def names_kept(engine: Engine, wid: str) -> tuple[str | None, str | None]:
    """A run's own name field and its (shard's) definition's run name."""
    own = stored(engine, wid).get("name")
    return own, engine.redis.hget(definition_of(engine, wid), D_RUN_NAME)


def newest_first(ids: list[str]) -> list[str]:
    return sorted(ids, key=int, reverse=True)


def test_a_run_named_as_its_definition_keeps_no_name_of_its_own(engine: Engine) -> None:
    alpha = engine.push_many([two_steps("alpha")] * 2)
    beta = engine.push(two_steps("beta"))  # the same tasks: the same definition
    assert len({stored(engine, w)[F_DIGEST] for w in [*alpha, beta]}) == 1
    for wid, name in ((alpha[0], "alpha"), (alpha[1], "alpha"), (beta, "beta")):
        own, kept = names_kept(engine, wid)  # its definition's first run named it
        assert (own or kept) == name and (own is None) == (kept == name)
    if engine.keys.shards == 1:  # one definition, stored with the first run
        assert [names_kept(engine, w) for w in [*alpha, beta]] == [
            (None, "alpha"), (None, "alpha"), ("beta", "alpha"),
        ]  # fmt: skip
    run_agent(engine, {"": ok})
    for wid, name in ((alpha[0], "alpha"), (alpha[1], "alpha"), (beta, "beta")):
        assert engine.status(wid).name == name
    names = {alpha[0]: "alpha", alpha[1]: "alpha", beta: "beta"}
    assert [(s.id, s.name) for s in engine.list()] == [
        (w, names[w]) for w in newest_first([*alpha, beta])
    ]
    assert engine.list_ids(name="alpha") == newest_first(alpha)
    assert engine.list_ids(state="succeeded", name="beta") == [beta]
    assert engine.count(name="alpha") == 2 and engine.count(state="succeeded", name="beta") == 1
    assert dict(engine.names()) == {"alpha": 2, "beta": 1}
    for wid in [*alpha, beta]:
        engine.cleanup(wid)
    assert engine.names() == [] and engine.list() == []
    assert_stats_agree(engine)


def test_a_template_s_runs_filter_by_a_name_their_definition_holds(engine: Engine) -> None:
    engine.put_template("name: nightly\ntasks:\n  - {name: a}\n  - {name: b, after: [a]}\n")
    runs = [engine.run("nightly").id for _ in range(3)]
    assert not any("name" in stored(engine, w) for w in runs)
    assert engine.list_ids(template="nightly", name="nightly") == newest_first(runs)
    assert engine.list_ids(template="nightly", name="other") == []
    assert engine.count(template="nightly", name="nightly") == 3
    now = engine.server_time()
    assert engine.list_ids(
        template="nightly", name="nightly", created_after=now - 60
    ) == newest_first(runs)


def test_a_definition_stored_again_under_another_name_names_its_new_runs(
    engine: Engine,
) -> None:
    first = engine.push(two_steps("alpha"))
    run_agent(engine, {"": ok})
    assert engine.status(first).name == "alpha"  # its definition now known to this client
    engine.cleanup(first)  # the definition's last run: it goes too
    second = engine.push(two_steps("gamma"))
    assert "name" not in stored(engine, second)
    assert engine.status(second).name == "gamma"
    assert [s.name for s in engine.list()] == ["gamma"]


def test_a_finished_run_keeps_its_finish_after_its_creation_and_no_tasks_left(
    engine: Engine,
) -> None:
    wid = engine.push(two_steps("alpha"))
    run_agent(engine, {"": ok})
    raw = stored(engine, wid)
    assert "left" not in raw and "ft" not in raw
    st = engine.status(wid)
    assert st.finished_at == (int(raw["ct"]) + int(raw["fd"])) / 1000
    assert st.finished_at >= st.created_at
    assert engine.summaries([wid])[0].finished_at == st.finished_at


def test_an_earlier_release_s_run_reads_as_before(engine: Engine) -> None:
    # its own name, its finish in epoch ms (ft), `left` 0, a definition with no run name
    wid = engine.push(two_steps("alpha"))
    run_agent(engine, {"": ok})
    key = engine.keys.shard_of(wid).workflow(wid)
    raw = stored(engine, wid)
    finished = int(raw["ct"]) + int(raw["fd"])
    engine.redis.hdel(key, "fd")
    engine.redis.hset(key, mapping={"name": "alpha", "ft": finished, "left": 0})
    for shard in engine.keys.all_shards():  # every shard's copy, as an earlier release's
        engine.redis.hdel(shard.definition(raw[F_DIGEST]), D_RUN_NAME)
    fresh = Engine.connect(engine.url)  # no definition known from before
    try:
        st = fresh.status(wid)
        assert (st.name, st.finished_at) == ("alpha", finished / 1000)
        summary = fresh.summaries([wid])[0]
        assert (summary.name, summary.finished_at) == ("alpha", finished / 1000)
        assert fresh.list_ids(template=None, name="alpha") == [wid]
        later = fresh.push(two_steps("alpha"))
        own, kept = names_kept(fresh, later)
        if kept is None:  # its definition names no runs: it keeps its own
            assert own == "alpha"
        else:  # a shard the definition was not on: stored anew, named by this run
            assert (own, kept) == (None, "alpha")
        assert fresh.status(later).name == "alpha"
        fresh.cleanup(wid)
        assert fresh.names() == [("alpha", 1)]
    finally:
        fresh.close()


def test_a_run_says_which_fields_its_end_reads(engine: Engine) -> None:
    # F_AT_END: "" for a plain run (its end reads none of them), a letter per field it
    # has; a retention set while it runs adds its letter, and its end arms it
    plain = engine.push(two_steps("alpha"))
    retained = two_steps("beta")
    retained.ttl = 60
    kept = engine.push(retained)
    later = engine.push(two_steps("gamma"))
    assert (stored(engine, plain)[F_AT_END], stored(engine, kept)[F_AT_END]) == ("", "t")
    assert engine.expire(later, 30) is None  # not finished: kept for its end
    assert stored(engine, later)[F_AT_END] == "t"
    engine.expire(kept, 90)
    assert stored(engine, kept)[F_AT_END] == "t"  # once
    run_agent(engine, {"": ok})
    expiring = {w: engine.redis.zscore(engine.keys.shard_of(w).expire, w) for w in (kept, later)}
    assert all(expiring.values())
    assert engine.redis.zscore(engine.keys.shard_of(plain).expire, plain) is None


def test_an_earlier_release_s_run_without_the_mark_reads_its_end_fields(engine: Engine) -> None:
    # no F_AT_END: its end reads every field it may have (here its own retention)
    wid = engine.push(two_steps("alpha"))
    key = engine.keys.shard_of(wid).workflow(wid)
    engine.redis.hdel(key, F_AT_END)
    engine.redis.hset(key, "tl", 60_000)
    run_agent(engine, {"": ok})
    assert engine.status(wid).state == "succeeded"
    assert engine.redis.zscore(engine.keys.shard_of(wid).expire, wid)
