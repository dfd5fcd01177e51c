"""Remote MCP tools through the service: plans, receipts, pins, /tools and /readyz.

The MCP servers are real (the SDK's, in subprocesses on 127.0.0.1).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.api.app import create_app
from app.settings import Settings
from tests.engine.remote.servers import McpTestServer, mcp_server, remote_registry


@pytest.fixture
def server() -> Iterator[McpTestServer]:
    with mcp_server("v1") as running:
        yield running


@asynccontextmanager
async def service(registry: Path, database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app: FastAPI = create_app(Settings(registries=[registry], database_url=database_url))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://toolloop") as client:
            yield client


def plan(tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"owner": "remote", "calls": [{"call_key": "c1", "tool": tool, "args": args}]}


def tools_by_id(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {tool["id"]: tool for owner in body["owners"] for tool in owner["tools"]}


async def test_a_remote_tool_runs_through_a_plan_with_a_stored_receipt(
    server: McpTestServer, database_url: str, tmp_path: Path
) -> None:
    registry = remote_registry(tmp_path / "remote.yml", server.url)
    async with service(registry, database_url) as client:
        response = await client.post("/plans/sequential", json=plan("echo", {"text": "hi"}))
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["status"] == "succeeded"
        [receipt] = body["receipts"]
        assert receipt["status"] == "succeeded"
        assert receipt["output"] == {"echoed": "hi"}
        stored = await client.get(f"/runs/{body['plan_id']}/receipts")
        assert [r["output"] for r in stored.json()["items"]] == [{"echoed": "hi"}]
        tools = tools_by_id((await client.get("/tools")).json())
        assert tools["echo"]["remote"] is True
        assert tools["echo"]["available"] is True
        assert tools["echo"]["unavailable_reason"] is None
        ready = await client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["unavailable_tools"] == []
