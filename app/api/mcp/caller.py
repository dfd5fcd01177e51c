"""Who calls an MCP endpoint, as which owner, on which runtime: from the HTTP request.

The endpoint (`McpEndpoint`) resolves the owner and the caller before the
request reaches the MCP layer and leaves them in the request's state; the
MCP handlers read them back from the request the SDK hands them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.server.context import ServerRequestContext
from starlette.requests import Request

from app.api.auth import Principal
from app.contract import Owner
from app.service.runtime import Runtime

OWNER_STATE = "mcp_owner"


@dataclass(frozen=True, slots=True)
class McpCaller:
    runtime: Runtime
    principal: Principal
    owner: str

    @property
    def owner_declaration(self) -> Owner:
        return self.runtime.contract.owners[self.owner]

    @classmethod
    def of(cls, context: ServerRequestContext[Any, Any]) -> McpCaller:
        request = context.request
        if not isinstance(request, Request):
            raise RuntimeError("an MCP request reached ToolLoop without its HTTP request")
        state = request.scope["state"]
        return cls(request.app.state.runtime, state["principal"], state[OWNER_STATE])
