"""Child workflows: a task with ``run: TEMPLATE`` starts a run of that template as its
child and ends with the child's result.

The task is a wait task (:mod:`engine.spec.wait_tasks`) of kind "child": once reached it is
``suspended`` and listed for the wait keeper (``P:spawn``), which builds the child's input
(:func:`build_input`), pushes the child (idempotency key ``child:<wid>/<task>/<attempt>``:
a keeper that dies half-way and another that tries again find the same child) and links
parent and child (``child.lua``). The child's end is listed on its own shard
(``P:cends``); the keeper reads its result and ends the parent's task (``child.lua``),
on whichever shard each lives. A failed child fails the task, whose retries
(``max_attempts``) start a new child; a cancelled child fails it for good. Cancelling the
parent (or its deadline) cancels its running children; pausing, releasing and cleaning it
up do the same to them (:func:`cascade_to`). Runs nest at most :data:`MAX_DEPTH` deep, and
a run has at most ``max_descendants`` child runs under it, every level counted on the
root run before each starts (default :data:`MAX_DESCENDANTS`; ``Engine(max_descendants=)``,
``redisflow-agent --max-descendants``). The key's prefix ``child:`` is the engine's
(:data:`engine.spec.flow.RESERVED_KEY_PREFIXES`), and a run the key finds that is not the
task's child (another template, another parent) fails the task: it never becomes its child.

The input is JSON in which a string ``"$<reference>"`` stands for a value of the run:
``$input`` (the parent run's input), ``$input.customer.id``, ``$payload...`` (the task's
own payload), ``$<parent task>`` or ``$<parent task>.key.key`` (a parent's output). A
reference to what does not exist is ``null``; ``"$$..."`` is the text ``"$..."``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from engine.errors import DefinitionError, NotFoundError, StateError

# the spec half (read by the definition builder and the loader), named here too
from engine.spec.child_specs import RUN_FIELDS as RUN_FIELDS
from engine.spec.child_specs import ChildSpec as ChildSpec
from engine.spec.child_specs import check_references as check_references
from engine.spec.child_specs import references as references
from engine.spec.child_specs import run_of as run_of

if TYPE_CHECKING:
    from engine.core.model import WorkflowStatus
    from engine.runtime.deployment import Deployment, Runner
    from engine.store.codec import CompiledWorkflow

MAX_DEPTH = 16  # a run's children nest at most this deep
MAX_DESCENDANTS = 10_000  # by default, the most child runs (every level) under one run
CHILD_KEY = "child:{wid}/{task}/{attempt}"


def child_key(parent: str) -> str:
    """The idempotency key of the child that parent task ``parent`` (``wid:idx:attempt``)
    starts."""
    wid, idx, attempt = parent.rsplit(":", 2)
    return CHILD_KEY.format(wid=wid, task=idx, attempt=attempt)


def check_templates(engine: Deployment, compiled: CompiledWorkflow) -> None:
    """Refuse (:class:`DefinitionError`, nothing written) a workflow whose ``run:`` tasks
    name a template, or a version, that does not exist."""
    for name, version in compiled.runs:
        try:
            latest = engine.store.templates.latest(name)
        except NotFoundError:
            raise DefinitionError(
                f"workflow {compiled.name!r}: run: no template named {name!r} "
                "(put it first: redisflow template put FILE)"
            ) from None
        if version is not None and version > latest:
            raise DefinitionError(
                f"workflow {compiled.name!r}: run: template {name!r} has no version {version} "
                f"(its latest is {latest})"
            )


def cycle_of(engine: Runner, name: str, version: int, most: int = 1000) -> list[str] | None:
    """The templates through which version ``version`` of template ``name`` reaches
    itself by ``run:`` (``["bomb", "bomb"]``, ``["a", "b", "a"]``), directly or through
    other stored templates (each at the version it would run); None when it does not.
    Templates that do not exist or do not compile are passed over; at most ``most`` are
    read."""
    start = (name, version)
    came: dict[tuple[str, int], tuple[str, int] | None] = {start: None}
    todo = [start]
    while todo and len(came) <= most:
        at = todo.pop(0)
        try:
            runs = engine.compile_template(*at)[0].runs
        except (DefinitionError, NotFoundError):
            continue
        for template, wanted in runs:
            try:
                v = engine.store.templates.latest(template) if wanted is None else wanted
            except NotFoundError:
                continue
            if (template, v) == start:
                path: list[str] = [name]
                step: tuple[str, int] | None = at
                while step is not None:
                    path.append(step[0])
                    step = came[step]
                return path[::-1]
            if (template, v) not in came:
                came[(template, v)] = at
                todo.append((template, v))
    return None


def _lookup(root: Any, path: list[str]) -> Any:
    for part in path:
        if isinstance(root, dict):
            root = root.get(part)
        elif isinstance(root, list) and part.isdigit() and int(part) < len(root):
            root = root[int(part)]
        else:
            return None
    return root


def build_input(template: Any, run_input: Any, payload: Any, outputs: dict[str, Any]) -> Any:
    """The child's input: ``template`` with its references replaced (see the module)."""
    if isinstance(template, str):
        if template.startswith("$$"):
            return template[1:]
        if template.startswith("$"):
            head, *path = template[1:].split(".")
            if head == "input":
                return _lookup(run_input, path)
            if head == "payload":
                return _lookup(payload, path)
            return _lookup(outputs.get(head), path)
        return template
    if isinstance(template, dict):
        return {k: build_input(v, run_input, payload, outputs) for k, v in template.items()}
    if isinstance(template, list):
        return [build_input(v, run_input, payload, outputs) for v in template]
    return template


