"""ToolLoop's Python distribution namespace: `toolloop.client` is the client for orchestrators."""
