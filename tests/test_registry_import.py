"""`toolloop registry import-mcp`: YAML that loads as a registry and pins the tools as listed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.cli import main
from app.contract import load_contract
from app.registry_import import import_mcp_tools
from tests.api.test_remote_mcp_tools import only_receipt, plan, service, tools_by_id
from tests.engine.remote.servers import ECHO_PIN, mcp_server


def test_import_prints_a_registry_that_pins_every_tool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with mcp_server("v1") as server:
        code = main(
            ["registry", "import-mcp", server.url, "--owner", "remote", "--token-env", "TOK"]
        )
    assert code == 0
    text = capsys.readouterr().out
    path = tmp_path / "imported.yml"
    path.write_text(text)
    contract = load_contract([path])
    listed = ["echo", "change_echo", "hang", "boom", "pause", "greet", "echo_calls"]
    assert set(contract.owners["remote"].tools) == set(listed)
    echo = contract.tools["echo"]
    assert echo.description == ECHO_PIN["description"]
    assert dict(echo.input_schema.source) == ECHO_PIN["input_schema"]
    assert dict(echo.output_schema.source) == ECHO_PIN["output_schema"]
    assert echo.mcp is not None
    assert (echo.mcp.url, echo.mcp.tool, echo.mcp.token_env) == (server.url, "echo", "TOK")
    runner = yaml.safe_load(text)["subagents"]["remote"]["runner_defaults"]
    assert runner["allowed_tools"] == listed  # in the server's order


def test_import_of_an_unreachable_server_fails_with_a_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with mcp_server("v1") as server:
        url = server.url
    code = main(["registry", "import-mcp", url, "--timeout-s", "5"])
    assert code == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "cannot list the MCP server's tools" in captured.err


async def test_an_imported_registry_serves_its_tools(sqlite_url: str, tmp_path: Path) -> None:
    with mcp_server("v1") as server:
        text = await import_mcp_tools(
            server.url,
            owner="remote",
            token_env=None,
            timeout_s=30.0,
            tool_timeout_s=30.0,
            max_calls=None,
            warn=lambda message: None,
        )
        path = tmp_path / "imported.yml"
        path.write_text(text)
        async with service(path, sqlite_url) as client:
            tools = tools_by_id((await client.get("/tools")).json())
            assert all(tool["available"] for tool in tools.values())
            receipt = only_receipt(
                await client.post("/plans/sequential", json=plan("echo", {"text": "hi"}))
            )
            assert receipt["output"] == {"echoed": "hi"}
