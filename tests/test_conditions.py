"""Conditions (`when:`), error kinds and input schemas, on a real Redis."""

from __future__ import annotations

from typing import Any

from engine_helpers import assert_stats_agree, run_agent

from engine import Engine, Task, Workflow


def states(engine: Engine, wid: str) -> dict[str, str]:
    return {t.name: t.state.value for t in engine.status(wid).tasks}


def test_when_true_and_false_branch(engine: Engine) -> None:
    wf = Workflow("branch")
    check = wf.task("check")
    wf.task("yes", after=[check], when='parents.check.output.status == "ok"')
    no = wf.task("no", after=[check], when='parents.check.output.status != "ok"')
    wf.task("after_no", after=[no])
    wid = engine.push(wf)
    ran: list[str] = []

    def handler(t: Task) -> Any:
        ran.append(t.name)
        return {"status": "ok"} if t.name == "check" else None

    run_agent(engine, {"": handler})
    st = engine.status(wid)
    assert st.state.value == "succeeded"
    assert states(engine, wid) == {
        "check": "succeeded", "yes": "succeeded", "no": "skipped", "after_no": "skipped",
    }  # fmt: skip
    assert sorted(ran) == ["check", "yes"]
    no_status = st.tasks[2]
    assert no_status.skip_reason is not None
    assert 'parents.check.output={"status":"ok"}' in no_status.skip_reason
    assert_stats_agree(engine)
