"""The registry the MCP endpoint tests serve: one owner, a tool of every effect."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TEXT_IN = {
    "type": "object",
    "properties": {"text": {"type": "string", "minLength": 1}},
    "required": ["text"],
    "additionalProperties": False,
}


def _tool(function: str, description: str, **options: Any) -> dict[str, Any]:
    return {
        "callable": f"tests.api.mcp.mcp_tools:{function}",
        "description": description,
        "input_schema": TEXT_IN,
        "output_schema": {"type": "object"},
        **options,
    }


TOOLS: dict[str, dict[str, Any]] = {
    "shout": _tool(
        "shout",
        "Upper-case the text, repeated.",
        effect="read",
        input_schema={
            "type": "object",
            "properties": {
                "text": {"type": "string", "minLength": 1},
                "times": {"type": "integer", "minimum": 1, "maximum": 3},
            },
            "required": ["text"],
            "additionalProperties": False,
        },
        output_schema={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    ),
    "count_words": _tool(
        "count_words", "Count the words.", effect="idempotent", output_schema={"type": "integer"}
    ),
    "explode": _tool("explode", "Always fails.", effect="non_idempotent"),
    "sign": _tool("sign", "Sign the text with a secret token.", effect="read", redact=["token"]),
    "transfer": _tool(
        "transfer",
        "Move money; a person approves each call.",
        effect="non_idempotent",
        requires_confirmation=True,
        input_schema={
            "type": "object",
            "properties": {"amount": {"type": "integer"}},
            "required": ["amount"],
            "additionalProperties": False,
        },
    ),
    "wait_for_file": _tool(
        "wait_for_file",
        "Wait until a file exists.",
        effect="read",
        input_schema={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": False,
        },
    ),
    "wait_briefly": _tool(
        "wait_for_file",
        "Wait for a file, for a fifth of a second at most.",
        effect="read",
        timeout_s=0.2,
        input_schema={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": False,
        },
    ),
    "remember": _tool(
        "shout", "Upper-case the text, once per text.", cacheable=True, effect="read"
    ),
    "hidden": _tool("shout", "Declared, but not in allowed_tools."),
}
ALLOWED = [
    "shout",
    "count_words",
    "explode",
    "sign",
    "transfer",
    "wait_for_file",
    "wait_briefly",
    "remember",
]
OWNER = "desk"


def write_registry(directory: Path) -> Path:
    runner = {"allowed_tools": ALLOWED, "max_calls": 8, "tool_timeout_s": 30}
    document = {"subagents": {OWNER: {"tools": TOOLS, "runner_defaults": runner}}}
    path = directory / "mcp.yml"
    # JSON is YAML, and shares no node between tools (the registry refuses anchors).
    path.write_text(json.dumps(document))
    return path
