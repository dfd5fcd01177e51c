"""Reading ToolLoop's answers, the same for the sync and the async client."""

from __future__ import annotations

from typing import Any

import httpx

from toolloop.client.errors import Problem, ProblemError, RetriesExhausted, UnansweredRequest
from toolloop.client.models import PlanResult, RouterRunResult, RunAccepted
from toolloop.client.operations import Operation
from toolloop.client.retry import RETRYABLE_STATUSES

UNANSWERED = "idempotency-key-unanswered"


def problem_error(response: httpx.Response, operation: Operation) -> ProblemError:
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    problem = Problem.from_wire(response.status_code, body)
    key = operation.idempotency_key
    if problem.slug == UNANSWERED:
        return UnansweredRequest(problem, idempotency_key=key)
    if response.status_code in RETRYABLE_STATUSES:
        return RetriesExhausted(problem, idempotency_key=key)
    return ProblemError(problem, idempotency_key=key)


def replayed(response: httpx.Response) -> bool:
    return bool(response.headers.get("idempotent-replayed") == "true")


def accepted(response: httpx.Response, operation: Operation) -> RunAccepted:
    body = response.json()
    return RunAccepted(
        run_id=body["run_id"],
        status=body["status"],
        location=response.headers.get("location", f"/runs/{body['run_id']}"),
        idempotency_key=operation.idempotency_key or "",
        replayed=replayed(response),
    )


def plan_result(response: httpx.Response, operation: Operation) -> PlanResult:
    return PlanResult.from_wire(
        response.json(), operation.idempotency_key or "", replayed(response)
    )


def router_result(response: httpx.Response, operation: Operation) -> RouterRunResult:
    return RouterRunResult.from_wire(
        response.json(), operation.idempotency_key or "", replayed(response)
    )


def expect_accepted(response: httpx.Response, operation: Operation) -> RunAccepted:
    if response.status_code != 202:
        raise ProblemError(
            Problem(response.status_code, "about:blank", "Not accepted", "expected 202"),
            idempotency_key=operation.idempotency_key,
        )
    return accepted(response, operation)
