"""Evaluations per second of a task's condition, per expression library installed.

    .venv/bin/python scripts/bench_conditions.py

Measures the expression of docs/conditions.md over a small activation (the run's input
and one parent's output), compiled once, with each library present: the
common-expression-language package (redisflow's choice), cel-python (``celpy``) and
jmespath (data queries only) when installed; then the agent's whole gate (binding the
variables, evaluating, and for a false one, the explanation kept for ``status``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

EXPR = 'parents.check.output.status == "ok" && input.n > 3'
ACT = {
    "input": {"n": 5, "name": "x"},
    "parents": {"check": {"output": {"status": "ok", "rows": [1, 2, 3]}, "state": "succeeded"}},
    "run": {"id": "123"},
}


def rate(fn: Callable[[], Any], seconds: float = 1.0) -> float:
    fn()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(100):
            fn()
        n += 100
    return n / (time.perf_counter() - start)


def main() -> None:
    import cel

    program = cel.compile(EXPR)
    print(f"common-expression-language  {rate(lambda: program.execute(ACT)):>10,.0f} /s")
    try:
        import celpy
    except ImportError:
        print("cel-python                  (not installed)")
    else:
        env = celpy.Environment()
        prg = env.program(env.compile(EXPR))
        per_s = rate(lambda: prg.evaluate(celpy.json_to_cel(ACT)))
        print(f"cel-python                  {per_s:>10,.0f} /s")
    try:
        import jmespath
    except ImportError:
        print("jmespath                    (not installed)")
    else:
        query = jmespath.compile("parents.check.output.status == 'ok' && input.n > `3`")
        print(f"jmespath                    {rate(lambda: query.search(ACT)):>10,.0f} /s")

    from engine.runtime.handlers import Task
    from engine.spec.conditions import gate

    task = Task(
        "1", 1, "t", "", None, 1, {"check": ACT["parents"]["check"]["output"]}, ACT["input"]
    )
    task._states = {"check": "succeeded"}
    task._when = EXPR
    print(f"gate(), true                {rate(lambda: gate(task)):>10,.0f} /s")
    task._when = 'parents.check.output.status == "bad"'
    print(f"gate(), false               {rate(lambda: gate(task)):>10,.0f} /s")


if __name__ == "__main__":
    main()
