"""An owner's `allowed_tools` as MCP tools: name, description, schemas, annotations.

MCP asks for object schemas (`type: "object"` at the root) through its
2025-11-25 revision. An input schema without a `type` gets `"type": "object"`
(MCP arguments are always an object). An output schema that does not declare
an object is advertised wrapped, `{"result": <the tool's schema>}`, and every
successful call's output is wrapped the same way (`structured_output`): a
tool's structured shape is the same whichever protocol revision a client
speaks. The top-level `$schema` is left out: MCP's default dialect is Draft
2020-12, the only one the registry admits, and some clients' validators know
no other URI.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types

from app.contract import Contract, Effect, Owner, Tool

WRAPPED = "result"


def owner_tools(contract: Contract, owner: Owner) -> list[Tool]:
    """The owner's `allowed_tools` that it owns, in the order declared."""
    return [
        contract.tools[name]
        for name in owner.runner_defaults.allowed_tools
        if name in owner.tools and name in contract.tools
    ]


def mcp_tool(tool: Tool) -> types.Tool:
    return types.Tool(
        name=tool.id,
        description=tool.description,
        input_schema=_input_schema(tool.input_schema.source),
        output_schema=_output_schema(tool.output_schema.source),
        annotations=effect_annotations(tool.effect),
    )


def effect_annotations(effect: Effect) -> types.ToolAnnotations:
    """`read` is read-only; `idempotent` changes things, the same way each time;
    `non_idempotent` may change things anew on every call (destructive)."""
    if effect is Effect.READ:
        return types.ToolAnnotations(read_only_hint=True)
    if effect is Effect.IDEMPOTENT:
        return types.ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=True
        )
    return types.ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False)


def is_wrapped(tool: Tool) -> bool:
    return not _declares_object(tool.output_schema.source)


def structured_output(tool: Tool, output: Any) -> Any:
    """The call's output as the advertised `outputSchema` describes it."""
    return {WRAPPED: output} if is_wrapped(tool) else output


def _declares_object(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") == "object"


def _input_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    advertised = _without_dialect(schema)
    advertised.setdefault("type", "object")
    return advertised


def _output_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    advertised = _without_dialect(schema)
    if _declares_object(advertised):
        return advertised
    # Local references ("#/$defs/...") still resolve once the definitions sit at the root.
    definitions = advertised.pop("$defs", None)
    wrapper: dict[str, Any] = {
        "type": "object",
        "properties": {WRAPPED: advertised},
        "required": [WRAPPED],
        "additionalProperties": False,
    }
    if definitions is not None:
        wrapper["$defs"] = definitions
    return wrapper


def _without_dialect(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in schema.items() if key != "$schema"}
