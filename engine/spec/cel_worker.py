"""A condition evaluator process: decides ``when:`` expressions for an agent, one at a time.

CEL evaluation (the Rust ``cel`` crate through PyO3) holds the GIL until it returns, and an
expression of nested comprehensions over a long list can run for hours: in the agent's
own process it would stall every thread, its lease heartbeat included. So the agent sends
each evaluation to one of these processes (:mod:`engine.spec.condition_pool`) and kills it when
its budget is spent.

Run by path (``python -P cel_worker.py``): it imports nothing of the engine, only ``cel``
and the standard library. The protocol is one JSON line each way: a request ``[text,
variables, alarm_s]``, a reply ``[kind, value]`` (:func:`judge`). Before the first request
it writes ``"ready"``. Each evaluation arms ``SIGALRM`` at ``alarm_s`` with its default
action (the process ends), so an evaluation nobody waits for any more (the agent was
killed) does not run on.

:func:`judge` is also what the engine runs in its own process where no budget is needed
(``redisflow plan``).
"""

from __future__ import annotations

import json
import signal
import sys
from typing import Any

PROGRAMS_KEPT = 1024  # compiled programs a worker keeps, by expression text


def detail(e: BaseException) -> str:
    """What an evaluation or compile error says, on one line of at most 300 characters
    (its type's name when it says nothing)."""
    text = " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, KeyError):
        text = f"no such key: {text}"
    return text[:300]


def short(value: Any) -> str:
    """A value as at most 120 characters of JSON (its ``repr`` if it is not JSON)."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)[:120]
    return text if len(text) <= 120 else text[:117] + "..."


def judge(program: Any, variables: dict[str, Any]) -> tuple[str, Any]:
    """Run a compiled condition: ``("ok", True | False)``; ``("value", shown)`` for a
    result that is not a boolean; ``("error", detail)`` when the evaluation fails."""
    try:
        value = program.execute(variables)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 - any evaluation error (a Rust panic too)
        return "error", detail(e)
    if not isinstance(value, bool):
        return "value", short(value)
    return "ok", value


def main() -> None:
    """Serve requests from stdin until it closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is for the agent
    import cel

    programs: dict[str, Any] = {}
    out = sys.stdout.buffer
    out.write(b'"ready"\n')
    out.flush()
    for line in sys.stdin.buffer:
        text, variables, alarm_s = json.loads(line)
        signal.setitimer(signal.ITIMER_REAL, alarm_s)
        try:
            program = programs.get(text)
            if program is None:
                if len(programs) >= PROGRAMS_KEPT:
                    programs.clear()
                program = programs[text] = cel.compile(text)
            reply = judge(program, variables)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # noqa: BLE001 - a compile error: the caller says it
            reply = "error", detail(e)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        out.write(json.dumps(reply).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
