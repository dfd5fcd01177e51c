"""An MCP server built with the SDK, run as `python -m tests.engine.remote.mcp_test_server`.

    PORT VARIANT [TOKEN]

VARIANT `v1` serves `echo(text)`; `v2` serves `echo(text, loud)` (the input
schema changed since v1 was pinned); `missing` serves no `echo`. Every variant
serves `hang` (never answers), `boom` (raises: an isError result) and
`echo_calls` (how many times `echo` ran: the tests check a refused call never
reached the server). With TOKEN, a request without `Authorization: Bearer TOKEN`
gets 401.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send


def build(variant: str) -> MCPServer:
    server = MCPServer("toolloop-test")
    calls = {"echo": 0}

    if variant == "v1":

        @server.tool(description="Echo the text back.")
        def echo(text: str) -> dict[str, Any]:
            calls["echo"] += 1
            return {"echoed": text}

    elif variant == "v2":

        @server.tool(description="Echo the text back.")
        def echo(text: str, loud: bool = False) -> dict[str, Any]:
            calls["echo"] += 1
            return {"echoed": text.upper() if loud else text}

    @server.tool(description="Never answers.")
    async def hang(text: str) -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    @server.tool(description="Fails.")
    def boom(text: str) -> dict[str, Any]:
        raise ValueError(f"boom: {text}")

    @server.tool(description="How many times echo ran.")
    def echo_calls() -> dict[str, Any]:
        return {"count": calls["echo"]}

    return server


def bearer_required(app: ASGIApp, token: str) -> ASGIApp:
    expected = f"Bearer {token}".encode()

    async def checked(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)

    return checked


def main() -> None:
    port, variant = int(sys.argv[1]), sys.argv[2]
    app: ASGIApp = build(variant).streamable_http_app()
    if len(sys.argv) > 3:
        app = bearer_required(app, sys.argv[3])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
