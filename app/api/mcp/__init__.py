"""ToolLoop as an MCP server: `/mcp/{owner}` (DESIGN §9)."""

from app.api.mcp.endpoint import McpEndpoint

__all__ = ["McpEndpoint"]
