"""`/mcp/{owner}` on the Temporal executor: the official MCP client's `tools/call` runs
as a one-call plan workflow, its tool in a `toolloop worker`, never in serve; the
run, receipt, audit and answer are the local executor's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import orjson
import pytest
from sqlalchemy import create_engine, text

from tests.api.mcp.official_client import connected
from tests.temporal.conftest import Stack, open_stack

pytestmark = pytest.mark.postgres

RUN_ID = "toolloop/run_id"
RECEIPT_ID = "toolloop/receipt_id"


@pytest.fixture(scope="module")
def stack(stack_env: tuple[Path, dict[str, str]]) -> Iterator[Stack]:
    workdir, env = stack_env
    stack = open_stack(workdir, env, workers=1)
    yield stack
    stack.close()


def _meta(result: types.CallToolResult) -> dict[str, Any]:
    assert result.meta is not None
    return dict(result.meta)


def _text(result: types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


def _recorded_instance(stack: Stack, run_id: str) -> str:
    engine = create_engine(stack.env["TOOLLOOP_DATABASE_URL"])
    try:
        with engine.connect() as connection:
            instance: str = connection.execute(
                text("SELECT instance_id FROM runs WHERE id = :id"), {"id": run_id}
            ).scalar_one()
    finally:
        engine.dispose()
    return instance


async def test_a_tool_call_runs_in_the_worker_as_an_mcp_run(stack: Stack) -> None:
    async with connected(f"{stack.base}/mcp/tester") as client:
        result = await client.call_tool("whoami", {"text": "hi"})

    assert not result.is_error, _text(result)
    (worker,) = stack.workers
    assert stack.server is not None
    assert result.structured_content == {"text": "hi", "pid": worker.pid}
    assert worker.pid != stack.server.process.pid
    assert orjson.loads(_text(result)) == result.structured_content
    run_id = _meta(result)[RUN_ID]
    run = stack.get(f"/runs/{run_id}").json()
    assert (run["kind"], run["owner"], run["status"]) == ("mcp", "tester", "succeeded")
    assert run["receipt_count"] == run["receipt_counts"]["succeeded"] == 1
    assert _recorded_instance(stack, run_id) == "orchestrated"
    (receipt,) = stack.receipts(run_id)
    assert receipt["receipt_id"] == _meta(result)[RECEIPT_ID]
    assert (receipt["call_key"], receipt["tool"]) == ("whoami", "whoami")
    assert receipt["output"] == {"text": "hi", "pid": worker.pid}
    audit = stack.get(f"/runs/{run_id}/audit").json()["items"]
    accepted = next(event for event in audit if event["kind"] == "plan.accepted")
    assert accepted["detail"] == {"plan_kind": "mcp", "owner": "tester", "context": {}}
    assert {"call.started", "call.finished"} <= {event["kind"] for event in audit}


async def test_a_failing_call_is_an_error_result_with_its_receipts_error(stack: Stack) -> None:
    async with connected(f"{stack.base}/mcp/tester") as client:
        result = await client.call_tool("explode", {"text": "fuse"})

    assert result.is_error
    assert result.structured_content is None
    run_id = _meta(result)[RUN_ID]
    (receipt,) = stack.receipts(run_id)
    assert receipt["status"] == "failed"
    assert receipt["error"]["message"] in _text(result)
    assert "exploded on fuse" in _text(result)
    assert stack.get(f"/runs/{run_id}").json()["status"] == "failed"


async def test_invalid_arguments_start_no_workflow_and_name_every_problem(stack: Stack) -> None:
    async with connected(f"{stack.base}/mcp/tester") as client:
        result = await client.call_tool("whoami", {"loud": True})

    assert result.is_error
    lines = _text(result).splitlines()
    assert lines[0] == "The arguments are invalid; nothing ran."
    assert sorted(line.split(":", 1)[0] for line in lines[1:]) == ["- /arguments"] * 2
