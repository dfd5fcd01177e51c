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
from tests.engine.remote.servers import (
    McpTestServer,
    echo_calls,
    mcp_server,
    remote_registry,
    server_counts,
)


@pytest.fixture
def server() -> Iterator[McpTestServer]:
    with mcp_server("v1") as running:
        yield running


@asynccontextmanager
async def service(
    registry: Path, database_url: str, **settings: Any
) -> AsyncIterator[httpx.AsyncClient]:
    app: FastAPI = create_app(
        Settings(registries=[registry], database_url=database_url, **settings)
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
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


def only_receipt(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    [receipt] = response.json()["receipts"]
    result: dict[str, Any] = receipt
    return result


async def test_a_tool_changed_between_two_starts_is_unavailable_and_never_called(
    database_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with mcp_server("v1") as server:
        registry = remote_registry(tmp_path / "remote.yml", server.url)
        async with service(registry, database_url) as client:
            receipt = only_receipt(
                await client.post("/plans/sequential", json=plan("echo", {"text": "a"}))
            )
            assert receipt["status"] == "succeeded"
        server.stop()
        server.start("v2")  # echo gained an argument: its input schema changed
        async with service(registry, database_url) as client:
            tools = tools_by_id((await client.get("/tools")).json())
            assert tools["echo"]["available"] is False
            reason = tools["echo"]["unavailable_reason"]
            assert "differs from the pinned copy in input_schema" in reason
            assert tools["boom"]["available"] is True
            ready = await client.get("/readyz")
            assert ready.status_code == 200
            assert {"tool": "echo", "reason": reason} in ready.json()["unavailable_tools"]
            receipt = only_receipt(
                await client.post("/plans/sequential", json=plan("echo", {"text": "b"}))
            )
            assert receipt["status"] == "failed"
            assert receipt["error"]["kind"] == "exception"
            assert "RemoteToolUnavailable" in receipt["error"]["message"]
            assert "input_schema" in receipt["error"]["message"]
            metrics = (await client.get("/metrics")).text
            assert 'toolloop_remote_tool_available{tool="echo"} 0.0' in metrics
            assert 'toolloop_remote_tool_unavailable_total{reason="changed",tool="echo"}' in metrics
        assert await echo_calls(server.url) == 0
    assert any(
        "remote tool echo is unavailable (changed)" in record.getMessage()
        for record in caplog.records
    )


async def test_a_tool_changed_while_serving_is_found_on_reconnect(
    database_url: str, tmp_path: Path
) -> None:
    with mcp_server("v1") as server:
        registry = remote_registry(tmp_path / "remote.yml", server.url)
        async with service(registry, database_url) as client:
            first = only_receipt(
                await client.post("/plans/sequential", json=plan("echo", {"text": "a"}))
            )
            assert first["status"] == "succeeded"
            server.stop()
            server.start("v2")
            # The old session is gone: this call fails and drops it; the next connects
            # again, compares the pins and refuses.
            lost = only_receipt(
                await client.post("/plans/sequential", json=plan("echo", {"text": "b"}))
            )
            assert lost["status"] == "failed"
            refused = only_receipt(
                await client.post("/plans/sequential", json=plan("echo", {"text": "c"}))
            )
            assert refused["status"] == "failed"
            assert "RemoteToolUnavailable" in refused["error"]["message"]
            tools = tools_by_id((await client.get("/tools")).json())
            assert tools["echo"]["available"] is False
        assert await echo_calls(server.url) == 0


async def test_a_tool_the_server_no_longer_lists_is_unavailable(
    database_url: str, tmp_path: Path
) -> None:
    with mcp_server("missing") as server:
        registry = remote_registry(tmp_path / "remote.yml", server.url)
        async with service(registry, database_url) as client:
            tools = tools_by_id((await client.get("/tools")).json())
            assert tools["echo"]["available"] is False
            assert tools["echo"]["unavailable_reason"] == (
                "the MCP server lists no tool named 'echo'"
            )
            assert tools["hang"]["available"] is True
            receipt = only_receipt(
                await client.post("/plans/sequential", json=plan("echo", {"text": "x"}))
            )
            assert receipt["status"] == "failed"
            assert "lists no tool named 'echo'" in receipt["error"]["message"]


async def test_a_hanging_tool_times_out_and_the_connection_is_made_again(
    server: McpTestServer, database_url: str, tmp_path: Path
) -> None:
    registry = remote_registry(tmp_path / "remote.yml", server.url, hang_timeout_s=0.5)
    async with service(registry, database_url) as client:
        hung = only_receipt(
            await client.post("/plans/sequential", json=plan("hang", {"text": "x"}))
        )
        assert hung["status"] == "timed_out"
        assert hung["error"]["kind"] == "timeout"
        after = only_receipt(
            await client.post("/plans/sequential", json=plan("echo", {"text": "y"}))
        )
        assert after["status"] == "succeeded"
        assert after["output"] == {"echoed": "y"}
    # The service's session at start, its new one after the timeout dropped it, and ours.
    assert (await server_counts(server.url))["sessions"] == 3


async def test_an_error_result_is_a_failed_receipt_with_the_server_text(
    server: McpTestServer, database_url: str, tmp_path: Path
) -> None:
    registry = remote_registry(tmp_path / "remote.yml", server.url)
    async with service(registry, database_url) as client:
        receipt = only_receipt(
            await client.post("/plans/sequential", json=plan("boom", {"text": "x"}))
        )
        assert receipt["status"] == "failed"
        assert receipt["error"]["kind"] == "exception"
        assert (
            (receipt["error"]["message"])
            == "RemoteToolFailed: the MCP tool failed: Error executing tool boom"
        )


async def test_a_result_without_structured_content_is_its_content_blocks(
    server: McpTestServer, database_url: str, tmp_path: Path
) -> None:
    registry = remote_registry(tmp_path / "remote.yml", server.url)
    async with service(registry, database_url) as client:
        receipt = only_receipt(
            await client.post("/plans/sequential", json=plan("greet", {"text": "x"}))
        )
        assert receipt["status"] == "succeeded"
        assert receipt["output"] == {"content": [{"type": "text", "text": "hello x"}]}


async def test_arguments_are_checked_before_the_server_is_asked(
    server: McpTestServer, database_url: str, tmp_path: Path
) -> None:
    registry = remote_registry(tmp_path / "remote.yml", server.url)
    async with service(registry, database_url) as client:
        response = await client.post("/plans/sequential", json=plan("echo", {"text": 5}))
        assert response.status_code == 422
        assert response.json()["errors"][0]["pointer"] == "/calls/0/args/text"
    assert await echo_calls(server.url) == 0


async def test_the_token_from_token_env_goes_as_a_bearer(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with mcp_server("v1", token="s3cret-token") as server:
        registry = remote_registry(tmp_path / "remote.yml", server.url, token_env="ECHO_TOKEN")
        monkeypatch.setenv("ECHO_TOKEN", "s3cret-token")
        async with service(registry, database_url) as client:
            receipt = only_receipt(
                await client.post("/plans/sequential", json=plan("echo", {"text": "x"}))
            )
            assert receipt["status"] == "succeeded"
            assert "s3cret-token" not in (await client.get("/tools")).text
        monkeypatch.setenv("ECHO_TOKEN", "wrong")
        async with service(registry, database_url) as client:
            tools = tools_by_id((await client.get("/tools")).json())
            assert tools["echo"]["available"] is False
            assert "could not be reached" in tools["echo"]["unavailable_reason"]


async def test_a_server_down_at_start_is_tried_again_at_the_next_call(
    database_url: str, tmp_path: Path
) -> None:
    with mcp_server("v1") as server:
        server.stop()
        registry = remote_registry(tmp_path / "remote.yml", server.url)
        async with service(registry, database_url) as client:
            tools = tools_by_id((await client.get("/tools")).json())
            assert tools["echo"]["available"] is False
            reason = tools["echo"]["unavailable_reason"]
            assert reason.startswith("the MCP server could not be reached")
            assert server.url not in reason
            server.start("v1")
            receipt = only_receipt(
                await client.post("/plans/sequential", json=plan("echo", {"text": "x"}))
            )
            assert receipt["status"] == "succeeded"
            tools = tools_by_id((await client.get("/tools")).json())
            assert tools["echo"]["available"] is True


async def test_a_tool_changed_in_place_is_refused_once_the_server_says_so(
    server: McpTestServer, database_url: str, tmp_path: Path
) -> None:
    registry = remote_registry(tmp_path / "remote.yml", server.url)
    async with service(registry, database_url) as client:
        before = only_receipt(
            await client.post("/plans/sequential", json=plan("echo", {"text": "a"}))
        )
        assert before["status"] == "succeeded"
        # Replaces echo on the server and sends notifications/tools/list_changed.
        changed = only_receipt(await client.post("/plans/sequential", json=plan("change_echo", {})))
        assert changed["status"] == "succeeded"
        refused = only_receipt(
            await client.post("/plans/sequential", json=plan("echo", {"text": "b"}))
        )
        assert refused["status"] == "failed"
        assert "RemoteToolUnavailable" in refused["error"]["message"]
        assert "input_schema" in refused["error"]["message"]
        tools = tools_by_id((await client.get("/tools")).json())
        assert tools["echo"]["available"] is False
    assert await echo_calls(server.url) == 1


async def test_a_stateless_server_is_checked_again_before_each_call(
    database_url: str, tmp_path: Path
) -> None:
    with mcp_server("v1-stateless") as server:
        registry = remote_registry(tmp_path / "remote.yml", server.url)
        async with service(registry, database_url) as client:
            first = only_receipt(
                await client.post("/plans/sequential", json=plan("echo", {"text": "a"}))
            )
            assert first["status"] == "succeeded"
            server.stop()
            server.start("v2-stateless")
            # No session to lose: the restart shows only in the listing, read before the call.
            refused = only_receipt(
                await client.post("/plans/sequential", json=plan("echo", {"text": "b"}))
            )
            assert refused["status"] == "failed"
            assert "RemoteToolUnavailable" in refused["error"]["message"]
        assert await echo_calls(server.url) == 0


async def test_a_server_gets_at_most_the_configured_connections_at_once(
    server: McpTestServer, database_url: str, tmp_path: Path
) -> None:
    registry = remote_registry(tmp_path / "remote.yml", server.url)
    async with service(registry, database_url, mcp_max_connections=1) as client:
        lanes = [
            {
                "item_key": str(i),
                "calls": [{"call_key": "1", "tool": "pause", "args": {"text": ""}}],
            }
            for i in range(6)
        ]
        body = {"owner": "remote", "max_concurrency": 6, "lanes": lanes}
        response = await client.post("/plans/parallel", json=body)
        assert response.status_code == 200, response.text
        assert response.json()["status"] == "succeeded"
    # One connection for calls, and one the event stream may not have taken yet.
    assert (await server_counts(server.url))["most_in_flight"] <= 2
