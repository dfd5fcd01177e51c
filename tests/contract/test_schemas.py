from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.contract.errors import SchemaDefinitionError
from app.contract.schemas import (
    CompiledSchema,
    SchemaProblem,
    _build_validator,
    compile_schema,
    json_pointer,
)
from tests.contract.helpers import TEXT_OBJECT, base_registry, problems_of, write


def messages(schema: Any) -> list[str]:
    with pytest.raises(SchemaDefinitionError) as info:
        compile_schema(schema)
    return info.value.messages


def test_closed_object_schema() -> None:
    schema = compile_schema(TEXT_OBJECT)
    assert schema.is_closed_object
    assert schema.declared_properties == frozenset({"text"})
    assert schema.source == TEXT_OBJECT
    assert schema.is_valid({"text": "x"})
    assert not schema.is_valid({"text": "x", "extra": 1})


def test_empty_schema_accepts_anything_and_is_open() -> None:
    schema = compile_schema({})
    assert not schema.is_closed_object
    assert schema.declared_properties == frozenset()
    assert all(schema.is_valid(value) for value in ({}, [], "x", 1, None))


def test_source_is_a_copy() -> None:
    original = {"type": "object", "properties": {"a": {"type": "string"}}}
    schema = compile_schema(original)
    original["properties"]["a"]["type"] = "integer"
    assert schema.is_valid({"a": "x"})
    assert schema.source["properties"]["a"]["type"] == "string"


@pytest.mark.parametrize("schema", [True, False, None, [], "object", 1])
def test_root_must_be_an_object(schema: Any) -> None:
    (message,) = messages(schema)
    assert message.startswith("a schema must be a JSON object")


def test_boolean_subschemas_are_fine() -> None:
    schema = compile_schema({"type": "object", "properties": {"a": True, "b": False}})
    assert schema.is_valid({"a": 1})
    assert not schema.is_valid({"b": 1})


def test_metaschema_problems_are_all_reported() -> None:
    found = messages({"type": "foo", "properties": {"a": {"minimum": "x"}}, "required": "a"})
    assert len(found) == 3
    assert any(m.startswith("at /type:") for m in found)
    assert any(m.startswith("at /properties/a/minimum:") for m in found)
    assert any(m.startswith("at /required:") for m in found)


@pytest.mark.parametrize(
    "ref",
    [
        "https://example.com/schema.json",
        "http://127.0.0.1:1/x#/a",
        "other.json",
        "file:///etc/passwd",
        "urn:example:thing",
    ],
)
def test_remote_refs_are_refused(ref: str) -> None:
    (message,) = messages({"type": "object", "properties": {"a": {"$ref": ref}}})
    assert (
        message == f"at /properties/a/$ref: only local references ('#...') are allowed, got {ref!r}"
    )


def test_remote_dynamic_ref_is_refused() -> None:
    (message,) = messages({"items": {"$dynamicRef": "https://example.com/meta#node"}})
    assert message.startswith("at /items/$dynamicRef: only local references")


def test_refs_inside_unknown_places_are_still_checked() -> None:
    found = messages({"$defs": {"a": {"allOf": [{"$ref": "https://example.com/x"}]}}})
    assert found == [
        "at /$defs/a/allOf/0/$ref: only local references ('#...') are allowed, "
        "got 'https://example.com/x'"
    ]


def test_local_refs_and_anchors_work() -> None:
    schema = compile_schema(
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/text"}, "b": {"$ref": "#count"}},
            "$defs": {
                "text": {"type": "string"},
                "count": {"$anchor": "count", "type": "integer"},
            },
        }
    )
    assert schema.is_valid({"a": "x", "b": 1})
    assert not schema.is_valid({"a": 1})


def test_missing_local_target_is_a_definition_error() -> None:
    (message,) = messages({"$ref": "#/$defs/missing"})
    assert "cannot be compiled" in message
    assert "/$defs/missing" in message


def test_the_compiler_itself_never_fetches() -> None:
    # Our own rule refuses remote refs first; the validator is configured offline as well.
    with pytest.raises(SchemaDefinitionError, match="Retrieval is disabled"):
        _build_validator({"$ref": "https://example.com/schema.json"})


def test_only_the_2020_12_dialect() -> None:
    compile_schema({"$schema": "https://json-schema.org/draft/2020-12/schema"})
    (message,) = messages({"$schema": "http://json-schema.org/draft-07/schema#"})
    assert message.startswith("at /$schema: only the Draft 2020-12 dialect")


def test_unknown_keywords_are_refused_but_x_annotations_pass() -> None:
    (message,) = messages({"type": "object", "additionalproperties": False})
    assert message.startswith("at /additionalproperties: unknown keyword 'additionalproperties'")
    assert messages({"definitions": {}})[0].startswith("at /definitions: unknown keyword")
    compile_schema({"type": "string", "x-ui": {"widget": "textarea"}})


