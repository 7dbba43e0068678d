"""Input schemas: a workflow's (or template's) ``input_schema``, a JSON Schema every run's
input must fit.

Checked with the ``jsonschema`` library, before anything is written, on every way a run
is pushed: :meth:`Engine.push` / :meth:`Engine.run`, ``redisflow push --input`` and
``redisflow run``, the HTTP API's runs and webhooks (``400``), and schedules (when the
schedule is stored, and at each tick: a tick whose input does not fit is missed, with a
warning). The schema's draft is the one its ``$schema`` names, Draft 2020-12 without
one. A schema that is not valid itself is refused when the workflow is compiled (pushed,
stored as a template); a ``$ref`` is resolved within the schema only (nothing is
fetched), and one that resolves nowhere is refused as soon as a value reaches it. An
input that does not fit is refused in one line naming the JSON path of the fault
(``$.customer.id``) and what is wrong there.

A run pushed without an input is checked as ``null``: a workflow whose schema wants an
object needs an input.
"""

from __future__ import annotations

from typing import Any

from .errors import DefinitionError


def compile_schema(schema: Any, whose: str) -> Any:
    """A validator for ``schema`` (a JSON Schema: an object or a boolean); else
    :class:`DefinitionError` naming ``whose`` schema and what is wrong with it."""
    import jsonschema
    from jsonschema.exceptions import SchemaError

    if not isinstance(schema, dict | bool):
        raise DefinitionError(
            f"{whose}: input_schema must be a JSON Schema (an object), not {type(schema).__name__}"
        )
    if isinstance(schema, dict) and "$schema" in schema and not isinstance(schema["$schema"], str):
        raise DefinitionError(f"{whose}: input_schema's $schema must be a string (a draft's URI)")
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as e:
        at = e.json_path if hasattr(e, "json_path") else "$"
        raise DefinitionError(
            f"{whose}: input_schema is not a valid JSON Schema: at {at}: {_short(e.message)}"
        ) from None
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    for probe in _PROBES:  # a $ref that resolves nowhere, met on the way, is refused now
        _first_error(validator, probe, whose)
    return validator


# values tried once when a schema is compiled: what they reach of it must apply
_PROBES: tuple[Any, ...] = (None, {}, [], "", 0, True)


def _first_error(validator: Any, value: Any, whose: str) -> Any:
    """The error of ``value`` that best says why it does not fit (None: it fits); a
    schema that cannot be applied to it (a ``$ref`` that resolves nowhere: nothing is
    fetched from the network) is :class:`DefinitionError`."""
    from jsonschema.exceptions import best_match

    try:
        return best_match(validator.iter_errors(value))
    except RecursionError:
        raise DefinitionError(f"{whose}: input_schema refers to itself without end") from None
    except Exception as e:  # noqa: BLE001 - any error of the library: the schema is at fault
        raise DefinitionError(
            f"{whose}: input_schema cannot be applied: {_short(str(e) or type(e).__name__)}"
        ) from None


def check_input(validator: Any, value: Any, workflow: str) -> None:
    """Refuse ``value`` (:class:`DefinitionError`) unless it fits ``validator``'s schema:
    the message names the JSON path of the first fault."""
    error = _first_error(validator, value, f"workflow {workflow!r}")
    if error is None:
        return
    raise DefinitionError(
        f"input does not fit the input_schema of workflow {workflow!r}: at {error.json_path}: "
        f"{_short(error.message)}"
    )


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."
