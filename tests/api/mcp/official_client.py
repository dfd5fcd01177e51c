"""The official MCP Python SDK's client, connected over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

# "legacy": the initialize handshake (2025-11-25); "auto": the SDK's probe, which
# speaks the per-request protocol (2026-07-28) with a server that offers it.
MODES = ("legacy", "auto")


@asynccontextmanager
async def connected(
    url: str, mode: str = "legacy", headers: dict[str, str] | None = None
) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers=headers or {}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client
