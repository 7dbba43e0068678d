"""Regular expressions of input schemas, matched in linear time.

Python's ``re`` backtracks: a pattern such as ``^(a+)+$`` against 30 characters of input
runs for minutes, holding the process (an HTTP server's every request) the while. So the
keywords of ``jsonschema`` that match a schema's regex against an input (``pattern``,
``patternProperties``, and ``additionalProperties`` / ``unevaluatedProperties``, which
look a property's name up in ``patternProperties``) run on RE2 (``google-re2``), whose
time is linear in the input. RE2 has no backreferences and no lookaround: a schema using
them is refused when it is stored (:func:`pattern_fault`).

The keywords are the library's own functions, their module's ``re`` swapped for RE2: the
library's semantics exactly, nothing copied to drift.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from functools import cache
from typing import Any

import re2
from jsonschema import _keywords, _legacy_keywords, _utils, validators

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is our message, not a line on stderr
_OPTIONS.never_capture = True  # the keywords only ask whether a pattern matches


def pattern_fault(pattern: str) -> str | None:
    """Why RE2 cannot compile ``pattern`` (the kind of fault, without the pattern's
    text), or None if it can."""
    try:
        re2.compile(pattern, _OPTIONS)
    except re2.error as e:
        text = e.args[0] if e.args else ""
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        return str(text).split(":", 1)[0] or "not a regular expression RE2 compiles"
    return None


class _Re2:
    """What the library's keywords use of module ``re``: ``search``, on RE2."""

    @staticmethod
    def search(pattern: str, string: str) -> Any:
        return re2.compile(pattern, _OPTIONS).search(string)


def _on_re2(fn: Callable[..., Any], **calls: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (a function of jsonschema) with ``re`` and the helpers named in ``calls``
    swapped in its globals; a function that calls itself calls its copy."""
    scope = {**fn.__globals__, "re": _Re2, **calls}
    copy = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    if scope.get(fn.__name__) is fn:
        scope[fn.__name__] = copy
    return copy


_LINEAR: dict[Callable[..., Any], Callable[..., Any]] = {
    _keywords.pattern: _on_re2(_keywords.pattern),
    _keywords.patternProperties: _on_re2(_keywords.patternProperties),
    _keywords.additionalProperties: _on_re2(
        _keywords.additionalProperties,
        find_additional_properties=_on_re2(_utils.find_additional_properties),
    ),
    _keywords.unevaluatedProperties: _on_re2(
        _keywords.unevaluatedProperties,
        find_evaluated_property_keys_by_schema=_on_re2(
            _utils.find_evaluated_property_keys_by_schema
        ),
    ),
    _legacy_keywords.unevaluatedProperties_draft2019: _on_re2(
        _legacy_keywords.unevaluatedProperties_draft2019,
        find_evaluated_property_keys_by_schema=_on_re2(
            _legacy_keywords.find_evaluated_property_keys_by_schema
        ),
    ),
}


_REGEX_KEYWORDS = {"pattern", "patternProperties", "additionalProperties", "unevaluatedProperties"}


@cache
def linear(cls: Any) -> Any:
    """Validator class ``cls`` (one draft's) with its regex keywords on RE2
    (``RuntimeError`` if the library implements one of them otherwise than this module
    knows: never Python's ``re`` on a schema's regex unnoticed)."""
    swapped = {k: _LINEAR[f] for k, f in cls.VALIDATORS.items() if f in _LINEAR}
    missed = _REGEX_KEYWORDS & cls.VALIDATORS.keys() - swapped.keys()
    if missed:
        raise RuntimeError(
            f"jsonschema's {cls.__name__} implements {', '.join(sorted(missed))} with "
            "functions engine.spec.schema_regex does not put on RE2"
        )
    return validators.extend(cls, swapped)
