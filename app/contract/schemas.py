"""JSON Schema gates: Draft 2020-12, local references only, linear-time regex.

A registry schema is checked in three steps, and every problem is reported:
1. the Draft 2020-12 metaschema (the reference implementation, `jsonschema`);
2. our own rules: a JSON object at the root, only Draft 2020-12 keywords
   (plus `x-` annotations), `$ref`/`$dynamicRef` only to local fragments ("#...");
3. compilation with `jsonschema_rs`, offline (nothing is ever fetched) and with
   the linear-time regex engine, so `pattern` cannot backtrack catastrophically.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import jsonschema_rs

from app.contract.errors import SchemaDefinitionError
from app.contract.schema_messages import describe, json_type

DIALECT = "https://json-schema.org/draft/2020-12/schema"

_SUBSCHEMA = frozenset(
    {
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "items",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
_SUBSCHEMA_MAP = frozenset({"$defs", "dependentSchemas", "patternProperties", "properties"})
_SUBSCHEMA_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_REFERENCES = frozenset({"$ref", "$dynamicRef"})
_OTHER_KEYWORDS = frozenset(
    {
        "$anchor",
        "$comment",
        "$dynamicAnchor",
        "$id",
        "$schema",
        "$vocabulary",
        "const",
        "contentEncoding",
        "contentMediaType",
        "default",
        "dependentRequired",
        "deprecated",
        "description",
        "enum",
        "examples",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "format",
        "maxContains",
        "maxItems",
        "maxLength",
        "maxProperties",
        "maximum",
        "minContains",
        "minItems",
        "minLength",
        "minProperties",
        "minimum",
        "multipleOf",
        "pattern",
        "readOnly",
        "required",
        "title",
        "type",
        "uniqueItems",
        "writeOnly",
    }
)

_METASCHEMA_CHECKER = jsonschema.Draft202012Validator(
    jsonschema.Draft202012Validator.META_SCHEMA,
    format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
)


@dataclass(frozen=True, slots=True)
class SchemaProblem:
    pointer: str
    message: str


@dataclass(frozen=True, slots=True, eq=False)
class CompiledSchema:
    source: Mapping[str, Any]
    is_closed_object: bool
    declared_properties: frozenset[str]
    _validator: Any = field(repr=False)

    def is_valid(self, instance: Any) -> bool:
        try:
            valid: bool = self._validator.is_valid(instance)  # jsonschema-rs answers a bool
        except ValueError:
            return False
        return valid

    def problems(self, instance: Any) -> list[SchemaProblem]:
        try:
            errors = list(self._validator.iter_errors(instance))
        except ValueError as exc:
            return [SchemaProblem("", f"not a JSON value: {exc}")]
        return [
            SchemaProblem(json_pointer(error.instance_path), describe(error)) for error in errors
        ]


def compile_schema(schema: Any) -> CompiledSchema:
    if not isinstance(schema, Mapping):
        raise SchemaDefinitionError(
            [
                f"a schema must be a JSON object, not {json_type(schema)}; "
                "use {} to accept any value"
            ]
        )
    source = copy.deepcopy(dict(schema))
    messages = [
        f"at {json_pointer(error.absolute_path) or '/'}: {error.message}"
        for error in _METASCHEMA_CHECKER.iter_errors(source)
    ]
    messages.extend(_rule_violations(source, ""))
    if messages:
        raise SchemaDefinitionError(messages)
    return CompiledSchema(
        source=source,
        is_closed_object=_is_closed_object(source),
        declared_properties=_declared_properties(source),
        _validator=_build_validator(source),
    )


def json_pointer(path: Any) -> str:
    """RFC 6901 pointer for a sequence of keys and indexes ("" is the root)."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def _build_validator(source: dict[str, Any]) -> Any:
    try:
        return jsonschema_rs.Draft202012Validator(
            source,
            offline=True,
            pattern_options=jsonschema_rs.RegexOptions(),
        )
    except jsonschema_rs.ValidationError as exc:
        raise SchemaDefinitionError([_compile_message(exc)]) from None
    except (ValueError, jsonschema_rs.ReferencingError) as exc:
        raise SchemaDefinitionError([f"cannot be compiled: {exc}"]) from None


def _compile_message(exc: Any) -> str:
    where = json_pointer(exc.instance_path) or "/"
    kind = exc.kind
    if kind.name == "format" and kind.as_dict().get("format") == "regex":
        return (
            f"at {where}: regular expression {exc.instance!r} is not supported by the "
            "linear-time regex engine (no backreferences, lookahead or lookbehind)"
        )
    return f"at {where}: cannot be compiled: {exc.message}"


def _rule_violations(schema: Any, pointer: str) -> Iterator[str]:
    if not isinstance(schema, Mapping):
        return
    for keyword, value in schema.items():
        here = pointer + json_pointer([keyword])
        if not isinstance(keyword, str):
            yield f"at {pointer or '/'}: keyword {keyword!r} is not a string"
        elif keyword in _SUBSCHEMA:
            yield from _rule_violations(value, here)
        elif keyword in _SUBSCHEMA_MAP and isinstance(value, Mapping):
            for name, subschema in value.items():
                yield from _rule_violations(subschema, here + json_pointer([name]))
        elif keyword in _SUBSCHEMA_LIST and isinstance(value, list):
            for index, subschema in enumerate(value):
                yield from _rule_violations(subschema, f"{here}/{index}")
        elif keyword in _REFERENCES:
            if not (isinstance(value, str) and value.startswith("#")):
                yield f"at {here}: only local references ('#...') are allowed, got {value!r}"
        elif keyword == "$schema":
            if value != DIALECT:
                yield f"at {here}: only the Draft 2020-12 dialect {DIALECT!r} is supported"
        elif keyword not in _OTHER_KEYWORDS and not keyword.startswith("x-"):
            yield (
                f"at {here}: unknown keyword {keyword!r} "
                "(not Draft 2020-12; prefix custom annotations with 'x-')"
            )


def _is_closed_object(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") == "object" and schema.get("additionalProperties") is False


def _declared_properties(schema: Mapping[str, Any]) -> frozenset[str]:
    properties = schema.get("properties")
    return frozenset(properties) if isinstance(properties, Mapping) else frozenset()