def test_catastrophic_pattern_runs_in_linear_time() -> None:
    schema = compile_schema({"type": "string", "pattern": "^(a+)+$"})
    assert schema.is_valid("a" * 40)
    assert not schema.is_valid("a" * 40 + "b")
    assert schema.problems("a" * 5000 + "b")[0].pointer == ""


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"pattern": "(a)\\1"}, "/pattern"),
        ({"pattern": "(?=a)b"}, "/pattern"),
        ({"pattern": "(?<!a)b"}, "/pattern"),
        ({"patternProperties": {"^(x)\\1$": {}}}, "/patternProperties/^(x)\\1$"),
    ],
)
def test_patterns_the_linear_engine_cannot_compile(schema: Any, where: str) -> None:
    (message,) = messages(schema)
    assert message.startswith(f"at {where}: regular expression")
    assert "not supported by the linear-time regex engine" in message


def test_problems_report_every_error_with_a_pointer() -> None:
    schema = compile_schema(
        {
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": {"type": "integer"}},
                "a/b": {"type": "string"},
                "m~n": {"type": "string"},
                "name": {},
            },
            "required": ["name"],
            "additionalProperties": False,
        }
    )
    problems = schema.problems({"items": [1, "x", 3, "y"], "a/b": 1, "m~n": 2, "extra": 0})
    assert sorted(p.pointer for p in problems) == ["", "", "/a~1b", "/items/1", "/items/3", "/m~0n"]
    assert all(isinstance(p, SchemaProblem) and p.message for p in problems)
    assert schema.problems({"name": 1}) == []
    assert schema.is_valid({"name": 1})


def test_non_json_instances_fail_closed() -> None:
    schema = compile_schema({"type": "object", "properties": {"a": {"type": "string"}}})
    assert not schema.is_valid({"a": object()})
    (problem,) = schema.problems({1: "x"})
    assert problem.pointer == ""
    assert problem.message.startswith("not a JSON value")


def test_big_integers_are_validated_exactly() -> None:
    schema = compile_schema({"type": "integer", "maximum": 2**64})
    assert schema.is_valid(2**64)
    assert not schema.is_valid(2**64 + 1)


def test_json_pointer_escapes() -> None:
    assert json_pointer([]) == ""
    assert json_pointer(["a/b", "c~d", 0]) == "/a~1b/c~0d/0"


def test_compiled_schema_is_immutable() -> None:
    schema = compile_schema({})
    with pytest.raises(AttributeError):
        schema.is_closed_object = True  # type: ignore[misc]
    assert isinstance(schema, CompiledSchema)


def test_schema_problems_in_a_registry_name_the_schema(tmp_path: Path) -> None:
    registry = base_registry()
    tool = registry["subagents"]["worker-a"]["tools"]["transform"]
    tool["input_schema"] = {"type": "object", "properties": {"a": {"$ref": "https://x.test/s"}}}
    tool["output_schema"] = {"type": "nothing"}
    problems = problems_of([write(tmp_path, "r.yml", registry)])
    assert [p.path for p in problems] == [
        "subagents.worker-a.tools.transform.input_schema",
        "subagents.worker-a.tools.transform.output_schema",
    ]
    assert problems[0].message.startswith("at /properties/a/$ref: only local references")


def test_problem_messages_never_repeat_the_rejected_value() -> None:
    schema = compile_schema(
        {
            "type": "object",
            "properties": {
                "t": {"type": "integer"},
                "e": {"enum": ["a", "b"]},
                "c": {"const": "x"},
                "n": {"minimum": 3},
                "s": {"maxLength": 2},
                "p": {"pattern": "^a$"},
                "r": {"type": "object", "required": ["q"]},
                "one": {"oneOf": [{"type": "string"}, {"type": "string"}]},
                "no": {"not": {"type": "string"}},
                "u": {"uniqueItems": True},
                "pn": {"propertyNames": {"maxLength": 1}},
                "any": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
            },
            "additionalProperties": False,
        }
    )
    secret = "hunter2-secret"
    instance = {
        "t": secret,
        "e": secret,
        "c": secret,
        "n": 1,
        "s": secret,
        "p": secret,
        "r": {"k": secret},
        "one": secret,
        "no": secret,
        "u": [secret, secret],
        "pn": {secret: 1},
        "any": secret,
        "extra": secret,
    }
    messages = {p.pointer: p.message for p in schema.problems(instance)}
    assert all(secret not in message for message in messages.values())
    assert messages == {
        "/t": "expected integer, got string",
        "/e": "must be one of 'a', 'b'",
        "/c": "must be 'x'",
        "/n": "must be at least 3",
        "/s": "must be at most 2 characters long",
        "/p": "must match the pattern '^a$'",
        "/r": "missing required property 'q'",
        "/one": "matches more than one schema of oneOf",
        "/no": "matches a schema it must not match",
        "/u": "items must be unique",
        "/pn": "has a property name that the schema does not allow",
        "/any": "matches no schema of anyOf",
        "": "unexpected properties: 'extra'",
    }
