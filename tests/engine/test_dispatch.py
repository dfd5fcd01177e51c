"""The registered production router: a running tool dispatches to another registered tool."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.ports import AuditKind
from app.engine.receipt import Status
from tests.engine.harness import tool

STRICT = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}


def tools(parent: str) -> dict[str, Any]:
    return {
        "parent": tool(parent),
        "child": tool("aecho", input_schema=STRICT),
        "hidden": tool("aecho"),
    }


@pytest.mark.parametrize("parent", ["parent_async", "parent_sync"])
async def test_a_dispatched_call_gets_its_own_receipt_naming_the_parent(
    make_harness: Any, parent: str
) -> None:
    harness = make_harness(tools(parent))

    outcome = await harness.parallel(
        [("item", [("p", "parent", {"target": "child", "args": {"text": "hi"}})])],
        max_concurrency=1,
    )

    (parent_receipt,) = outcome.lanes[0].receipts
    assert parent_receipt.status is Status.SUCCEEDED
    assert parent_receipt.output == {
        "child_status": "succeeded",
        "child_output": {"args": {"text": "hi"}, "thread": "MainThread"},
    }
    (child,) = outcome.dispatched
    assert child.parent_receipt_id == parent_receipt.receipt_id
    assert child.run_id == outcome.run_id
    assert child.tool == "child"
    assert child.item_key == "item"
    assert child.parallel_batch_id == outcome.parallel_batch_id
    assert child.call_key == "p/1"
    assert child.seq == 1  # after the plan's own calls
    stored = harness.receipts.stored(outcome.run_id)
    assert [s["receipt_id"] for s in stored] == [parent_receipt.receipt_id, child.receipt_id]
    assert stored[1]["parent_receipt_id"] == parent_receipt.receipt_id


@pytest.mark.parametrize("parent", ["parent_async", "parent_sync"])
@pytest.mark.parametrize(
    ("target", "args", "reason"),
    [
        ("outsider", {"text": "x"}, "belongs to owner 'other'"),
        ("nowhere", {"text": "x"}, "unknown tool 'nowhere'"),
        ("child", {"text": 5}, "arguments do not match the input schema: /text"),
        ("child", {"text": "x", "extra": 1}, "arguments do not match the input schema"),
    ],
)
async def test_a_rejected_dispatch_raises_inside_the_parent(
    make_harness: Any, parent: str, target: str, args: dict[str, Any], reason: str
) -> None:
    harness = make_harness(tools(parent), other_tools={"outsider": tool("aecho")})

    outcome = await harness.sequential([("p", "parent", {"target": target, "args": args})])

    (receipt,) = outcome.receipts
    assert receipt.status is Status.SUCCEEDED
    assert receipt.output["rejected"].startswith(f"dispatch to {target!r} rejected: ")
    assert reason in receipt.output["rejected"]
    assert outcome.dispatched == ()
    (rejected,) = harness.events(AuditKind.DISPATCH_REJECTED)
    assert rejected.detail["parent_receipt_id"] == receipt.receipt_id
    assert rejected.tool == target


async def test_an_unhandled_rejection_fails_the_parent(make_harness: Any) -> None:
    harness = make_harness({"parent": tool("parent_unguarded")})

    outcome = await harness.sequential([("p", "parent", {"target": "nowhere", "args": {}})])

    (receipt,) = outcome.receipts
    assert receipt.status is Status.FAILED
    assert receipt.error is not None
    assert receipt.error.message.startswith("DispatchRejected: dispatch to 'nowhere' rejected")


async def test_a_tool_outside_the_allowlist_cannot_be_dispatched_to(make_harness: Any) -> None:
    harness = make_harness(tools("parent_async"), allowed=["parent", "child"])

    outcome = await harness.sequential([("p", "parent", {"target": "hidden", "args": {}})])

    assert "not in the allowed_tools of 'worker'" in outcome.receipts[0].output["rejected"]
