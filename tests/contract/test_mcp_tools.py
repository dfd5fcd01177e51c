"""A registry tool served by an MCP server: `mcp` instead of `callable`, compiled unbound."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.contract import load_contract
from app.contract.compiled import McpEndpoint, ResolvedCallable
from app.contract.remote import RemoteToolNotBound, with_targets
from tests.contract.helpers import base_registry, only_problem, problems_of, write

TOOL = "subagents.worker-a.tools.transform"
MCP = {"url": "http://127.0.0.1:9/mcp", "tool": "transform", "token_env": "TRANSFORM_TOKEN"}


def remote_registry(**mcp: Any) -> dict[str, Any]:
    registry = base_registry()
    tool = registry["subagents"]["worker-a"]["tools"]["transform"]
    del tool["callable"]
    tool["mcp"] = {**MCP, **mcp}
    return registry


async def test_an_mcp_tool_compiles_with_its_endpoint_and_an_unbound_target(
    tmp_path: Path,
) -> None:
    contract = load_contract([write(tmp_path, "r.yml", remote_registry())])
    tool = contract.tools["transform"]
    assert tool.mcp == McpEndpoint(
        url="http://127.0.0.1:9/mcp", tool="transform", token_env="TRANSFORM_TOKEN"
    )
    assert contract.tools["fetch"].mcp is None
    with pytest.raises(RemoteToolNotBound):
        await tool.target.function(text="x")


def test_callable_tools_keep_their_definition_hash(tmp_path: Path) -> None:
    """Adding `mcp` to the declaration did not change what a callable tool hashes to."""
    contract = load_contract([write(tmp_path, "r.yml", base_registry())])
    assert "mcp" not in contract.canonical["tools"]["transform"]["definition"]
    assert "callable" in contract.canonical["tools"]["transform"]["definition"]


def test_binding_targets_keeps_the_hash_and_replaces_only_the_named_tools(
    tmp_path: Path,
) -> None:
    contract = load_contract([write(tmp_path, "r.yml", remote_registry())])

    async def bound(**args: Any) -> Any:
        return args

    target = ResolvedCallable(ref="mcp:transform", function=bound, is_async=True)
    rebound = with_targets(contract, {"transform": target})
    assert rebound.hash == contract.hash
    assert rebound.tools["transform"].target is target
    assert rebound.owners["worker-a"].tools["transform"].target is target
    assert rebound.tools["fetch"] is contract.tools["fetch"]


def test_callable_and_mcp_together_are_an_error(tmp_path: Path) -> None:
    registry = base_registry()
    registry["subagents"]["worker-a"]["tools"]["transform"]["mcp"] = MCP
    problem = only_problem([write(tmp_path, "r.yml", registry)])
    assert (problem.path, problem.message) == (f"{TOOL}.mcp", "declare callable or mcp, not both")


@pytest.mark.parametrize(
    ("mcp", "path", "message"),
    [
        ({"extra": 1}, "mcp.extra", "unknown field"),
        ({"url": "ftp://x/mcp"}, "mcp.url", "must be an http:// or https:// URL"),
        ({"url": "http://user:pw@host/mcp"}, "mcp.url", "without credentials"),
        ({"token_env": "NOT-A-VAR"}, "mcp.token_env", "not an environment variable name"),
        ({"tool": " "}, "mcp.tool", "must not be empty"),
    ],
)
def test_mcp_fields_are_checked_with_their_key_path(
    tmp_path: Path, mcp: dict[str, Any], path: str, message: str
) -> None:
    problem = only_problem([write(tmp_path, "r.yml", remote_registry(**mcp))])
    assert problem.path == f"{TOOL}.{path}"
    assert message in problem.message
    assert problem.file.endswith("r.yml")


def test_an_mcp_tool_needs_url_and_tool(tmp_path: Path) -> None:
    registry = base_registry()
    registry["subagents"]["worker-a"]["tools"]["transform"]["mcp"] = {}
    del registry["subagents"]["worker-a"]["tools"]["transform"]["callable"]
    found = {(p.path, p.message) for p in problems_of([write(tmp_path, "r.yml", registry)])}
    assert found == {
        (f"{TOOL}.mcp.url", "required field is missing"),
        (f"{TOOL}.mcp.tool", "required field is missing"),
    }
