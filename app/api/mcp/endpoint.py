"""`/mcp/{owner}`: a Streamable HTTP MCP endpoint, the official SDK's, mounted in the app.

Stateless, with JSON answers: every POST is a whole exchange (the SDK builds a
transport for it and drops it after), so any process of the service answers
any request and nothing is kept between them (docs/decisions.md, "ToolLoop as
an MCP server"). Before the MCP layer sees a request, the endpoint answers as
the rest of the API does, in problem+json: 401 without a valid key, 403 without
`plans:execute`, 404 for an owner the contract does not declare, 413 and 422
for a body over the size or nesting limits, or not JSON, 405 for a method
other than POST (no stream for server messages, no session to end). In open mode
(no keys), a request must name a loopback `Host`, and an `Origin`, when sent,
a loopback one: a page in a browser cannot reach the endpoint by rebinding a
name to 127.0.0.1.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import mcp_types as types
import orjson
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from app.api.auth import PLANS_EXECUTE, is_loopback_host, require_scope
from app.api.body import read_json
from app.api.deps import get_runtime
from app.api.mcp.caller import OWNER_STATE, McpCaller
from app.api.mcp.tool_calls import call_tool
from app.api.mcp.tool_listing import mcp_tool, owner_tools
from app.service.errors import Forbidden, NotFound

PATH = "/mcp/{owner}"

_mcp_caller = require_scope(PLANS_EXECUTE)


async def _list_tools(
    context: ServerRequestContext[Any, Any], _: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    caller = McpCaller.of(context)
    tools = owner_tools(caller.runtime.contract, caller.owner_declaration)
    return types.ListToolsResult(tools=[mcp_tool(tool) for tool in tools])


async def _call_tool(
    context: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    return await call_tool(McpCaller.of(context), params.name, params.arguments or {})


def mcp_server() -> Server[Any]:
    server: Server[Any] = Server(
        "toolloop", version="0.1.0", on_list_tools=_list_tools, on_call_tool=_call_tool
    )
    # The SDK's OpenTelemetry layer: off, as the app's own (docs/decisions.md).
    server.middleware.clear()
    return server


class McpEndpoint:
    """The ASGI app behind `/mcp/{owner}`; `running()` belongs in the app's lifespan."""

    def __init__(self, *, open_mode: bool, max_body_bytes: int, max_json_depth: int) -> None:
        self._open_mode = open_mode
        self._max_body_bytes = max_body_bytes
        self._max_json_depth = max_json_depth
        self._sessions = StreamableHTTPSessionManager(
            app=mcp_server(),
            json_response=True,
            stateless=True,
            max_request_body_size=max_body_bytes,
        )

    def route(self) -> Route:
        return Route(PATH, endpoint=self, include_in_schema=False)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The SDK's session manager, held open by a task of its own: it keeps an
        anyio task group, which must end in the task it began in, and a lifespan
        may end in another task than the one it began in (test fixtures do)."""
        started = asyncio.Event()
        stop = asyncio.Event()

        async def hold() -> None:
            async with self._sessions.run():
                started.set()
                await stop.wait()

        holder = asyncio.create_task(hold(), name="mcp-session-manager")
        ready = asyncio.create_task(started.wait())
        await asyncio.wait((holder, ready), return_when=asyncio.FIRST_COMPLETED)
        if not started.is_set():
            ready.cancel()
            await holder  # raises what stopped it
        try:
            yield
        finally:
            stop.set()
            await holder

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        if self._open_mode:
            _check_loopback(request)
        runtime = await get_runtime(request)
        await _mcp_caller(request)  # leaves the caller in the request's state
        owner = request.path_params["owner"]
        if owner not in runtime.contract.owners:
            raise NotFound("There is no owner with this name.")
        if request.method != "POST":
            # Stateless: no stream for the server's own messages, no session to end.
            raise HTTPException(405, "The MCP endpoint takes POST alone.", {"Allow": "POST"})
        request.scope["state"][OWNER_STATE] = owner
        receive = await self._body_within_limits(request, receive)
        await self._sessions.handle_request(scope, receive, send)

    async def _body_within_limits(self, request: Request, receive: Receive) -> Receive:
        """Read the body under the API's limits (413 and 422 problems, as for a plan),
        and hand it on to the SDK, which reads it again."""
        data = await read_json(request, self._max_body_bytes, self._max_json_depth)
        body = orjson.dumps(data)
        handed = False

        async def replay() -> Message:
            nonlocal handed
            if handed:
                return await receive()  # the client's disconnect
            handed = True
            return {"type": "http.request", "body": body, "more_body": False}

        return replay


def _check_loopback(request: Request) -> None:
    if not is_loopback_host(_hostname(f"//{request.headers.get('host', '')}")):
        raise Forbidden("Without API keys, the MCP endpoint answers only loopback Host names.")
    origin = request.headers.get("origin")
    if origin is not None and not is_loopback_host(_hostname(origin)):
        raise Forbidden("Without API keys, the MCP endpoint answers only loopback origins.")


def _hostname(url: str) -> str:
    """The URL's host name; empty (not loopback) when the URL is malformed."""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""
