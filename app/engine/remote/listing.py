"""Reaching an MCP server: its HTTP client (token from the environment) and its tool list."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx2
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import MCP_SESSION_ID, streamable_http_client
from mcp_types import Tool as ListedTool
from mcp_types import ToolListChangedNotification

from app.engine.remote.errors import RemoteToolFailed

# A server listing more pages than this is refused (a loop, or not a tool server).
MAX_LISTING_PAGES = 100


class SessionSeen:
    """Whether the server gave the connection a session id: without one (a stateless
    server) a restart cannot be noticed, so its tools are listed again before each call."""

    def __init__(self) -> None:
        self.seen = False

    async def __call__(self, response: httpx2.Response) -> None:
        if response.headers.get(MCP_SESSION_ID):
            self.seen = True


def http_client(
    token_env: str | None,
    timeout_s: float,
    max_connections: int,
    session_seen: SessionSeen | None = None,
) -> httpx2.AsyncClient:
    """`token_env`'s value, read now, goes as `Authorization: Bearer`; it is kept nowhere
    else. Reads have no timeout of their own: each call's is its tool's. The pool holds
    `max_connections` for requests and one more for the server's event stream."""
    headers = {}
    if token_env is not None:
        token = os.environ.get(token_env)
        if token:
            headers["Authorization"] = f"Bearer {token}"
    return httpx2.AsyncClient(
        headers=headers,
        event_hooks={"response": [session_seen]} if session_seen is not None else None,
        timeout=httpx2.Timeout(timeout_s, read=None),
        limits=httpx2.Limits(
            max_connections=max_connections + 1, max_keepalive_connections=max_connections + 1
        ),
    )


@asynccontextmanager
async def mcp_client(
    url: str,
    token_env: str | None,
    timeout_s: float,
    max_connections: int,
    *,
    session_seen: SessionSeen | None = None,
    on_tools_changed: Callable[[], None] | None = None,
) -> AsyncIterator[Client]:
    """A session with the initialize handshake: a server that keeps sessions answers a
    restart with "session not found", so the pins are checked again on reconnect.
    `on_tools_changed` runs when the server says its tool list changed."""

    async def on_message(message: IncomingMessage) -> None:
        if on_tools_changed is not None and isinstance(message, ToolListChangedNotification):
            on_tools_changed()

    async with (
        http_client(token_env, timeout_s, max_connections, session_seen) as http,
        Client(
            streamable_http_client(url, http_client=http),
            cache=None,
            mode="legacy",
            message_handler=on_message,
        ) as client,
    ):
        yield client


async def list_tools(client: Client) -> list[ListedTool]:
    tools: list[ListedTool] = []
    cursor: str | None = None
    for _ in range(MAX_LISTING_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise RemoteToolFailed(f"the MCP server lists more than {MAX_LISTING_PAGES} pages of tools")
