"""What an MCP client is told about a call that needs a person's approval."""

from __future__ import annotations

import mcp_types as types

from app.api.mcp.approvals import RUN_ID_META, awaiting_approval


def _text(result: types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


def test_a_pending_run_is_an_error_result_naming_the_run_and_how_to_approve() -> None:
    response = {
        "plan_id": "run-7",
        "kind": "mcp",
        "status": "pending",
        "receipts": [],
        "pending": [
            {
                "confirmation_id": "conf-3",
                "call_key": "transfer",
                "item_key": None,
                "tool": "transfer",
                "args_digest": "sha256:abc",
            }
        ],
    }

    result = awaiting_approval(response)

    assert result is not None
    assert result.is_error
    assert result.meta == {RUN_ID_META: "run-7"}
    text = _text(result)
    assert "has not run" in text
    assert "POST /runs/run-7/confirmations/conf-3" in text
    assert "GET /runs/run-7" in text


def test_a_run_that_is_not_pending_is_left_to_its_receipt() -> None:
    assert awaiting_approval({"plan_id": "run-8", "status": "succeeded", "receipts": []}) is None
