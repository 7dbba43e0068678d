"""What the operator can do, in words: each action's confirmation and its outcome.

Every function here takes an :class:`engine.Engine` and runs in a worker thread. A
``plan_*`` function reads what a confirmation must show (exactly what, how many) and
returns an :class:`Action`; :meth:`Action.run` performs it and returns the sentence a
notification shows. Engine refusals (:class:`engine.StateError`, ...) propagate so the
console can show them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine import Engine, load_file, plural


@dataclass
class Action:
    """One prepared action.

    Attributes:
        title: the confirmation's title (``Cancel workflow 12?``).
        body: exactly what will happen, with counts.
        verb: the confirming button's label.
        run: performs it; returns the outcome as a sentence.
        confirm: whether to ask first (destructive and bulk actions).
    """

    title: str
    body: str
    verb: str
    run: Callable[[Engine], str]
    confirm: bool = True


def push_file(engine: Engine, path: str) -> str:
    """Load a workflow file (YAML or JSON, any supported form) and push what it holds."""
    file = Path(path).expanduser()
    workflows = load_file(str(file))
    ids = engine.push_many(workflows)
    shown = ", ".join(ids[:5]) + (" …" if len(ids) > 5 else "")
    return f"Pushed {plural(len(ids), 'workflow')} from {file.name}: {shown}"


def pause(engine: Engine, wid: str) -> str:
    held = engine.pause(wid)
    return f"Paused workflow {wid}: {plural(held, 'ready task')} held back"


def release(engine: Engine, wid: str) -> str:
    back = engine.release(wid)
    return f"Released workflow {wid}: {plural(back, 'task')} back in the queues"


def signal(engine: Engine, wid: str, name: str, reject: bool, comment: str) -> str:
    """Approve (signal ``name``) or reject a wait task, with the operator's comment."""
    done = engine.signal(wid, name, None, reject=reject, comment=comment or None)
    if done.outcome == "kept":
        return f"Signal {name} kept for workflow {wid}: its wait is not reached yet"
    verb = "Rejected" if reject else "Approved"
    return f"{verb} task {done.task} of workflow {wid}"


def retry_task(engine: Engine, wid: str, task: str) -> str:
    n = engine.retry(wid, tasks=[task])
    extra = n - 1
    more = f" and {plural(extra, 'task')} after it decided again" if extra > 0 else ""
    return f"Retrying task {task} of workflow {wid}{more}"


def plan_cancel(engine: Engine, wid: str) -> Action:
    st = engine.status(wid)
    pending = st.counts.get("waiting", 0) + st.counts.get("ready", 0)
    running = st.counts.get("running", 0)
    body = (
        f"Workflow {wid} “{st.name}” is {st.state}. {plural(pending, 'task')} not yet "
        f"started will be cancelled; {plural(running, 'running task')} will finish "
        "and nothing more will start."
    )

    def run(e: Engine) -> str:
        n = e.cancel(wid)
        return f"Cancelled workflow {wid}: {plural(n, 'task')} cancelled"

    return Action(f"Cancel workflow {wid}?", body, "Cancel workflow", run)


def plan_retry(engine: Engine, wid: str) -> Action:
    st = engine.status(wid)
    failed = st.counts.get("failed", 0)
    after = st.counts.get("upstream_failed", 0) + st.counts.get("skipped", 0)
    body = (
        f"Workflow {wid} “{st.name}” is {st.state}. {plural(failed, 'failed task')} will "
        "run again with their inputs unchanged"
        + (
            f", and the {plural(after, 'upstream_failed or skipped task')} after them "
            "decided again."
            if after
            else "."
        )
    )

    def run(e: Engine) -> str:
        n = e.retry(wid)
        return f"Retrying workflow {wid}: {plural(n, 'task')} reset"

    return Action(f"Retry workflow {wid}?", body, "Retry workflow", run)


def plan_cleanup(engine: Engine, wid: str) -> Action:
    st = engine.status(wid)
    body = (
        f"Workflow {wid} “{st.name}” ({st.state}, {plural(st.total, 'task')}) and "
        "everything kept of it — payloads, outputs, errors — will be deleted. "
        "This cannot be undone."
    )

    def run(e: Engine) -> str:
        e.cleanup(wid)
        return f"Cleaned up workflow {wid}"

    return Action(f"Clean up workflow {wid}?", body, "Delete workflow", run)


def plan_cleanup_finished(engine: Engine) -> Action:
    """Every workflow finished by now; workflows finishing later are left alone."""
    t0 = engine.server_time()
    by_state = {s: engine.count(s) for s in ("succeeded", "failed", "cancelled")}
    total = sum(by_state.values())
    parts = ", ".join(f"{n:,} {s}" for s, n in by_state.items())
    body = (
        f"{plural(total, 'finished workflow')} ({parts}) and everything kept of them will "
        "be deleted. Workflows that finish from now on are kept. This cannot be undone."
    )

    def run(e: Engine) -> str:
        n = e.cleanup_finished(older_than_s=max(0.0, e.server_time() - t0))
        return f"Cleaned up {plural(n, 'finished workflow')}"

    return Action(
        f"Clean up {plural(total, 'finished workflow')}?",
        body,
        f"Delete {total:,}",
        run,
        confirm=True,
    )
