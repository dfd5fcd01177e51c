from __future__ import annotations

from typing import Any

import pytest

from app.contract.schemas import compile_schema
from app.engine.projection import project_payload

PAYLOAD = {"text": "x", "count": 2, "trace": "t-1", "extra": {"nested": True}}


def test_closed_schema_keeps_only_declared_top_level_properties() -> None:
    schema = compile_schema(
        {
            "type": "object",
            "properties": {"text": {"type": "string"}, "count": {"type": "integer"}},
            "additionalProperties": False,
        }
    )
    assert project_payload(schema, PAYLOAD) == {"text": "x", "count": 2}


def test_closed_schema_omits_declared_properties_absent_from_the_payload() -> None:
    schema = compile_schema(
        {
            "type": "object",
            "properties": {"text": {}, "missing": {}},
            "additionalProperties": False,
        }
    )
    assert project_payload(schema, PAYLOAD) == {"text": "x"}


def test_closed_schema_without_properties_projects_to_nothing() -> None:
    schema = compile_schema({"type": "object", "additionalProperties": False})
    assert project_payload(schema, PAYLOAD) == {}


@pytest.mark.parametrize(
    "source",
    [
        {},
        {"type": "object"},
        {"type": "object", "properties": {"text": {}}},
        {"type": "object", "properties": {"text": {}}, "additionalProperties": True},
        {"type": "object", "properties": {"text": {}}, "additionalProperties": {}},
    ],
)
def test_open_or_empty_schema_receives_the_full_payload(source: dict[str, Any]) -> None:
    projected = project_payload(compile_schema(source), PAYLOAD)
    assert projected == PAYLOAD
    assert projected is not PAYLOAD


def test_projection_never_renames_or_mutates() -> None:
    payload = {"Text": "upper", "text": "lower"}
    schema = compile_schema(
        {"type": "object", "properties": {"text": {}}, "additionalProperties": False}
    )
    assert project_payload(schema, payload) == {"text": "lower"}
    assert payload == {"Text": "upper", "text": "lower"}
