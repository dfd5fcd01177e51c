"""`tools/call` answers for runs that end without their call's receipt."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mcp_types as types

from app.api.auth import OPEN
from app.api.mcp.approvals import RUN_ID_META
from app.api.mcp.caller import McpCaller
from app.api.mcp.tool_calls import call_tool
from app.contract import load_contract
from app.service.runs.tasks import RunResult
from tests.api.mcp.registry import OWNER, write_registry


class _Handle:
    def __init__(self, result: RunResult) -> None:
        self._result = result

    async def wait(self) -> RunResult:
        return self._result


def _caller(tmp_path: Path, result: RunResult) -> McpCaller:
    async def open_mcp_call(*_: Any) -> object:
        return object()

    runtime = SimpleNamespace(
        contract=load_contract([write_registry(tmp_path)]),
        plans=SimpleNamespace(open_mcp_call=open_mcp_call),
        runs=SimpleNamespace(launch=lambda _run: _Handle(result)),
    )
    return McpCaller(runtime, OPEN, OWNER)  # a stand-in runtime: what `call_tool` reads


async def test_a_run_stopped_before_its_call_began_says_so(tmp_path: Path) -> None:
    response = {"plan_id": "run-9", "status": "interrupted", "receipts": [], "dispatched": []}
    result = RunResult("run-9", "interrupted", response, lambda: response)

    answer = await call_tool(_caller(tmp_path, result), "shout", {"text": "x"})

    assert answer.is_error
    assert answer.meta == {RUN_ID_META: "run-9"}
    (block,) = answer.content
    assert isinstance(block, types.TextContent)
    assert block.text == "The run ended interrupted before the call ran. Run run-9."


async def test_a_pending_run_answers_how_to_approve(tmp_path: Path) -> None:
    response = {
        "plan_id": "run-10",
        "status": "pending",
        "receipts": [],
        "pending": [{"confirmation_id": "c-1", "tool": "shout", "args_digest": "d"}],
    }
    result = RunResult("run-10", "pending", response, lambda: response)

    answer = await call_tool(_caller(tmp_path, result), "shout", {"text": "x"})

    assert answer.is_error
    (block,) = answer.content
    assert isinstance(block, types.TextContent)
    assert "POST /runs/run-10/confirmations/c-1" in block.text
