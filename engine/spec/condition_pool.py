"""The agent's condition evaluators: a few worker processes (:mod:`engine.spec.cel_worker`), each
evaluation under a wall-clock budget enforced from outside.

CEL holds the GIL while it evaluates, so no thread of the agent can stop it, and while it
runs the heartbeat thread cannot renew the lease. Here the evaluation runs in another
process; the calling thread waits on a pipe (the GIL free), and at the budget the process
is killed and the condition has failed. Workers start only when a task with a condition
is decided (an agent whose runs have none starts none) and are kept for the next ones; at
most ``size`` at once, a caller waiting for a free one meanwhile (that wait is not part of
the budget).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

WORKER = Path(__file__).with_name("cel_worker.py")
# what of the agent's environment a worker gets: what Python needs to start, no secrets
# (a Redis URL, tokens) in a process that runs expressions from workflow definitions
_ENV_KEPT = ("PATH", "HOME", "LANG", "TMPDIR", "SYSTEMROOT")
START_S = 60.0  # a worker's start (an interpreter, ``import cel``): only a hang is refused


class OverBudget(Exception):
    """The evaluation ran past its budget and was stopped."""


class EvaluatorError(Exception):
    """No evaluator could answer: none would start, or one ended in the middle of an
    evaluation (killed from outside, out of memory)."""


def _worker_env() -> dict[str, str]:
    kept = os.environ.items()
    return {k: v for k, v in kept if k in _ENV_KEPT or k.startswith(("PYTHON", "LC_"))}


class _Worker:
    """One evaluator process and its pipes."""

    def __init__(self) -> None:
        try:
            self.proc: subprocess.Popen[bytes] = subprocess.Popen(
                [sys.executable, "-P", str(WORKER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                close_fds=True,
                env=_worker_env(),
            )
        except OSError as e:
            raise EvaluatorError(f"could not start a condition evaluator: {e}") from None
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None
        self.stdin: IO[bytes] = stdin
        self.fd = stdout.fileno()
        self.poll = select.poll()
        self.poll.register(self.fd, select.POLLIN)
        self.buffer = b""
        try:
            ready = self.reply(START_S)
        except (OverBudget, EvaluatorError):
            self.kill()
            raise EvaluatorError("a condition evaluator did not start") from None
        if ready != "ready":
            self.kill()
            raise EvaluatorError(f"a condition evaluator started wrongly: {ready!r}")

    def reply(self, within_s: float) -> Any:
        """The next line the worker writes, decoded; :class:`OverBudget` if none comes in
        ``within_s`` seconds, :class:`EvaluatorError` if the worker ended."""
        deadline = time.monotonic() + within_s
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not self.poll.poll(max(1, int(left * 1000) + 1)):
                if time.monotonic() >= deadline:
                    raise OverBudget
                continue
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                raise EvaluatorError(self.ended())
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def ask(self, text: str, variables: Any, budget_s: float) -> Any:
        """Send one evaluation and wait for its reply at most ``budget_s`` seconds."""
        # the worker's own alarm, past the budget: it ends itself if nobody kills it
        request = json.dumps([text, variables, 2 * budget_s + 5], separators=(",", ":"))
        try:
            self.stdin.write(request.encode() + b"\n")
            self.stdin.flush()
        except OSError:  # it ended while idle (killed from outside)
            raise EvaluatorError(self.ended()) from None
        started = time.monotonic()
        try:
            return self.reply(budget_s)
        except EvaluatorError:
            if time.monotonic() - started >= budget_s:  # it ended at its own alarm
                raise OverBudget from None
            raise

    def ended(self) -> str:
        """Why the worker ended, once it has."""
        code = self.proc.wait()
        if code < 0:
            return f"the evaluator process was ended by signal {-code} (killed, or out of memory)"
        return f"the evaluator process exited with status {code}"

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass


class ConditionPool:
    """Up to ``size`` evaluator processes, started when first needed.

    Args:
        size: how many evaluations may run at once.
        budget_s: the wall-clock seconds one evaluation may take.
    """

    def __init__(self, size: int, budget_s: float) -> None:
        if size < 1:
            raise ValueError("a condition pool needs at least one worker")
        if not budget_s > 0:
            raise ValueError("the condition budget must be above 0 seconds")
        self.size = size
        self.budget_s = budget_s
        self._idle: list[_Worker] = []
        self._count = 0  # workers started and not killed (idle or busy)
        self._changed = threading.Condition()

    def evaluate(self, text: str, variables: dict[str, Any]) -> tuple[str, Any]:
        """:func:`engine.spec.cel_worker.judge`'s answer for expression ``text``, computed in a
        worker; :class:`OverBudget` when it took longer than the budget (the worker is
        killed), :class:`EvaluatorError` when no worker could answer."""
        worker = self._take()
        try:
            kind, value = worker.ask(text, variables, self.budget_s)
        except BaseException:
            self._discard(worker)
            raise
        self._give_back(worker)
        return str(kind), value

    def close(self) -> None:
        """Stop every worker; evaluations after this start new ones."""
        with self._changed:
            idle, self._idle = self._idle, []
            self._count -= len(idle)
            self._changed.notify_all()
        for worker in idle:
            worker.kill()

    def _take(self) -> _Worker:
        with self._changed:
            while not self._idle and self._count >= self.size:
                self._changed.wait()
            while self._idle:
                worker = self._idle.pop()
                if worker.proc.poll() is None:
                    return worker
                self._count -= 1  # ended while idle (killed from outside): replaced
                worker.kill()
            self._count += 1
        try:
            return _Worker()
        except BaseException:
            with self._changed:
                self._count -= 1
                self._changed.notify()
            raise

    def _give_back(self, worker: _Worker) -> None:
        with self._changed:
            self._idle.append(worker)
            self._changed.notify()

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        with self._changed:
            self._count -= 1
            self._changed.notify()
