"""How a registry tool's schemas and effect read as an MCP tool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.api.mcp.tool_listing import mcp_tool, structured_output
from app.contract import Tool, load_contract

RUNNER = {"allowed_tools": ["probe"], "max_calls": 1, "tool_timeout_s": 5}


def _tool(tmp_path: Path, input_schema: dict[str, Any], output_schema: dict[str, Any]) -> Tool:
    registry = {
        "subagents": {
            "desk": {
                "tools": {
                    "probe": {
                        "callable": "tests.api.mcp.mcp_tools:shout",
                        "description": "A probe.",
                        "input_schema": input_schema,
                        "output_schema": output_schema,
                    }
                },
                "runner_defaults": RUNNER,
            }
        }
    }
    path = tmp_path / "probe.yml"
    path.write_text(json.dumps(registry))
    return load_contract([path]).tools["probe"]


def test_an_input_schema_without_a_type_is_advertised_as_an_object(tmp_path: Path) -> None:
    tool = _tool(
        tmp_path,
        {"$schema": "https://json-schema.org/draft/2020-12/schema", "required": ["text"]},
        {"type": "object"},
    )
    assert mcp_tool(tool).input_schema == {"type": "object", "required": ["text"]}


def test_a_wrapped_output_keeps_its_definitions_resolvable(tmp_path: Path) -> None:
    tool = _tool(
        tmp_path,
        {"type": "object"},
        {"$defs": {"word": {"type": "string"}}, "type": "array", "items": {"$ref": "#/$defs/word"}},
    )
    assert mcp_tool(tool).output_schema == {
        "type": "object",
        "properties": {"result": {"type": "array", "items": {"$ref": "#/$defs/word"}}},
        "required": ["result"],
        "additionalProperties": False,
        "$defs": {"word": {"type": "string"}},
    }
    assert structured_output(tool, ["a", "b"]) == {"result": ["a", "b"]}


def test_an_object_output_is_given_as_it_is(tmp_path: Path) -> None:
    tool = _tool(tmp_path, {"type": "object"}, {"type": "object"})
    assert structured_output(tool, {"a": 1}) == {"a": 1}
