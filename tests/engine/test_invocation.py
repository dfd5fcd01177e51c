"""Sync and async callables: exact keyword arguments, and the execution context out of band."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine import NoCurrentCall, current_call
from app.engine.receipt import ErrorKind, Status
from tests.engine.harness import OWNER, tool


@pytest.mark.parametrize("function", ["echo", "aecho"])
async def test_callable_receives_exactly_the_admitted_arguments(
    make_harness: Any, function: str
) -> None:
    harness = make_harness({"t": tool(function)})
    args = {"text": "x", "n": 2, "nested": {"a": [1, 2]}}

    outcome = await harness.sequential(
        [("c1", "t", args)], run=harness.identity(context={"trace_id": "t-1"})
    )

    (receipt,) = outcome.receipts
    assert receipt.status is Status.SUCCEEDED
    assert receipt.output["args"] == args


async def test_sync_callable_runs_in_a_worker_thread_and_async_on_the_loop(
    make_harness: Any,
) -> None:
    harness = make_harness({"s": tool("echo"), "a": tool("aecho")})

    outcome = await harness.sequential([("1", "s", {}), ("2", "a", {})])

    sync_receipt, async_receipt = outcome.receipts
    assert sync_receipt.output["thread"].startswith("toolloop-tool")
    assert async_receipt.output["thread"] == "MainThread"


@pytest.mark.parametrize("function", ["whoami", "awhoami"])
async def test_execution_context_is_available_out_of_band(make_harness: Any, function: str) -> None:
    harness = make_harness({"who": tool(function)})
    run = harness.identity(caller="alice", context={"trace_id": "t-9"})

    outcome = await harness.parallel([("item-a", [("k1", "who", {})])], max_concurrency=1, run=run)

    (lane,) = outcome.lanes
    (receipt,) = lane.receipts
    seen = receipt.output
    assert seen == {
        "run_id": run.run_id,
        "plan_id": run.run_id,
        "kind": "parallel",
        "owner": OWNER,
        "tool": "who",
        "caller": "alice",
        "context": {"trace_id": "t-9"},
        "receipt_id": receipt.receipt_id,
        "idempotency_key": receipt.idempotency_key,
        "attempt": 1,
        "call_key": "k1",
        "item_key": "item-a",
        "parallel_batch_id": outcome.parallel_batch_id,
        "parent_receipt_id": None,
    }


async def test_caller_context_is_read_only_inside_a_tool(make_harness: Any) -> None:
    harness = make_harness({"m": tool("mutate_context")})

    outcome = await harness.sequential(
        [("1", "m", {})], run=harness.identity(context={"trace_id": "t"})
    )

    (receipt,) = outcome.receipts
    assert receipt.status is Status.FAILED
    assert receipt.error is not None
    assert receipt.error.kind is ErrorKind.EXCEPTION
    assert "TypeError" in receipt.error.message


def test_current_call_outside_a_tool_raises_a_clear_error() -> None:
    with pytest.raises(NoCurrentCall, match="no tool call is running"):
        current_call()


async def test_context_is_gone_after_the_call(make_harness: Any) -> None:
    harness = make_harness({"who": tool("awhoami")})

    await harness.sequential([("1", "who", {})])

    with pytest.raises(NoCurrentCall):
        current_call()


async def test_unexpected_keyword_is_an_exception_receipt(make_harness: Any) -> None:
    harness = make_harness({"w": tool("awhoami")})

    outcome = await harness.sequential([("1", "w", {"surprise": 1})])

    (receipt,) = outcome.receipts
    assert receipt.status is Status.FAILED
    assert receipt.error is not None
    assert receipt.error.kind is ErrorKind.EXCEPTION
    assert "surprise" in receipt.error.message
