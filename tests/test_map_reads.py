"""Reading a map's items: status counts, item pages, outputs, and the CLI's pages."""

from __future__ import annotations

import json
from typing import Any

import pytest
from engine_helpers import Hand, assert_stats_agree, cli, one_line_error, run_agent

from engine import Engine, NotFoundError, Task, Workflow


def mapped(n: int, window: int = 1000, tolerate: int | str = 0) -> tuple[Workflow, Any]:
    """split → count (a map over split["sections"]) → total, and a handler that fails
    every item whose element ends in 1."""
    wf = Workflow("maps")
    split = wf.task("split")
    count = wf.task("count", map=split["sections"], concurrency=window, tolerate=tolerate)
    wf.task("total", after=[count])

    def handler(t: Task) -> Any:
        if t.name == "split":
            return {"sections": [f"s{k}" for k in range(n)]}
        if t.name == "count":
            if t.item.endswith("1"):
                raise ValueError(f"cannot count {t.item}")
            return len(t.item)
        return sum(x or 0 for x in t.parents["count"])

    return wf, handler


def test_status_items_and_outputs_of_a_map_with_tolerated_failures(engine: Engine) -> None:
    wf, handler = mapped(25, window=4, tolerate=3)
    wid = engine.push(wf)
    run_agent(engine, {"": handler})
    st = engine.status(wid)
    assert st.state == "succeeded"
    assert st.task("split").items is None and st.task("total").items is None
    assert st.task("count").items == {
        "waiting": 0,
        "ready": 0,
        "running": 0,
        "succeeded": 22,
        "failed": 3,
        "cancelled": 0,
        "total": 25,
    }
    assert_stats_agree(engine)

    page = engine.items(wid, "count", offset=10, limit=3)
    assert [(i.index, i.state) for i in page] == [
        (10, "succeeded"),
        (11, "failed"),
        (12, "succeeded"),
    ]
    ok, bad = page[0], page[1]
    assert ok.output == 3 and ok.element is None and ok.agent == "a1" and ok.attempts == 1
    assert ok.started_at is not None and ok.finished_at is not None
    assert bad.element == "s11" and bad.output is None and bad.failures == 1
    assert bad.error is not None and "cannot count s11" in bad.error
    assert len(engine.items(wid, "count", offset=20, limit=50)) == 5  # the last page is short

    failed = engine.items(wid, "count", state="failed")
    assert [i.index for i in failed] == [1, 11, 21]
    assert [i.index for i in engine.items(wid, "count", offset=1, limit=1, state="failed")] == [11]
    done = engine.items(wid, "count", offset=1, limit=2, state="succeeded")
    assert [i.index for i in done] == [2, 3]

    outputs = engine.map_outputs(wid, "count", 0, 1000)
    assert outputs == engine.status(wid).task("count").output
    assert engine.map_outputs(wid, "count", 10, 3) == [3, None, 3]
    assert engine.map_outputs(wid, "count", 30, 5) == []

    with pytest.raises(NotFoundError, match="not a map"):
        engine.items(wid, "split")
    with pytest.raises(NotFoundError, match="no task named"):
        engine.items(wid, "ghost")


def test_items_while_the_map_runs(engine: Engine) -> None:
    wf, _ = mapped(5, window=2)
    wid = engine.push(wf)
    hand = Hand(engine)
    hand.succeed(hand.claim_one(), {"sections": ["a", "b", "c1", "d", "e"]})
    items = engine.status(wid).task("count").items
    assert items == {**dict.fromkeys(("running", "succeeded", "failed", "cancelled"), 0),
                     "waiting": 3, "ready": 2, "total": 5}  # fmt: skip
    page = engine.items(wid, "count")
    assert [i.state for i in page] == ["ready", "ready", "waiting", "waiting", "waiting"]
    assert [i.element for i in page] == ["a", "b", "c1", "d", "e"]  # pending ones from the list
    assert [i.element for i in engine.items(wid, "count", offset=3, limit=1)] == ["d"]
    assert_stats_agree(engine)

    a, b = hand.claim("", 2)
    assert engine.status(wid).task("count").items["running"] == 2  # type: ignore[index]
    assert [i.index for i in engine.items(wid, "count", state="running")] == [0, 1]
    hand.succeed(a, 1)
    hand.fail(b, "no")
    items = engine.status(wid).task("count").items
    assert items is not None
    assert (items["succeeded"], items["failed"], items["ready"], items["waiting"]) == (1, 1, 2, 1)
    assert [i.index for i in engine.items(wid, "count", state="waiting")] == [4]
    assert [i.index for i in engine.items(wid, "count", state="ready")] == [2, 3]
    assert_stats_agree(engine)

    engine.cancel(wid)
    items = engine.status(wid).task("count").items
    assert items is not None
    assert (items["cancelled"], items["ready"], items["waiting"]) == (3, 0, 0)
    assert [i.state for i in engine.items(wid, "count")][2:] == ["cancelled"] * 3
    assert_stats_agree(engine)


def test_cli_pages_a_maps_items(engine: Engine, cli_env: dict[str, str]) -> None:
    wf, handler = mapped(12, tolerate=5)
    wid = engine.push(wf)
    run_agent(engine, {"": handler})

    r = cli("status", wid, env=cli_env)
    assert r.returncode == 0, r.stderr
    [line] = [x for x in r.stdout.splitlines() if x.startswith("count")]
    assert "10 ✔ 2 ✖ of 12" in line

    r = cli("status", wid, "--task", "count", "--limit", "5", "--page", "3", env=cli_env)
    assert r.returncode == 0, r.stderr
    assert "page 3 of 3 (12 items)" in r.stdout
    rows = [x.split()[0] for x in r.stdout.splitlines()[2:-1]]
    assert rows == ["10", "11"]

    r = cli("status", wid, "--task", "count", "--failed", "--json", env=cli_env)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["total"] == 2 and got["counts"]["failed"] == 2
    assert [(i["index"], i["state"], i["element"]) for i in got["items"]] == [
        (1, "failed", "s1"),
        (11, "failed", "s11"),
    ]

    r = cli("status", wid, "--task", "split", env=cli_env)
    assert r.returncode == 2 and "is not a map" in one_line_error(r)
    r = cli("status", wid, "--failed", env=cli_env)
    assert r.returncode == 2 and "give --task" in one_line_error(r)


@pytest.mark.slow
def test_map_outputs_pages_a_map_whose_output_is_a_handle(engine: Engine) -> None:
    n = 10_001  # past what a map's output holds inline
    wf = Workflow("wide")
    split = wf.task("split")
    wf.task("double", map=split, concurrency=2000)

    def handler(t: Task) -> Any:
        return list(range(n)) if t.name == "split" else 2 * t.item

    wid = engine.push(wf)
    run_agent(engine, {"": handler}, concurrency=64)
    st = engine.status(wid)
    assert st.task("double").output == {"map": 1, "items": n, "workflow": int(wid)}
    assert st.task("double").items["succeeded"] == n  # type: ignore[index]
    assert engine.map_outputs(wid, "double", 0, 3) == [0, 2, 4]
    assert engine.map_outputs(wid, "double", n - 2, 100) == [2 * (n - 2), 2 * (n - 1)]
    assert_stats_agree(engine)
