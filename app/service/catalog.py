"""A read-only description of the loaded contract for operators."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.contract import Contract


def describe_contract(
    contract: Contract, unavailable: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """`unavailable`: tool id -> why it cannot be called now (remote tools)."""
    unavailable = unavailable or {}
    owners = []
    for name in sorted(contract.owners):
        owner = contract.owners[name]
        defaults = owner.runner_defaults
        owners.append(
            {
                "owner": name,
                "tools": [
                    {
                        "id": tool.id,
                        "description": tool.description,
                        "input_schema": tool.input_schema.source,
                        "output_schema": tool.output_schema.source,
                        "cacheable": tool.cacheable,
                        "effect": tool.effect.value,
                        "timeout_s": tool.timeout_s,
                        "requires_confirmation": tool.requires_confirmation,
                        "remote": tool.mcp is not None,
                        "available": tool.id not in unavailable,
                        "unavailable_reason": unavailable.get(tool.id),
                    }
                    for tool in sorted(owner.tools.values(), key=lambda t: t.id)
                ],
                "runner_defaults": {
                    "allowed_tools": list(defaults.allowed_tools),
                    "max_calls": defaults.max_calls,
                    "tool_timeout_s": defaults.tool_timeout_s,
                },
            }
        )
    return {"contract_hash": contract.hash, "owners": owners}
