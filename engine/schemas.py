"""Input schemas: a workflow's (or template's) ``input_schema``, a JSON Schema every run's
input must fit.

Checked with the ``jsonschema`` library, before anything is written, on every way a run
is pushed: :meth:`Engine.push` / :meth:`Engine.run`, ``redisflow push --input`` and
``redisflow run``, the HTTP API's runs and webhooks (``400``), and schedules (when the
schedule is stored, and at each tick: a tick whose input does not fit is missed, with a
warning). The schema's draft is the one its ``$schema`` names, Draft 2020-12 without
one. A schema that is not valid itself is refused when the workflow is loaded, compiled
or stored as a template. An input that does not fit is refused in one line naming the
JSON path of the fault (``$.customer.id``) and what is wrong there.

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
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as e:
        at = e.json_path if hasattr(e, "json_path") else "$"
        raise DefinitionError(
            f"{whose}: input_schema is not a valid JSON Schema: at {at}: {_short(e.message)}"
        ) from None
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def check_input(validator: Any, value: Any, workflow: str) -> None:
    """Refuse ``value`` (:class:`DefinitionError`) unless it fits ``validator``'s schema:
    the message names the JSON path of the first fault."""
    from jsonschema.exceptions import best_match

    error = best_match(validator.iter_errors(value))
    if error is None:
        return
    raise DefinitionError(
        f"input does not fit the input_schema of workflow {workflow!r}: at {error.json_path}: "
        f"{_short(error.message)}"
    )


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."
