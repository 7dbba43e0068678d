"""A workflow whose input_schema wants an input, pushed without one, says so in words
(the type the schema wants; as every schema message, none of the schema's text), not as a
type error of ``None``."""

from __future__ import annotations

import pytest

from engine.errors import DefinitionError
from engine.spec.schemas import check_input, compile_schema, wanted


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"type": "object", "required": ["customer"]}, "an object"),  # not the names
        ({"type": "array"}, "a list"),
        ({"type": "integer"}, "an integer"),
        ({"type": "number"}, "a number"),
        ({"type": ["object", "array"]}, "a value that fits it"),
        ({"anyOf": [{"type": "object"}]}, "a value that fits it"),
        (False, "a value that fits it"),
    ],
)
def test_no_input_names_what_the_schema_wants(schema: object, says: str) -> None:
    assert wanted(schema) == says
    with pytest.raises(DefinitionError) as refused:
        check_input(compile_schema(schema, "w"), None, "w")
    assert str(refused.value) == (
        f"workflow 'w' needs an input: {says} (its input_schema); none was given"
    )


def test_a_schema_that_takes_null_takes_no_input() -> None:
    check_input(compile_schema({"type": ["object", "null"]}, "w"), None, "w")


def test_a_wrong_input_still_names_the_path_and_rule() -> None:
    with pytest.raises(DefinitionError, match=r"at \$: fails 'type'"):
        check_input(compile_schema({"type": "object"}, "w"), [], "w")
