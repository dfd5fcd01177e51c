"""Remote (MCP) tools in a contract: compiled unbound, bound by the service.

Compiling stays pure (no network): an `mcp` tool gets a target that refuses to
run. The service, once it has connections, makes a copy of the contract whose
remote tools are bound to them (`with_targets`); the copy keeps the hash, since
the canonical form holds declarations only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any, NoReturn

from app.contract.compiled import Contract, Owner, ResolvedCallable


class RemoteToolNotBound(RuntimeError):
    pass


async def unbound_remote_tool(**_: Any) -> NoReturn:
    raise RemoteToolNotBound("remote MCP tool has no connection: the service did not bind it")


def unbound_remote_target(tool_id: str) -> ResolvedCallable:
    return ResolvedCallable(ref=f"mcp:{tool_id}", function=unbound_remote_tool, is_async=True)


def with_targets(contract: Contract, targets: Mapping[str, ResolvedCallable]) -> Contract:
    """The same contract with the named tools' targets replaced."""
    if not targets:
        return contract
    owners: dict[str, Owner] = {}
    for name, owner in contract.owners.items():
        tools = {
            tool_id: replace(tool, target=targets[tool_id]) if tool_id in targets else tool
            for tool_id, tool in owner.tools.items()
        }
        owners[name] = replace(owner, tools=MappingProxyType(tools))
    return replace(
        contract,
        owners=MappingProxyType(owners),
        tools=MappingProxyType(
            {tool.id: tool for owner in owners.values() for tool in owner.tools.values()}
        ),
    )
