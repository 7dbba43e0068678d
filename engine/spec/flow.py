"""Flow control declared by a workflow: its concurrency key, and the gates a run takes.

A workflow (or the template it comes from) may say ``concurrency: {key: "customer",
limit: 1}``: at most ``limit`` runs of that workflow with the same value of the input
field ``key`` run at once; the others wait ``queued`` and start, oldest first, when a
slot frees. The slot is a *gate* named from the workflow's name and that value; Lua
(``workflow_ended`` in lib/ends.lua) keeps the count and starts the waiters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from engine.errors import DefinitionError
from engine.spec.messages import refuse_unknown

MAX_LIMIT = 1_000_000
MAX_GATE_BYTES = 512


@dataclass(frozen=True)
class Concurrency:
    """At most ``limit`` runs at once per value of the input field ``key`` (a dotted path
    into the input object: ``"order.customer"``)."""

    key: str
    limit: int = 1

    def check(self, where: str) -> None:
        """Raise :class:`DefinitionError` naming ``where`` unless it is well formed."""
        if not isinstance(self.key, str) or not self.key.strip():
            raise DefinitionError(
                f"{where}: concurrency key must name an input field, not {self.key!r}"
            )
        if (
            isinstance(self.limit, bool)
            or not isinstance(self.limit, int)
            or not (1 <= self.limit <= MAX_LIMIT)
        ):
            raise DefinitionError(
                f"{where}: concurrency limit must be a whole number from 1 to {MAX_LIMIT}, "
                f"not {self.limit!r}"
            )

    def gate(self, workflow: str, input: Any) -> str:
        """The gate a run with ``input`` takes: ``c/<workflow>/<value>``.

        Raises :class:`DefinitionError` when the input has no such field."""
        value: Any = input
        for part in self.key.split("."):
            if not isinstance(value, dict) or part not in value:
                raise DefinitionError(
                    f"workflow {workflow!r}: its input has no field {self.key!r}, which its "
                    f"concurrency key names"
                )
            value = value[part]
        if isinstance(value, str):
            text = value
        else:
            text = json.dumps(value, sort_keys=True, separators=(",", ":"))
        gate = f"c/{workflow}/{text}"
        if len(gate.encode()) > MAX_GATE_BYTES:
            raise DefinitionError(
                f"workflow {workflow!r}: the value of its concurrency key {self.key!r} is "
                f"over {MAX_GATE_BYTES} bytes"
            )
        return gate


def concurrency_from(value: Any, where: str) -> Concurrency | None:
    """A :class:`Concurrency` from what a file says (a mapping ``{key, limit}``), checked."""
    if value is None or isinstance(value, Concurrency):
        if value is not None:
            value.check(where)
        return value
    if not isinstance(value, dict):
        raise DefinitionError(
            f"{where}: concurrency must be a mapping like {{key: customer, limit: 1}}, "
            f"not {value!r}"
        )
    refuse_unknown(value, ("key", "limit"), f"{where}: concurrency", all_named=True)
    c = Concurrency(value.get("key", ""), value.get("limit", 1))
    c.check(where)
    return c


MAX_KEY_BYTES = 512


def check_key(key: str) -> None:
    """Refuse an idempotency key that is empty or too long (:class:`DefinitionError`)."""
    if not isinstance(key, str) or not key.strip():
        raise DefinitionError(f"an idempotency key must be a non-empty string, not {key!r}")
    if len(key.encode()) > MAX_KEY_BYTES:
        raise DefinitionError(f"an idempotency key must be at most {MAX_KEY_BYTES} bytes")


# The engine's own idempotency keys, which no key given by a user may start with: a child
# run's (``child:<wid>/<task>/<attempt>``, engine.runtime.child_runs) and a webhook delivery's
# (``trigger:<name>:<header value>``, engine.http.triggers). Schedules use none: one run
# per tick is kept by the schedule itself.
RESERVED_KEY_PREFIXES = ("child:", "trigger:")


def trigger_key(trigger: str, value: str = "") -> str:
    """The idempotency key of a delivery to ``trigger`` whose idempotency header says
    ``value`` (without it: the prefix every such key of the trigger starts with)."""
    return f"trigger:{trigger}:{value}"


def check_run_key(key: str, own: str = "") -> None:
    """Refuse (:class:`DefinitionError`) a run's idempotency key that :func:`check_key`
    refuses or that starts with a prefix the engine reserves, unless it starts with
    ``own``: the engine's own key for this run (a child's, a delivery's)."""
    check_key(key)
    if own and key.startswith(own):
        return
    for prefix in RESERVED_KEY_PREFIXES:
        if key.startswith(prefix):
            shown = key if len(key) <= 60 else key[:57] + "..."
            raise DefinitionError(
                f"idempotency key {shown!r} starts with {prefix!r}, which the engine reserves "
                "for its own runs (child runs: 'child:', trigger deliveries: 'trigger:'): "
                "choose another key"
            )


@dataclass
class RunRequest:
    """One workflow to push, with its input and options (:meth:`Engine.push_runs`)."""

    workflow: Any  # a Workflow or a CompiledWorkflow
    input: Any = None
    key: str | None = None  # idempotency key
    template: str | None = None  # the template and version it runs, if any
    version: int | None = None
    gates: list[tuple[str, int]] = field(default_factory=list)  # extra gates
    parent: str | None = None  # a child run's parent task (engine.runtime.child_runs)
    depth: int = 0  # ... and how deep it nests
    root: str | None = None  # ... and the run at the top of its tree
    trigger: str | None = None  # the webhook trigger delivering it (its key is the trigger's)


@dataclass(frozen=True)
class Pushed:
    """What a push did for one run: its workflow id, and whether that workflow already
    existed (its idempotency key named it: nothing was pushed)."""

    id: str
    existing: bool = False


MAX_TEMPLATE_NAME = 200


def check_template_name(name: str, where: str) -> None:
    """Refuse a template name that is empty, too long, or has spaces or control
    characters (it is part of URLs and key names)."""
    if not name:
        raise DefinitionError(f"{where}: the workflow has no name: give the template one (--name)")
    if len(name) > MAX_TEMPLATE_NAME or not name.isprintable() or any(c in name for c in " /"):
        raise DefinitionError(
            f"{where}: template name {name!r} must be up to {MAX_TEMPLATE_NAME} printable "
            "characters without spaces or '/'"
        )
