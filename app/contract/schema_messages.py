"""Validation messages that never repeat the value that failed.

jsonschema-rs messages quote the instance ('"hunter2" is not of type "integer"'),
and problem messages end up in receipts, audit rows and logs. These say what
the schema expects, using only the schema's own constraints, the JSON type of
the value and, for unexpected properties, their names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jsonschema_rs

_Kind = Any


def _limit(template: str) -> Callable[[_Kind], str]:
    return lambda kind: template.format(limit=kind.limit)


def _choices(values: list[Any]) -> str:
    shown = ", ".join(_short(value) for value in values[:10])
    return shown + (", ..." if len(values) > 10 else "")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _one_of(kind: _Kind) -> str:
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.OneOfMultipleValid):
        return "matches more than one schema of oneOf"
    return "matches no schema of oneOf"


_MESSAGES: dict[str, Callable[[_Kind], str]] = {
    "additionalItems": _limit("has more than {limit} items"),
    "additionalProperties": lambda kind: f"unexpected properties: {_choices(kind.unexpected)}",
    "anyOf": lambda kind: "matches no schema of anyOf",
    "const": lambda kind: f"must be {_short(kind.expected_value)}",
    "contains": lambda kind: "contains no item matching the schema",
    "contentEncoding": lambda kind: f"is not {kind.content_encoding}-encoded",
    "contentMediaType": lambda kind: f"is not of media type {kind.content_media_type}",
    "enum": lambda kind: f"must be one of {_choices(kind.options)}",
    "exclusiveMaximum": _limit("must be less than {limit}"),
    "exclusiveMinimum": _limit("must be greater than {limit}"),
    "falseSchema": lambda kind: "no value is allowed here",
    "format": lambda kind: f"is not a valid {kind.format}",
    "maxItems": _limit("must have at most {limit} items"),
    "maximum": _limit("must be at most {limit}"),
    "maxLength": _limit("must be at most {limit} characters long"),
    "maxProperties": _limit("must have at most {limit} properties"),
    "minItems": _limit("must have at least {limit} items"),
    "minimum": _limit("must be at least {limit}"),
    "minLength": _limit("must be at least {limit} characters long"),
    "minProperties": _limit("must have at least {limit} properties"),
    "multipleOf": lambda kind: f"must be a multiple of {kind.multiple_of}",
    "not": lambda kind: "matches a schema it must not match",
    "oneOf": _one_of,
    "pattern": lambda kind: f"must match the pattern {kind.pattern!r}",
    "propertyNames": lambda kind: "has a property name that the schema does not allow",
    "required": lambda kind: f"missing required property {kind.property!r}",
    "uniqueItems": lambda kind: "items must be unique",
    "unevaluatedItems": lambda kind: "has items the schema does not allow",
    "unevaluatedProperties": lambda kind: f"unexpected properties: {_choices(kind.unexpected)}",
}


def describe(error: Any) -> str:
    kind = error.kind
    if kind.name == "type":
        expected = " or ".join(kind.types)
        return f"expected {expected}, got {json_type(error.instance)}"
    message = _MESSAGES.get(kind.name)
    if message is None:
        return f"fails the {kind.name!r} keyword"
    try:
        return message(kind)
    except AttributeError:
        return f"fails the {kind.name!r} keyword"


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__
