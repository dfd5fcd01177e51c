"""The remote tools of a contract: their connections, availability and bound targets."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.contract.compiled import Contract, ResolvedCallable, Tool
from app.engine.remote.connection import McpServerConnection, StatusListener
from app.engine.remote.pins import Mismatch, pin_of


@dataclass(frozen=True, slots=True)
class RemoteToolCall:
    """The callable a remote tool is bound to: the engine calls it with the admitted
    arguments, like any async callable, inside the tool's watchdog."""

    tool_id: str
    timeout_s: float
    connection: McpServerConnection

    async def __call__(self, **args: Any) -> Any:
        return await self.connection.call(self.tool_id, args, self.timeout_s)


class RemoteTools:
    """One connection per (url, token_env), shared by the tools it serves."""

    def __init__(
        self, contract: Contract, *, max_connections: int, on_status: StatusListener
    ) -> None:
        grouped: dict[tuple[str, str | None], list[Tool]] = {}
        for tool in contract.tools.values():
            if tool.mcp is not None:
                grouped.setdefault((tool.mcp.url, tool.mcp.token_env), []).append(tool)
        self._by_tool: dict[str, McpServerConnection] = {}
        self._connections: list[McpServerConnection] = []
        self._targets: dict[str, ResolvedCallable] = {}
        for (url, token_env), tools in grouped.items():
            connection = McpServerConnection(
                url,
                token_env,
                {tool.id: pin_of(tool) for tool in tools},
                # One connect serves all the server's tools: it may take the longest timeout.
                connect_timeout_s=max(tool.timeout_s for tool in tools),
                max_connections=max_connections,
                on_status=on_status,
            )
            self._connections.append(connection)
            for tool in tools:
                self._by_tool[tool.id] = connection
                call = RemoteToolCall(tool.id, tool.timeout_s, connection)
                self._targets[tool.id] = ResolvedCallable(
                    ref=f"mcp:{tool.id}", function=call, is_async=True
                )

    @property
    def targets(self) -> Mapping[str, ResolvedCallable]:
        """tool id -> the target to bind (`app.contract.remote.with_targets`)."""
        return self._targets

    def __bool__(self) -> bool:
        return bool(self._connections)

    async def check_all(self) -> None:
        """Connect to every server and compare the pins (each bounded by its timeout)."""
        await asyncio.gather(*(connection.check() for connection in self._connections))

    def unavailable(self) -> dict[str, Mismatch]:
        """tool id -> why it cannot be called now; remote tools only."""
        return {
            tool_id: mismatch
            for connection in self._connections
            for tool_id, mismatch in connection.unavailable.items()
        }

    async def aclose(self) -> None:
        await asyncio.gather(*(connection.aclose() for connection in self._connections))
