"""How long big workflow files take to load, validate and push.

Writes each shape as JSON and YAML into a temporary folder, then times
:func:`engine.load_file`, :func:`engine.spec.definition.validate` and, with ``--url``,
:meth:`engine.Engine.push_many` (the namespace ``rfmeasure`` is cleaned up after)::

    python -m demos.measure_input                       # load + validate only
    python -m demos.measure_input --url redis://127.0.0.1:6379/15 --sizes 100000
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from engine import Engine, load_file
from engine.spec.definition import validate
from engine.store.codec import compile_workflow


def chain(n: int) -> dict[str, Any]:
    """``t0 -> t1 -> ... -> t(n-1)``."""
    tasks: list[dict[str, Any]] = [{"name": "t0", "payload": 0}]
    tasks += [{"name": f"t{i}", "payload": i, "after": [f"t{i - 1}"]} for i in range(1, n)]
    return {"name": f"chain{n}", "tasks": tasks}


def fan_out(n: int) -> dict[str, Any]:
    """One root with ``n - 1`` children."""
    tasks: list[dict[str, Any]] = [{"name": "root"}]
    tasks += [{"name": f"c{i}", "type": "leaf", "after": ["root"]} for i in range(1, n)]
    return {"name": f"fan{n}", "tasks": tasks}


DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
SHAPES: dict[str, Callable[[int], dict[str, Any]]] = {"chain": chain, "fan": fan_out}


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def measure(
    folder: Path, sizes: list[int], engine: Engine | None, max_tasks: int
) -> Iterator[dict[str, Any]]:
    """One row per shape, size and format: seconds to load, validate and push."""
    for shape, build in SHAPES.items():
        for n in sizes:
            doc = build(n)
            for fmt in ("json", "yaml"):
                path = folder / f"{shape}{n}.{fmt}"
                if fmt == "json":
                    path.write_text(json.dumps(doc, indent=1))
                else:
                    path.write_text(yaml.dump(doc, Dumper=DUMPER, sort_keys=False))
                [wf], load_s = _timed(lambda p=path: load_file(p, max_tasks))
                _, validate_s = _timed(lambda w=wf: validate(w, max_tasks=max_tasks))
                row = {
                    "shape": shape,
                    "tasks": n,
                    "format": fmt,
                    "mb": round(path.stat().st_size / 1e6, 1),
                    "load_s": round(load_s, 2),
                    "validate_s": round(validate_s, 2),
                }
                if engine is not None:
                    # push_many compiles (validating again), then runs push.lua.
                    _, compile_s = _timed(lambda w=wf: compile_workflow(w))
                    _, push_s = _timed(lambda e=engine, w=wf: e.push_many([w]))
                    row["compile_s"] = round(compile_s, 2)
                    row["push_many_s"] = round(push_s, 2)
                    row["total_s"] = round(load_s + validate_s + push_s, 2)
                yield row


def main() -> None:
    """Print one JSON line per measurement."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    p.add_argument("--url", help="also push to this Redis (namespace rfmeasure)")
    args = p.parse_args()
    max_tasks = max(args.sizes)
    engine = Engine.connect(args.url, namespace="rfmeasure") if args.url else None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for row in measure(Path(tmp), args.sizes, engine, max_tasks):
                print(json.dumps(row), flush=True)
    finally:
        if engine is not None:
            keys = list(engine.redis.scan_iter(match=engine.keys.pattern, count=1000))
            for start in range(0, len(keys), 1000):
                engine.redis.delete(*keys[start : start + 1000])
            engine.close()


if __name__ == "__main__":
    main()
