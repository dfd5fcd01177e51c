"""What "changed" means for a pinned remote tool (canonical JSON of three fields)."""

from __future__ import annotations

from typing import Any

from mcp_types import Tool as ListedTool

from app.engine.remote.pins import Pin, Unavailable, compare

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 10}}}
PIN = Pin("count", "Count things.", SCHEMA, {})


def listed(**overrides: Any) -> ListedTool:
    fields: dict[str, Any] = {
        "name": "count",
        "description": "Count things.",
        "input_schema": SCHEMA,
        "output_schema": None,
    }
    fields.update(overrides)
    return ListedTool(**fields)


def test_the_same_tool_in_another_key_order_and_number_form_is_unchanged() -> None:
    reordered = {"properties": {"n": {"maximum": 10.0, "type": "integer"}}, "type": "object"}
    assert compare(PIN, [listed(input_schema=reordered)]) is None


def test_title_and_annotations_are_not_pinned() -> None:
    assert compare(PIN, [listed(title="Counter", annotations={"readOnlyHint": True})]) is None


def test_a_missing_tool_is_named() -> None:
    mismatch = compare(PIN, [listed(name="other")])
    assert mismatch is not None
    assert mismatch.kind is Unavailable.MISSING
    assert mismatch.reason == "the MCP server lists no tool named 'count'"


def test_each_changed_field_is_named() -> None:
    mismatch = compare(
        PIN,
        [
            listed(
                description="Count things!",
                input_schema={**SCHEMA, "required": ["n"]},
                output_schema={"type": "object"},
            )
        ],
    )
    assert mismatch is not None
    assert mismatch.kind is Unavailable.CHANGED
    assert mismatch.reason.endswith("description, input_schema, output_schema")


def test_a_server_without_output_schema_matches_only_an_empty_pinned_one() -> None:
    assert compare(PIN, [listed(output_schema=None)]) is None
    pinned_object = Pin("count", "Count things.", SCHEMA, {"type": "object"})
    mismatch = compare(pinned_object, [listed(output_schema=None)])
    assert mismatch is not None
    assert mismatch.reason.endswith("output_schema")


def test_true_and_one_are_different() -> None:
    pinned = Pin("count", "Count things.", {"const": True}, {})
    assert compare(pinned, [listed(input_schema={"const": 1})]) is not None