def child_result(st: WorkflowStatus) -> Any:
    """A finished child's result: the output of its one final task, or its final tasks'
    outputs by name (final: no task runs after it)."""
    sinks = [t for t in st.tasks if not t.children]
    if len(sinks) == 1:
        return sinks[0].output
    return {t.name: t.output for t in sinks}


def child_error(st: WorkflowStatus) -> str:
    """Why a child ended without succeeding, in one line."""
    if st.state == "cancelled":
        return f"child run {st.id} was cancelled"
    failed = next((t for t in st.tasks if t.state == "failed"), None)
    why = f": task {failed.name}: {failed.error}" if failed is not None and failed.error else ""
    if st.reason:
        why = f" ({st.reason}){why}"
    return f"child run {st.id} failed{why}"


# -- the keeper's side ---------------------------------------------------------------------


def spawn(engine: Runner, member: str) -> None:
    """Start the child of parent task ``member`` (``wid:task index:attempt``) and link
    them; a task that cannot start its child (unknown template, an input its schema
    refuses, too deep, too many under its root, its key naming a run that is not its
    child) fails with the reason."""
    wid, idx, attempt = member.rsplit(":", 2)
    try:
        st = engine.store.reads.status(wid)
    except NotFoundError:
        engine.store.calls.child_link(wid, idx, int(attempt), "")  # drops the entry
        return

    def fail(why: str) -> None:
        engine.store.calls.child_end(wid, idx, int(attempt), "fatal", why)

    task = st.tasks[int(idx)]
    spec = task.wait or {}
    depth = (st.depth or 0) + 1
    if depth > MAX_DEPTH:
        fail(
            f"child runs nest at most {MAX_DEPTH} deep: run {wid} is at depth {depth - 1}, "
            "its task starts no child (a template that runs itself?)"
        )
        return
    root = st.root or wid  # (a child of an earlier release, without one: counts its own)
    most = engine.max_descendants
    counted = engine.store.calls.child_count(root, member, most)
    if counted != "ok":
        fail(
            f"child runs under run {root} are at most {most:,} (max_descendants): run "
            f"{wid}'s task starts no more (a template that runs itself?)"
            if counted == "over"
            else f"child run not started: its root run {root} is gone"
        )
        return
    outputs = {t.name: t.output for t in st.tasks if t.state == "succeeded"}
    child_input = build_input(spec.get("input"), st.input, task.payload, outputs)
    key = child_key(member)
    try:
        started = engine.run(
            spec["child"], child_input, key=key, version=spec.get("version"),
            parent=member, depth=depth, root=root,
        )  # fmt: skip
    except (DefinitionError, NotFoundError, StateError) as e:
        fail(f"child run not started: {e}")
        return
    if started.existing:  # a keeper's retry finds its child; anything else is not it
        try:
            found = engine.store.reads.status(started.id)
        except NotFoundError:
            found = None
        if found is None or found.parent != member or found.template != spec["child"]:
            what = (
                "is gone" if found is None
                else f"runs template {found.template or '(none)'!r} with parent "
                f"{found.parent or '(none)'}"
            )  # fmt: skip
            fail(
                f"child run not started: its key {key} names run {started.id}, which is not "
                f"this task's child (it {what}; this task's is template {spec['child']!r} "
                f"with parent {member})"
            )
            return
    if engine.store.calls.child_link(wid, idx, int(attempt), started.id) == "stale":
        # the parent's task moved on (cancelled, cleaned up) while the child started
        try:
            engine.cancel(started.id)
        except (StateError, NotFoundError):
            pass


def report_end(engine: Runner, child: str) -> None:
    """Tell child run ``child``'s parent task how it ended (nothing to tell when the
    child or its parent is gone)."""
    try:
        st = engine.store.reads.status(child)
    except NotFoundError:
        return
    if st.parent is None or not st.state.finished:
        return
    wid, idx, attempt = st.parent.rsplit(":", 2)
    if st.state == "succeeded":
        value = json.dumps(child_result(st), separators=(",", ":"), ensure_ascii=False)
        how = "succeeded"
    else:
        value, how = child_error(st), ("failed" if st.state == "failed" else "fatal")
    try:
        engine.store.calls.child_end(wid, idx, int(attempt), how, value, child)
    except NotFoundError:
        pass


def cancel_orphan(engine: Runner, child: str) -> None:
    """Cancel child run ``child``, whose parent ended first, and its own children
    (nothing to do when it ended or is gone)."""
    cascade_to(engine, [child], "cancel")


def cascade_to(engine: Deployment, kids: list[str], op: str) -> int:
    """Do ``op`` (pause, release, cancel, cleanup) to child runs ``kids`` (read before
    their parent changed: a cleanup deletes the links) and to theirs; how many it was
    done to. A child in a state where ``op`` does not apply is left as it is."""
    done = 0
    for child in kids:
        grandkids = engine.store.calls.children_of(child)
        try:
            getattr(engine.store.calls, op)(child, engine.actor)
        except (StateError, NotFoundError):
            continue
        done += 1 + cascade_to(engine, grandkids, op)
    return done
