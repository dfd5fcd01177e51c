"""Remote tools: registry tools served by MCP servers (DESIGN §9)."""
