"""Random DAGs (hypothesis) run by real agents on a real Redis."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

import pytest
from engine_helpers import assert_stats_agree, run_agent
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Engine, Task, TaskFailed, Workflow

TYPES = ("", "b")


@dataclass
class Dag:
    """A random DAG: ``parents[i]`` are the indexes task ``t<i>`` runs after."""

    parents: list[list[int]]
    order: list[int]  # the order tasks are declared in (not necessarily topological)
    types: list[str]
    priorities: list[int]

    def workflow(self, name: str = "dag", **kw: object) -> Workflow:
        wf = Workflow(name, retry_backoff=0.0)
        for i in self.order:
            wf.task(
                f"t{i}",
                payload=i,
                type=self.types[i],
                priority=self.priorities[i],
                after=[f"t{p}" for p in self.parents[i]],
                **kw,  # type: ignore[arg-type]
            )
        return wf

    def descendants(self, i: int) -> set[int]:
        out: set[int] = set()
        frontier = [i]
        while frontier:
            j = frontier.pop()
            for c, ps in enumerate(self.parents):
                if j in ps and c not in out:
                    out.add(c)
                    frontier.append(c)
        return out


@st.composite
def dags(draw: st.DrawFn, max_tasks: int = 12) -> Dag:
    n = draw(st.integers(1, max_tasks))
    parents = [
        sorted(draw(st.sets(st.integers(0, i - 1), max_size=3))) if i else [] for i in range(n)
    ]
    order = draw(st.permutations(range(n)))
    types = [draw(st.sampled_from(TYPES)) for _ in range(n)]
    priorities = [draw(st.integers(-2, 2)) for _ in range(n)]
    return Dag(parents, list(order), types, priorities)


class Recorder:
    """A handler that checks, as each task starts, that all its parents already finished."""

    def __init__(self, dags: dict[str, Dag], fail: set[tuple[str, str]] = frozenset()) -> None:
        self.dags = dags
        self.fail = fail
        self.lock = threading.Lock()
        self.finished: set[tuple[str, str]] = set()
        self.runs: Counter[tuple[str, str]] = Counter()
        self.violations: list[str] = []

    def __call__(self, task: Task) -> object:
        me = (task.workflow_id, task.name)
        dag = self.dags[task.workflow_id]
        i = int(task.name[1:])
        with self.lock:
            self.runs[me] += 1
            for p in dag.parents[i]:
                if (task.workflow_id, f"t{p}") not in self.finished:
                    self.violations.append(f"{me} started before parent t{p} finished")
            expected = {f"t{p}": {"i": p, "wid": task.workflow_id} for p in dag.parents[i]}
            if task.parents != expected:
                self.violations.append(f"{me} saw parents {task.parents}, not {expected}")
            if task.payload != i:
                self.violations.append(f"{me} got payload {task.payload}")
        if me in self.fail:
            raise TaskFailed(f"{task.name} fails on purpose")
        with self.lock:
            self.finished.add(me)
        return {"i": i, "wid": task.workflow_id}


@pytest.fixture(scope="module")
def dag_engine(session_url: str):
    """One engine for every example; each example flushes the database first."""
    eng = Engine.connect(session_url)
    yield eng
    eng.redis.flushall()
    eng.close()


@settings(max_examples=30, deadline=None)
@given(graphs=st.lists(dags(), min_size=1, max_size=3), concurrency=st.sampled_from([1, 3]))
def test_random_dags_run_in_order_once(dag_engine: Engine, graphs: list[Dag], concurrency: int):
    engine = dag_engine
    engine.redis.flushall()
    ids = engine.push_many([g.workflow(f"dag{k}") for k, g in enumerate(graphs)])
    rec = Recorder(dict(zip(ids, graphs, strict=True)))
    handlers = {t: rec for t in TYPES}
    run_agent(engine, handlers, concurrency=concurrency)
    assert rec.violations == []
    expected = {(wid, f"t{i}") for wid, g in zip(ids, graphs, strict=True) for i in g.order}
    assert set(rec.runs) == expected
    assert set(rec.runs.values()) == {1}
    for wid, g in zip(ids, graphs, strict=True):
        status = engine.status(wid)
        assert status.state == "succeeded"
        assert status.succeeded == status.total == len(g.order)
        assert all(t.attempts == 1 and t.state == "succeeded" for t in status.tasks)
        assert status.task("t0").output == {"i": 0, "wid": wid}
    assert_stats_agree(engine)
    stats = engine.stats()
    assert stats.tasks_pushed == sum(len(g.order) for g in graphs)
    assert stats.workflows_pushed == len(graphs)
    assert sum(stats.queued.values()) == 0


@settings(max_examples=25, deadline=None)
@given(graph=dags(), data=st.data())
def test_a_failing_task_stops_exactly_its_descendants(dag_engine: Engine, graph: Dag, data):
    engine = dag_engine
    engine.redis.flushall()
    bad = data.draw(st.sampled_from(graph.order), label="failing task")
    wid = engine.push(graph.workflow())
    rec = Recorder({wid: graph}, fail={(wid, f"t{bad}")})
    run_agent(engine, {t: rec for t in TYPES})
    stopped = graph.descendants(bad)
    status = engine.status(wid)
    assert rec.violations == []
    assert status.state == "failed"
    for t in status.tasks:
        i = int(t.name[1:])
        if i == bad:
            assert (t.state, t.attempts, t.failures) == ("failed", 1, 1)
            assert t.error == f"t{bad} fails on purpose"
        elif i in stopped:
            assert t.state == "upstream_failed" and t.attempts == 0
        else:  # independent branches keep running to the end
            assert t.state == "succeeded" and rec.runs[(wid, t.name)] == 1
    assert (status.failed, status.upstream_failed, status.skipped) == (1, len(stopped), 0)
    assert status.succeeded == len(graph.order) - 1 - len(stopped)
    assert_stats_agree(engine)
