"""``--until-idle``: an agent ends once nothing it serves can come from the work it sees,
maps' items and their steps included (the steps manager configs), on a real Redis."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from engine_helpers import AGENT_DEFAULTS, run_agent

from engine import Agent, Engine, Task
from engine.spec.loader import load_file

DEMOS = Path(__file__).resolve().parent.parent / "demos"
BOOK = ["book-split", "segment-word-counts", "sum-splits", "store-title"]


def left(engine: Engine, *types: str) -> bool:
    """Whether an agent serving ``types`` would find nothing left."""
    return engine.store.reads.nothing_left(engine.keys.all_shards(), types)


def work(task: Task) -> Any:
    if task.name == "book-split":
        return {"sections": ["a b", "b c", "c"]}
    if task.step is not None or task.item_index is not None:
        return {"section": len(str(task.item).split())}
    return {"done": task.name}


def run_until_idle(engine: Engine, types: list[str], agent_id: str) -> bool:
    """Run an until-idle agent serving ``types`` on a thread; whether it ended (a hang
    is a failure of the test, not a wait for something to happen)."""
    agent = Agent(engine, agent_id, dict.fromkeys(types, work), **AGENT_DEFAULTS)
    thread = threading.Thread(target=agent.run, kwargs={"until_idle": True}, daemon=True)
    thread.start()
    thread.join(60)
    if thread.is_alive():
        agent.stop()
        thread.join(30)
        return False
    return True


def test_an_agent_of_the_first_step_ends_with_the_items_left_to_others(
    engine: Engine,
) -> None:
    [wf] = load_file(DEMOS / "steps-book-word-counts.yaml")
    wid = engine.push(wf)
    assert not left(engine, "book-split")
    assert run_until_idle(engine, ["book-split"], "first")
    st = engine.status(wid)
    assert st.task("book-split").state == "succeeded"
    assert st.task("section-counts").state == "running"  # its items wait for another agent
    # what the others serve is still to come: their agents would wait for it
    assert not left(engine, "segment-word-counts")  # items ready in its queue
    assert not left(engine, "sum-splits")  # waiting for the map
    assert not left(engine, "store-title")
    assert left(engine, "book-split")
    assert left(engine, "book-split", "no-such-type")
    run_agent(engine, dict.fromkeys(BOOK[1:], work), agent_id="rest")
    assert engine.status(wid).state == "succeeded"
    assert all(left(engine, t) for t in BOOK)


def test_steps_of_items_count_by_their_own_types(engine: Engine) -> None:
    [wf] = load_file(DEMOS / "steps-book-steps.yaml")
    wid = engine.push(wf)
    run_agent(engine, {"book-split": work, "store-title": work}, agent_id="roots")
    st = engine.status(wid)
    assert st.task("section-counts").state == "running"
    # the items' second step: no item has reached it, yet it can come
    assert not left(engine, "segment-word-counts")
    assert not left(engine, "segment-clean")
    assert left(engine, "book-split", "store-title")
    types = ["segment-clean", "segment-word-counts", "sum-splits"]
    run_agent(engine, dict.fromkeys(types, work), agent_id="rest")
    assert engine.status(wid).state == "succeeded"


def test_a_paused_workflow_still_counts_for_its_types(engine: Engine) -> None:
    [wf] = load_file(DEMOS / "steps-book-word-counts.yaml")
    wid = engine.push(wf)
    run_agent(engine, {"book-split": work}, agent_id="first")
    engine.pause(wid)
    assert not left(engine, "sum-splits")
    assert left(engine, "book-split")
