"""redis.workflow's sample runs end to end in-process."""

from __future__ import annotations

from engine import Agent, Engine, load_file


def test_task_list_sample_runs(engine: Engine) -> None:
    wid = engine.push_many(load_file("demos/task-list-sample.yaml"))[0]
    seen: list[tuple[str, dict]] = []

    def handler(task):
        seen.append((task.name, task.parents))
        return task.payload.lower()

    Agent(engine, "sampleApp", {"": handler}).run(until_idle=True)
    st = engine.status(wid)
    assert st.state == "succeeded"
    assert [n for n, _ in seen][:2] == ["TestNode1", "TestNode2"]
    assert dict(seen)["TestNode3"] == {"TestNode2": "node2"}
    assert st.task("TestNode4").output == "node4"
