"""The pinned copy of a remote tool and the comparison with what its server lists.

A tool is unchanged when, after canonical JSON encoding (`canonical_json`: sorted
keys, no whitespace, one number form), all three are equal:

- `description` with the server's `description` (absent counts as "");
- `input_schema` with the server's `inputSchema`;
- `output_schema` with the server's `outputSchema`, where a server that declares
  none matches only a pinned `{}`.

Anything else the server lists (title, annotations, icons, _meta) is not pinned.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from mcp_types import Tool as ListedTool

from app.contract.compiled import Tool
from app.foundation.canonical import canonical_json


class Unavailable(StrEnum):
    """Why a remote tool is unavailable: a closed vocabulary (a metric label)."""

    MISSING = "missing"
    CHANGED = "changed"
    UNREACHABLE = "unreachable"


@dataclass(frozen=True, slots=True)
class Pin:
    remote_name: str
    description: str
    input_schema: Any
    output_schema: Any


@dataclass(frozen=True, slots=True)
class Mismatch:
    kind: Unavailable
    reason: str


def pin_of(tool: Tool) -> Pin:
    if tool.mcp is None:
        raise ValueError(f"tool {tool.id!r} is not a remote tool")
    return Pin(
        remote_name=tool.mcp.tool,
        description=tool.description,
        input_schema=tool.input_schema.source,
        output_schema=tool.output_schema.source,
    )


def listed_pin(listed: ListedTool) -> Pin:
    """What the server lists, in the registry's terms."""
    return Pin(
        remote_name=listed.name,
        description=listed.description or "",
        input_schema=listed.input_schema,
        output_schema={} if listed.output_schema is None else listed.output_schema,
    )


def compare(pin: Pin, listing: Iterable[ListedTool]) -> Mismatch | None:
    """None when the server lists the tool exactly as pinned."""
    listed = next((tool for tool in listing if tool.name == pin.remote_name), None)
    if listed is None:
        return Mismatch(
            Unavailable.MISSING, f"the MCP server lists no tool named {pin.remote_name!r}"
        )
    actual = listed_pin(listed)
    changed = [
        field
        for field, pinned, now in (
            ("description", pin.description, actual.description),
            ("input_schema", pin.input_schema, actual.input_schema),
            ("output_schema", pin.output_schema, actual.output_schema),
        )
        if not _same(pinned, now)
    ]
    if not changed:
        return None
    return Mismatch(
        Unavailable.CHANGED,
        f"the MCP server's tool {pin.remote_name!r} differs from the pinned copy in "
        + ", ".join(changed),
    )


def _same(pinned: Any, now: Any) -> bool:
    try:
        return canonical_json(pinned) == canonical_json(now)
    except (TypeError, ValueError):
        return False
