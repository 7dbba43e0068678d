"""A child run's spec (``run:`` on a task): what the definition builder and the loader
read and check; :mod:`engine.runtime.child_runs` starts and reports the runs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from engine.errors import DefinitionError
from engine.spec.flow import check_template_name
from engine.spec.messages import refuse_unknown

RUN_FIELDS = {"template", "version", "input"}


@dataclass
class ChildSpec:
    """What a ``run:`` task starts: a template (its latest version, or ``version``) with
    an ``input`` built from references (see the module's doc)."""

    template: str
    version: int | None = None
    input: Any = None

    def encoded(self) -> dict[str, Any]:
        """Its part of the task's wait spec (``D_WAIT``): ``c`` template, ``v`` version,
        ``i`` input."""
        out: dict[str, Any] = {"c": self.template}
        if self.version is not None:
            out["v"] = self.version
        if self.input is not None:
            out["i"] = self.input
        return out


def _bad(where: str, message: str) -> DefinitionError:
    return DefinitionError(f"{where}: {message}" if where else message)


def run_of(value: Any, where: str = "") -> ChildSpec:
    """A task's ``run:`` as written: a template name, ``{template, version, input}``,
    or a :class:`ChildSpec`; checked (the template's existence is checked at push)."""
    if isinstance(value, ChildSpec):
        spec = value
    elif isinstance(value, str):
        spec = ChildSpec(value)
    elif isinstance(value, dict):
        refuse_unknown(value, RUN_FIELDS, f"{where}: run" if where else "run")
        spec = ChildSpec(value.get("template"), value.get("version"), value.get("input"))  # type: ignore[arg-type]
    else:
        raise _bad(
            where, f"run must be a template name or {{template, version, input}}, not {value!r}"
        )
    if not isinstance(spec.template, str):
        raise _bad(where, f"run: template must be a template's name, not {spec.template!r}")
    check_template_name(spec.template, f"{where}: run" if where else "run")
    if spec.version is not None and (
        isinstance(spec.version, bool) or not isinstance(spec.version, int) or spec.version < 1
    ):
        raise _bad(where, f"run: version must be a whole number from 1, not {spec.version!r}")
    try:
        json.dumps(spec.input, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise _bad(where, f"run: input must be JSON ({e})") from None
    for ref in references(spec.input):
        if not ref or ref.split(".")[0] == "":
            raise _bad(where, f"run: input reference {'$' + ref!r} names nothing")
    return spec


def references(value: Any) -> list[str]:
    """The references (without their ``$``) in an input template."""
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str) and v.startswith("$") and not v.startswith("$$"):
            out.append(v[1:])
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return out


def check_references(spec: ChildSpec, task: str, upstream: set[str], where: str = "") -> None:
    """Refuse a reference to a task that is not a parent (or further up) of ``task``."""
    for ref in references(spec.input):
        head = ref.split(".")[0]
        if head not in ("input", "payload") and head not in upstream:
            raise _bad(
                where,
                f"task {task!r}: run: input reference ${ref} names {head!r}, which is not "
                "input, payload or a task upstream of it",
            )
