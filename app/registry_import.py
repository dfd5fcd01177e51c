"""`toolloop registry import-mcp`: registry YAML pinning an MCP server's tools as they are now.

The output is for a person to review and commit: each tool's description and
schemas are copied exactly (they are the pins the service compares with the
server), its effect is read from the server's annotations (`readOnlyHint` ->
read, `idempotentHint` -> idempotent, otherwise non_idempotent), and the
runner defaults are the command's options. A tool without a description
cannot be pinned and is left out, with a note on stderr.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import yaml
from mcp_types import Tool as ListedTool

from app.contract.declarations import is_name
from app.engine.remote.listing import list_tools, mcp_client

_NOT_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


async def import_mcp_tools(
    url: str,
    *,
    owner: str | None,
    token_env: str | None,
    timeout_s: float,
    tool_timeout_s: float,
    max_calls: int | None,
    warn: Callable[[str], None],
) -> str:
    async with mcp_client(url, token_env, timeout_s, max_connections=1) as client:
        listing = await list_tools(client)
        server_name = client.server_info.name if client.server_info is not None else ""
    owner_name = owner or _name(server_name) or "mcp"
    endpoint: dict[str, Any] = {"url": url}
    if token_env is not None:
        endpoint["token_env"] = token_env
    tools: dict[str, Any] = {}
    for listed in listing:
        if not (listed.description or "").strip():
            warn(f"tool {listed.name!r} has no description to pin: left out")
            continue
        tool_id = _unique(_name(listed.name) or "tool", tools)
        tools[tool_id] = _tool(listed, {**endpoint, "tool": listed.name})
    registry = {
        "subagents": {
            owner_name: {
                "tools": tools,
                "runner_defaults": {
                    "allowed_tools": list(tools),
                    "max_calls": max_calls if max_calls is not None else max(len(tools), 1),
                    "tool_timeout_s": tool_timeout_s,
                },
            }
        }
    }
    header = (
        f"# Imported from an MCP server by `toolloop registry import-mcp`: {len(tools)} tool(s).\n"
        "# The descriptions and schemas are pins: review them, then commit.\n"
    )
    return header + yaml.safe_dump(registry, sort_keys=False, allow_unicode=True, width=100)


def _tool(listed: ListedTool, endpoint: dict[str, Any]) -> dict[str, Any]:
    annotations = listed.annotations
    effect = "non_idempotent"
    if annotations is not None and annotations.read_only_hint:
        effect = "read"
    elif annotations is not None and annotations.idempotent_hint:
        effect = "idempotent"
    return {
        "mcp": endpoint,
        "description": listed.description,
        "input_schema": listed.input_schema,
        "output_schema": {} if listed.output_schema is None else listed.output_schema,
        "effect": effect,
    }


def _name(text: str) -> str:
    name = _NOT_NAME_CHARS.sub("_", text)[:64]
    return name if is_name(name) else ""


def _unique(name: str, taken: dict[str, Any]) -> str:
    candidate, number = name, 2
    while candidate in taken:
        suffix = f"_{number}"
        candidate, number = name[: 64 - len(suffix)] + suffix, number + 1
    return candidate
