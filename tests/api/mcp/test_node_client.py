"""`/mcp/{owner}` end to end with a second, independent MCP implementation: the
official TypeScript SDK's client (`node/client.mjs`), over real HTTP.

Its packages come from `npm ci --prefix tests/api/mcp/node` (`.ci/run` does it);
without them the tests skip and say so, unless TOOLLOOP_REQUIRE_MCP_CLIENTS is set.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.api.mcp.conftest import Served
from tests.api.mcp.registry import ALLOWED

NODE_CLIENT = Path(__file__).with_name("node")
INSTALL = "npm ci --prefix tests/api/mcp/node"


def _node_client_ready() -> None:
    missing = None
    if shutil.which("node") is None:
        missing = "node is not installed"
    elif not (NODE_CLIENT / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        missing = f"the TypeScript MCP SDK is not installed: run `{INSTALL}`"
    if missing is None:
        return
    if os.environ.get("TOOLLOOP_REQUIRE_MCP_CLIENTS"):
        pytest.fail(f"TOOLLOOP_REQUIRE_MCP_CLIENTS is set: {missing}")
    pytest.skip(missing)


def run_node_client(
    url: str, calls: list[dict[str, Any]], token: str | None = None
) -> dict[str, Any]:
    _node_client_ready()
    job = {"url": url, "token": token, "calls": calls}
    finished = subprocess.run(
        ["node", "client.mjs"],
        cwd=NODE_CLIENT,
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    report: dict[str, Any] = json.loads(finished.stdout)
    return report


def test_the_typescript_client_lists_and_calls_the_tools(open_server: Served) -> None:
    report = run_node_client(
        open_server.url(),
        [
            {"name": "shout", "arguments": {"text": "node"}},
            {"name": "count_words", "arguments": {"text": "a b"}},
            {"name": "shout", "arguments": {"text": "", "extra": 1}},
            {"name": "explode", "arguments": {"text": "fuse"}},
            {"name": "transfer", "arguments": {"amount": 5}},
            {"name": "hidden", "arguments": {"text": "x"}},
        ],
    )

    assert "connectError" not in report, report
    tools = {tool["name"]: tool for tool in report["tools"]}
    assert list(tools) == ALLOWED
    assert tools["shout"]["annotations"] == {"readOnlyHint": True}
    assert tools["explode"]["annotations"]["destructiveHint"] is True
    assert tools["count_words"]["outputSchema"]["properties"] == {"result": {"type": "integer"}}

    shout, count, invalid, failed, unapproved, hidden = report["calls"]
    assert shout["result"]["structuredContent"] == {"text": "NODE"}
    assert shout["result"]["isError"] is False
    run = open_server.get(f"/runs/{shout['result']['_meta']['toolloop/run_id']}").json()
    assert (run["kind"], run["status"]) == ("mcp", "succeeded")
    assert count["result"]["structuredContent"] == {"result": 2}

    assert invalid["result"]["isError"] is True
    text = invalid["result"]["content"][0]["text"]
    assert "/arguments/text" in text
    assert "'extra'" in text

    assert failed["result"]["isError"] is True
    assert "the tool exploded on 'fuse'" in failed["result"]["content"][0]["text"]
    assert unapproved["result"]["isError"] is True
    assert "has not run" in unapproved["result"]["content"][0]["text"]
    assert hidden["error"]["code"] == -32602


def test_the_typescript_client_presents_its_key(keyed_server: Served) -> None:
    allowed = run_node_client(
        keyed_server.url(),
        [{"name": "shout", "arguments": {"text": "key"}}],
        token=keyed_server.keys["agent"],
    )
    (call,) = allowed["calls"]
    run_id = call["result"]["_meta"]["toolloop/run_id"]
    assert keyed_server.get(f"/runs/{run_id}", "agent").json()["caller"] == "agent"

    refused = run_node_client(keyed_server.url(), [], token=keyed_server.keys["reader"])
    assert "403" in refused["connectError"]["message"]
