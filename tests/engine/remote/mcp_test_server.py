"""An MCP server built with the SDK, run as `python -m tests.engine.remote.mcp_test_server`.

    PORT VARIANT [TOKEN]

VARIANT `v1` serves `echo(text)`; `v2` serves `echo(text, loud)` (the input
schema changed since v1 was pinned); `missing` serves no `echo`; a `-stateless`
suffix serves without sessions. In `v1`, `change_echo` replaces `echo` by the
`v2` one in place and says the tool list changed. Every variant
serves `hang` (never answers), `pause` (answers after a moment), `greet` (text
content, no structuredContent), `boom`
(raises: an isError result) and
`echo_calls` (how many times `echo` ran: the tests check a refused call never
reached the server; how many sessions were opened, its caller's included; and
the most requests of a session in flight at once).
With TOKEN, a request without `Authorization: Bearer TOKEN` gets 401.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send


def build(variant: str, calls: dict[str, int]) -> MCPServer:
    server = MCPServer("toolloop-test")

    def echo(text: str) -> dict[str, Any]:
        calls["echo"] += 1
        return {"echoed": text}

    def echo_v2(text: str, loud: bool = False) -> dict[str, Any]:
        calls["echo"] += 1
        return {"echoed": text.upper() if loud else text}

    if variant == "v1":
        server.add_tool(echo, name="echo", description="Echo the text back.")

        @server.tool(description="Replace echo by another one.")
        async def change_echo(ctx: Context) -> dict[str, Any]:
            server.remove_tool("echo")
            server.add_tool(echo_v2, name="echo", description="Echo the text back.")
            await ctx.session.send_tool_list_changed()
            return {}

    elif variant == "v2":
        server.add_tool(echo_v2, name="echo", description="Echo the text back.")

    @server.tool(description="Never answers.")
    async def hang(text: str) -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    @server.tool(description="Fails.")
    def boom(text: str) -> dict[str, Any]:
        raise ValueError(f"boom: {text}")

    @server.tool(description="Wait a moment, then answer.")
    async def pause(text: str) -> dict[str, Any]:
        await asyncio.sleep(0.05)
        return {"paused": text}

    @server.tool(description="Greet in text.", structured_output=False)
    def greet(text: str) -> str:
        return f"hello {text}"

    @server.tool(description="How many times echo ran.")
    def echo_calls() -> dict[str, Any]:
        return {key: calls[key] for key in ("echo", "sessions", "most_in_flight")}

    return server


def requests_counted(app: ASGIApp, calls: dict[str, int]) -> ASGIApp:
    """Counts the requests that open a session (POSTs without an `mcp-session-id`) and
    the most POSTs of a session in flight at once."""

    async def counted(scope: Scope, receive: Receive, send: Send) -> None:
        post = scope["type"] == "http" and scope["method"] == "POST"
        if not post:
            await app(scope, receive, send)
        elif b"mcp-session-id" not in dict(scope["headers"]):
            calls["sessions"] += 1
            await app(scope, receive, send)
        else:
            calls["in_flight"] += 1
            calls["most_in_flight"] = max(calls["most_in_flight"], calls["in_flight"])
            try:
                await app(scope, receive, send)
            finally:
                calls["in_flight"] -= 1

    return counted


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
    stateless = variant.endswith("-stateless")
    calls = {"echo": 0, "sessions": 0, "in_flight": 0, "most_in_flight": 0}
    server = build(variant.removesuffix("-stateless"), calls)
    app: ASGIApp = requests_counted(server.streamable_http_app(stateless_http=stateless), calls)
    if len(sys.argv) > 3:
        app = bearer_required(app, sys.argv[3])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
