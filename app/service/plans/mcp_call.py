"""A one-call run started by an MCP client's `tools/call` (`/mcp/{owner}`).

It runs as a sequential plan of one call, through the same engine, and is
recorded as a run of kind `mcp`: receipts, audit events and the caller's
identity as any plan's, visible through `GET /runs/{id}`.
"""

from __future__ import annotations

from app.service.plans.runs import SequentialRun

MCP = "mcp"


class McpCallRun(SequentialRun):
    kind = MCP
