"""One MCP server: one pooled client session, checked against the pins on every connect.

The session lives in its own task (the SDK's transport holds anyio task groups,
which must be entered and left by one task); calls from any task share it, each
a request of its own, over an HTTP client whose connection pool is bounded. It
connects on first use (or at startup), lists the server's tools and compares
them with the pins; a tool missing or changed is unavailable until the next
connect. A call that does not finish (the tool's timeout, a cancelled run) or a
transport failure drops the session; the next call connects again and so
checks the pins again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack, suppress
from typing import Any

from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult
from mcp_types import Tool as ListedTool

from app.engine.remote.errors import RemoteToolFailed, RemoteToolUnavailable, untrusted_text
from app.engine.remote.listing import SessionSeen, list_tools, mcp_client
from app.engine.remote.pins import Mismatch, Pin, Unavailable, compare

# tool id -> its mismatch, or None once it is available again.
StatusListener = Callable[[str, Mismatch | None], None]


class McpServerConnection:
    def __init__(
        self,
        url: str,
        token_env: str | None,
        pins: Mapping[str, Pin],
        *,
        connect_timeout_s: float,
        max_connections: int,
        on_status: StatusListener,
    ) -> None:
        """`pins`: tool id -> pin, for every registry tool this server serves."""
        self._url = url
        self._token_env = token_env
        self._pins = dict(pins)
        self._connect_timeout_s = connect_timeout_s
        self._max_connections = max_connections
        self._on_status = on_status
        self._client: Client | None = None
        # List the tools again before the next call: the server said they changed, or
        # it keeps no session (a restart would go unnoticed).
        self._recheck = False
        self._stateless = False
        self._connecting: asyncio.Future[Client] | None = None
        self._holder: asyncio.Task[None] | None = None
        self.unavailable: dict[str, Mismatch] = {}

    async def check(self) -> None:
        """Connect (if not connected) and compare the pins; never raises for the server."""
        with suppress(RemoteToolUnavailable):
            await self._connected()

    async def call(self, tool_id: str, args: Mapping[str, Any], timeout_s: float) -> Any:
        client = await self._connected()
        if self._recheck or self._stateless:
            self._recheck = False
            try:
                self._check_pins(await list_tools(client))
            except BaseException:
                self.drop()
                raise
        mismatch = self.unavailable.get(tool_id)
        if mismatch is not None:
            raise RemoteToolUnavailable(mismatch.reason)
        try:
            # The engine's watchdog enforces the tool's timeout (it fires first: it was
            # armed before this call connected); the SDK's own is a backstop.
            result = await client.call_tool(
                self._pins[tool_id].remote_name, dict(args), read_timeout_seconds=timeout_s
            )
        except BaseException as exc:
            # Cancelled (the tool's timeout), a protocol error or a broken transport:
            # the session may be gone or hold a request the server still works on.
            # Start afresh next time, which checks the pins again.
            self.drop()
            if isinstance(exc, MCPError):
                message = f"the MCP server answered an error: {exc}"
                raise RemoteToolFailed(untrusted_text(message)) from None
            if isinstance(exc, Exception):
                message = f"the MCP connection failed: {type(exc).__name__}"
                raise RemoteToolFailed(message) from None
            raise
        return _output(result)

    def drop(self) -> None:
        holder, self._holder = self._holder, None
        self._client = None
        self._connecting = None
        if holder is not None:
            holder.cancel()

    async def aclose(self) -> None:
        holder = self._holder
        self.drop()
        if holder is not None:
            await asyncio.gather(holder, return_exceptions=True)

    async def _connected(self) -> Client:
        if self._client is not None:
            return self._client
        if self._connecting is None:
            connecting: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
            self._connecting = connecting
            self._holder = asyncio.create_task(self._hold(connecting), name="toolloop-mcp")
        # Shielded: a caller's timeout must not cancel a connect others wait for too.
        return await asyncio.shield(self._connecting)

    async def _hold(self, connected: asyncio.Future[Client]) -> None:
        try:
            async with AsyncExitStack() as stack:
                async with asyncio.timeout(self._connect_timeout_s):
                    session_seen = SessionSeen()
                    client = await stack.enter_async_context(
                        mcp_client(
                            self._url,
                            self._token_env,
                            self._connect_timeout_s,
                            self._max_connections,
                            session_seen=session_seen,
                            on_tools_changed=self._tools_changed,
                        )
                    )
                    listing = await list_tools(client)
                self._stateless = not session_seen.seen
                self._recheck = False
                self._check_pins(listing)
                self._client = client
                connected.set_result(client)
                await asyncio.Event().wait()  # until dropped
        except Exception as exc:
            self._unreachable(f"the MCP server could not be reached ({type(exc).__name__})")
            if not connected.done():
                connected.set_exception(RemoteToolUnavailable(self._unreachable_reason()))
        finally:
            if self._connecting is connected:
                self._client = None
                self._connecting = None
                self._holder = None
            if not connected.done():
                connected.set_exception(
                    RemoteToolUnavailable("the MCP connection was closed while connecting")
                )

    def _tools_changed(self) -> None:
        self._recheck = True

    def _check_pins(self, listing: list[ListedTool]) -> None:
        for tool_id, pin in self._pins.items():
            self._set(tool_id, compare(pin, listing))

    def _unreachable(self, reason: str) -> None:
        for tool_id in self._pins:
            self._set(tool_id, Mismatch(Unavailable.UNREACHABLE, reason))

    def _unreachable_reason(self) -> str:
        for mismatch in self.unavailable.values():
            return mismatch.reason
        return "the MCP server could not be reached"

    def _set(self, tool_id: str, mismatch: Mismatch | None) -> None:
        before = self.unavailable.get(tool_id)
        if mismatch is None:
            self.unavailable.pop(tool_id, None)
        else:
            self.unavailable[tool_id] = mismatch
        if before != mismatch:
            self._on_status(tool_id, mismatch)


def _output(result: CallToolResult) -> Any:
    """The structured result; a server's error text as a failure; text blocks otherwise."""
    if result.is_error:
        text = " ".join(
            getattr(block, "text", "") for block in result.content if hasattr(block, "text")
        )
        raise RemoteToolFailed(untrusted_text(f"the MCP tool failed: {text}"))
    if result.structured_content is not None:
        return result.structured_content
    blocks = [
        block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content
    ]
    return {"content": blocks}
