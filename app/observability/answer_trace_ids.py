"""A traced run's answer carries its W3C trace id: at the top and on every receipt, as
the stored run and receipts do (`GET /runs/{id}`, `GET /runs/{id}/receipts`)."""

from __future__ import annotations

from typing import Any

from app.observability.trace_context import current_trace_id

RECEIPT_LISTS = ("receipts", "dispatched")


def with_trace_id(response: dict[str, Any], trace_id: str) -> dict[str, Any]:
    """A copy of a run's answer (a plan's or a router run's) with `trace_id` added."""
    answer: dict[str, Any] = {**response, "trace_id": trace_id}
    for name in RECEIPT_LISTS:
        if isinstance(receipts := response.get(name), list):
            answer[name] = _traced(receipts, trace_id)
    if isinstance(lanes := response.get("lanes"), list):
        answer["lanes"] = [
            {**lane, "receipts": _traced(lane["receipts"], trace_id)}
            if isinstance(lane, dict) and isinstance(lane.get("receipts"), list)
            else lane
            for lane in lanes
        ]
    return answer


def _traced(receipts: list[Any], trace_id: str) -> list[Any]:
    return [
        {**receipt, "trace_id": trace_id} if isinstance(receipt, dict) else receipt
        for receipt in receipts
    ]


def with_current_trace_id(response: dict[str, Any]) -> dict[str, Any]:
    """`response` with the request's trace id when it is traced; as it is otherwise
    (tracing off: one context-variable read)."""
    trace_id = current_trace_id()
    return response if trace_id is None else with_trace_id(response, trace_id)
