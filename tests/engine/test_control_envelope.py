"""A tool with a control envelope: the receipt carries the decision, its status stays."""

from __future__ import annotations

from typing import Any

from app.engine.receipt import Status
from tests.engine.harness import tool

ENVELOPE = {
    "version": 1,
    "role": "production",
    "graph": {
        "status_field": "status",
        "continue_statuses": ["success", "partial"],
        "stop_statuses": ["failed"],
    },
    "diagnosis": {"reason_code_field": "reason_code"},
    "handoff_fields": ["summary"],
}


async def test_control_decision_is_on_a_succeeded_receipt(make_harness: Any) -> None:
    harness = make_harness({"r": tool("report", control_envelope=ENVELOPE)})

    outcome = await harness.sequential([("1", "r", {"status": "success"})])

    (receipt,) = outcome.receipts
    assert receipt.status is Status.SUCCEEDED
    assert receipt.control is not None
    assert receipt.control["decision"] == "continue"
    assert receipt.control["handoff"] == {"summary": "done"}
    assert receipt.to_response()["control"]["business_status"] == "success"


async def test_a_stop_decision_leaves_the_execution_status_alone(make_harness: Any) -> None:
    harness = make_harness({"r": tool("report", control_envelope=ENVELOPE)})

    outcome = await harness.sequential([("1", "r", {"status": "failed"})])

    (receipt,) = outcome.receipts
    assert receipt.status is Status.SUCCEEDED
    assert receipt.control is not None
    assert receipt.control["decision"] == "stop"
    assert outcome.status == "succeeded"


async def test_tools_without_an_envelope_have_no_control(make_harness: Any) -> None:
    harness = make_harness({"r": tool("report")})

    outcome = await harness.sequential([("1", "r", {"status": "success"})])

    assert outcome.receipts[0].control is None
