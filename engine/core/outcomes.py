"""Error kinds: how a handler ends an attempt other than by returning or failing.

A handler raises :class:`NonRetryable` (the attempt fails and no further attempt is
made), :class:`Abort` (the task fails and the whole run ends ``failed`` at once, its
failure not handled: see below) or :class:`Skip` (the task is ``skipped``). Any other
exception fails the attempt, retried per ``max_attempts``.

The agent reports each as an outcome of its own to ``complete.lua`` (besides ``ok`` and
``err``): ``fatal``, ``abort``, ``skip``. An abort ends the run as a deadline does
(``end_workflow``): its reason is ``abort``; tasks not started (waiting, ready) are
``cancelled`` and no ``on_failure``, failure-rule or ``finally`` task runs; tasks
running elsewhere finish and their outcomes are recorded, but start nothing. An aborted
run cannot be retried (push it again).

An ``--exec`` command says the same with its exit code (:data:`EXIT_CODES`, changed with
``redisflow-agent --exit-code CODE=KIND``), or with a last line of stdout that is a
JSON object ``{"error": {"kind": "non_retryable" | "abort" | "skip", "message": "..."}}``
when it exits non-zero.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from engine.core.task import TaskFailed
from engine.errors import DefinitionError

# what an agent reports to complete.lua, beyond "ok" and "err"
SKIP, FATAL, ABORT = "skip", "fatal", "abort"
KINDS = {"non_retryable": FATAL, "abort": ABORT, "skip": SKIP}
# an --exec command's exit codes that say so (others: a failure, retried)
EXIT_CODES: dict[int, str] = {100: "non_retryable", 101: "abort", 102: "skip"}


class NonRetryable(TaskFailed):
    """Raise from a handler to fail the attempt with no further attempt."""


class Abort(TaskFailed):
    """Raise from a handler to fail the task and end the whole run ``failed`` now: no
    failure branch or ``finally`` task runs, tasks not started are cancelled."""


class Skip(Exception):  # noqa: N818 - named for what it does, as Abort
    """Raise from a handler to end the task ``skipped`` (``reason`` is kept and shown by
    ``status``); its children decide by their trigger rules."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


def outcome_of(e: BaseException) -> tuple[str, str] | None:
    """The outcome kind and text of an exception that has one (else None: a failure)."""
    if isinstance(e, Skip):
        return SKIP, e.reason or "skipped by its handler"
    if isinstance(e, Abort):
        return ABORT, str(e) or "aborted by its handler"
    if isinstance(e, NonRetryable):
        return FATAL, str(e) or "failed (not retryable)"
    return None


def exit_codes(pairs: list[str] | None) -> dict[int, str]:
    """:data:`EXIT_CODES` with ``CODE=KIND`` pairs applied (``KIND`` one of
    ``non_retryable``, ``abort``, ``skip``, or ``retry`` to make a code a plain failure
    again)."""
    codes = dict(EXIT_CODES)
    for pair in pairs or []:
        code, _, kind = pair.partition("=")
        if not code.strip().isdigit() or not 1 <= int(code) <= 255:
            raise DefinitionError(f"--exit-code {pair!r}: expected CODE=KIND, CODE from 1 to 255")
        if kind == "retry":
            codes.pop(int(code), None)
        elif kind in KINDS:
            codes[int(code)] = kind
        else:
            raise DefinitionError(f"--exit-code {pair!r}: KIND is one of {', '.join(KINDS)}, retry")
    return codes


def exec_error(code: int, stdout: str, message: str, codes: Mapping[int, str]) -> Exception:
    """The exception for an ``--exec`` command that exited with ``code`` (non-zero)."""
    lines = stdout.strip().splitlines()
    if lines and lines[-1].lstrip().startswith("{"):
        try:
            doc = json.loads(lines[-1])
        except ValueError:
            doc = None
        err = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(err, dict) and err.get("kind") in KINDS:
            text = err.get("message")
            message = text if isinstance(text, str) and text else message
            return _raise_kind(err["kind"], message)
    kind = codes.get(code)
    return _raise_kind(kind, message) if kind else TaskFailed(message)


def _raise_kind(kind: str, message: str) -> Exception:
    if kind == "skip":
        return Skip(message)
    if kind == "abort":
        return Abort(message)
    return NonRetryable(message)
