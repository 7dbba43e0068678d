"""Input schemas: a workflow's (or template's) ``input_schema``, a JSON Schema every run's
input must fit.

Checked with the ``jsonschema`` library, before anything is written, on every way a run
is pushed: :meth:`Engine.push` / :meth:`Engine.run`, ``redisflow push --input`` and
``redisflow run``, the HTTP API's runs and webhooks (``400``), and schedules (when the
schedule is stored, and at each tick: a tick whose input does not fit is missed, with a
warning). The schema's draft is the one its ``$schema`` names, Draft 2020-12 without
one. A schema that is not valid itself is refused when the workflow is compiled (pushed,
stored as a template), and so is one that could reach outside itself or stall:

- a ``$ref`` / ``$dynamicRef`` / ``$recursiveRef`` must start with ``#`` (a place in the
  schema); the validator's registry never retrieves anything (no file, no URL), so a
  reference that resolves nowhere is refused as soon as a value reaches it;
- a ``pattern`` / ``patternProperties`` regex must compile in RE2, the linear-time engine
  they are matched with (:mod:`engine.spec.schema_regex`): no backreferences, no lookaround.

Messages name JSON paths and rules, never the schema's text: an input that does not fit
is refused in one line naming the JSON path of the fault (``$.customer.id``), the rule it
fails and where that rule is in the schema.

A run pushed without an input is checked as ``null``: a workflow whose schema wants an
object needs an input.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from engine.errors import DefinitionError
from engine.spec.definition import one_line

# keywords whose value is data, not a schema: a "$ref" inside one is a value like any other
_DATA = frozenset({"const", "enum", "default", "examples"})
# keywords whose value maps names (of properties, definitions) to schemas
_NAMED = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)
_REFS = ("$ref", "$dynamicRef", "$recursiveRef")
_UNMATCHABLE = "a pattern RE2 cannot compile ({}): no backreferences or lookaround"


def compile_schema(schema: Any, whose: str) -> Any:
    """A validator for ``schema`` (a JSON Schema: an object or a boolean); else
    :class:`DefinitionError` naming ``whose`` schema, the JSON path of the fault in it and
    what is wrong there."""
    import jsonschema
    from jsonschema.exceptions import SchemaError

    from engine.spec.schema_regex import linear

    if not isinstance(schema, dict | bool):
        raise DefinitionError(
            f"{whose}: input_schema must be a JSON Schema (an object), not {type(schema).__name__}"
        )
    if isinstance(schema, dict) and "$schema" in schema and not isinstance(schema["$schema"], str):
        raise DefinitionError(f"{whose}: input_schema's $schema must be a string (a draft's URI)")
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
        fault = next(_faults(schema, ()), None)
    except SchemaError as e:
        raise DefinitionError(
            f"{whose}: input_schema is not a valid JSON Schema: at {_short(e.json_path, 120)}: "
            f"fails the meta-schema's {e.validator!r}"
        ) from None
    except RecursionError:
        raise DefinitionError(f"{whose}: input_schema is nested too deeply") from None
    if fault is not None:
        raise DefinitionError(
            f"{whose}: input_schema at {_short(json_path(fault[0]), 120)}: {fault[1]}"
        )
    validator = linear(cls)(schema, registry=_registry(), format_checker=cls.FORMAT_CHECKER)
    for probe in _PROBES:  # a $ref that resolves nowhere, met on the way, is refused now
        _first_error(validator, probe, whose)
    return validator


def _faults(node: Any, at: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """The places in schema ``node`` (at path ``at``) that could reach outside the schema
    or that RE2 cannot match, and why: every object is looked at as a schema but the
    values of the data keywords, so a reference hidden in an unknown keyword is refused
    as well."""
    from engine.spec.schema_regex import pattern_fault

    if isinstance(node, list):
        for i, each in enumerate(node):
            yield from _faults(each, (*at, i))
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        here = (*at, key)
        if key in _DATA:
            continue
        if key in _REFS and isinstance(value, str) and not value.startswith("#"):
            yield here, f"a {key} must refer within the schema (start with '#'): nothing is fetched"
        elif key == "pattern" and isinstance(value, str):
            why = pattern_fault(value)
            if why is not None:
                yield here, _UNMATCHABLE.format(why)
        if key in _NAMED and isinstance(value, dict):
            for name, sub in value.items():
                if key == "patternProperties":
                    why = pattern_fault(name)
                    if why is not None:
                        yield (*here, name), _UNMATCHABLE.format(why)
                yield from _faults(sub, (*here, name))
        else:
            yield from _faults(value, here)


def _registry() -> Any:
    """A registry of schemas that never retrieves one: a reference resolves within the
    schema (and the drafts' meta-schemas), or nowhere."""
    from referencing import Registry
    from referencing.exceptions import NoSuchResource

    def refuse(uri: str) -> Any:
        raise NoSuchResource(ref=uri)  # type: ignore[call-arg]

    return Registry(retrieve=refuse)  # type: ignore[call-arg]


# values tried once when a schema is compiled: what they reach of it must apply
_PROBES: tuple[Any, ...] = (None, {}, [], "", 0, True)


def _first_error(validator: Any, value: Any, whose: str) -> Any:
    """The error of ``value`` that best says why it does not fit (None: it fits); a
    schema that cannot be applied to it (a ``$ref`` that resolves nowhere: nothing is
    retrieved) is :class:`DefinitionError`."""
    from jsonschema.exceptions import best_match
    from referencing.exceptions import Unresolvable

    try:
        return best_match(validator.iter_errors(value))
    except RecursionError:
        raise DefinitionError(f"{whose}: input_schema refers to itself without end") from None
    except Unresolvable as e:
        kind = type(getattr(e, "_wrapped", e)).__name__
        raise DefinitionError(
            f"{whose}: input_schema cannot be applied: {kind} (a $ref that resolves nowhere)"
        ) from None
    except Exception as e:  # noqa: BLE001 - any error of the library: the schema is at fault
        raise DefinitionError(
            f"{whose}: input_schema cannot be applied: {type(e).__name__}"
        ) from None


def check_input(validator: Any, value: Any, workflow: str) -> None:
    """Refuse ``value`` (:class:`DefinitionError`) unless it fits ``validator``'s schema:
    the message names the JSON path of the first fault, the rule it fails and where that
    rule is in the schema (never the schema's text)."""
    error = _first_error(validator, value, f"workflow {workflow!r}")
    if error is None:
        return
    if value is None:  # none given, where the schema wants one
        raise DefinitionError(
            f"workflow {workflow!r} needs an input: {wanted(validator.schema)} (its "
            "input_schema); none was given"
        )
    if error.validator is None:
        rule = "is not allowed (a false schema)"
    else:
        rule = f"fails {error.validator!r}"
    raise DefinitionError(
        f"input does not fit the input_schema of workflow {workflow!r}: at "
        f"{_short(error.json_path, 120)}: {rule} (input_schema at "
        f"{_short(json_path(error.absolute_schema_path), 120)})"
    )


_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_]*$")

# a type in words, with its article
_A = {"object": "an object", "array": "a list", "string": "a string", "integer": "an integer"}


def wanted(schema: Any) -> str:
    """In words, the type a schema's top level wants (``an object``): no more of the
    schema's text (the names it requires, its values) than a misfit's message shows."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, str):
        return _A.get(kind, f"a {kind}")
    return "a value that fits it"


def json_path(parts: Iterable[str | int]) -> str:
    """A path into a JSON document as jsonschema writes one: ``$.properties.id``,
    ``$.items[0]``, ``$['$defs']``."""
    path = "$"
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif _NAME.match(part):
            path += f".{part}"
        else:
            path += "['" + part.replace("\\", "\\\\").replace("'", "\\'") + "']"
    return path


def _short(text: str, most: int) -> str:
    """``text`` on one line (control characters escaped), cut to ``most`` characters."""
    text = one_line(" ".join(text.split()))
    return text if len(text) <= most else text[: most - 3] + "..."
