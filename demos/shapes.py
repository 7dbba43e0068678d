"""Workflow shapes for demos and benchmarks."""

from __future__ import annotations

import random as _random
from collections.abc import Callable

from engine import Workflow


def diamond4(name: str = "diamond4", payload: object = "x") -> Workflow:
    """redis.workflow's sample: TestNode1 -> TestNode2 -> {TestNode3, TestNode4}."""
    wf = Workflow(name)
    a = wf.task("TestNode1", payload=payload)
    b = wf.task("TestNode2", payload=payload, after=[a])
    wf.task("TestNode3", payload=payload, after=[b])
    wf.task("TestNode4", payload=payload, after=[b])
    return wf


def chain(length: int, name: str | None = None, payload: object = "x") -> Workflow:
    """``length`` tasks one after another (redis.workflow's benchmark ran 9-task chains)."""
    wf = Workflow(name or f"chain{length}")
    prev = None
    for i in range(length):
        prev = wf.task(f"step{i + 1}", payload=payload, after=[prev] if prev else [])
    return wf


def chain9(name: str = "chain9", payload: object = "x") -> Workflow:
    return chain(9, name, payload)


def fan(width: int, name: str | None = None, payload: object = "x") -> Workflow:
    """One task, ``width`` in parallel after it, one gathering them: 1 -> width -> 1."""
    wf = Workflow(name or f"fan{width + 2}")
    src = wf.task("split", payload=payload)
    mids = [wf.task(f"part{i + 1}", payload=payload, after=[src]) for i in range(width)]
    wf.task("gather", payload=payload, after=mids)
    return wf


def fan10(name: str = "fan10", payload: object = "x") -> Workflow:
    return fan(8, name, payload)


def random_dag(
    tasks: int = 10,
    edge_p: float = 0.3,
    seed: int | None = None,
    name: str = "random",
    payload: object = "x",
) -> Workflow:
    """A random DAG: each task depends on each earlier one with probability ``edge_p``."""
    rng = _random.Random(seed)
    wf = Workflow(name)
    for i in range(tasks):
        parents = [f"t{j}" for j in range(i) if rng.random() < edge_p]
        wf.task(f"t{i}", payload=payload, after=parents)
    return wf


SHAPES: dict[str, Callable[..., Workflow]] = {
    "diamond4": diamond4,
    "chain9": chain9,
    "chain10": lambda name="chain10", payload="x": chain(10, name, payload),
    "fan10": fan10,
    "random": random_dag,
}
