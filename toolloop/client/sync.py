"""`Client`: ToolLoop over HTTP from synchronous code."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx

from toolloop.client import answers
from toolloop.client import operations as ops
from toolloop.client.errors import ConnectionLost, Unreachable
from toolloop.client.events import EventParser
from toolloop.client.models import (
    AuditEvent,
    Confirmation,
    PlanResult,
    Receipt,
    RouterRunResult,
    Run,
    RunAccepted,
    RunEvent,
    Usage,
)
from toolloop.client.retry import NOT_SENT, RETRYABLE_STATUSES, RetryPolicy

T = TypeVar("T")


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {} if api_key is None else {"Authorization": f"Bearer {api_key}"}


class Client:
    """A ToolLoop service at `base_url`. Each plan is sent under an Idempotency-Key minted
    for it (or the one given), and every retry of it reuses that key."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        retry: RetryPolicy | None = None,
        timeout_s: float = 300.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        self._http = httpx.Client(
            base_url=base_url,
            headers=auth_headers(api_key),
            timeout=timeout_s,
            transport=transport,
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # Plans and router runs

    def run_sequential(
        self,
        owner: str,
        calls: Sequence[Mapping[str, Any]],
        *,
        context: Mapping[str, Any] | None = None,
        deadline_s: float | None = None,
        idempotency_key: str | None = None,
    ) -> PlanResult:
        """Run the calls in order and answer once the plan ran (or waits for approvals)."""
        operation = ops.sequential_plan(
            owner, calls, context=context, deadline_s=deadline_s, idempotency_key=idempotency_key
        )
        return self._plan(operation)

    def run_parallel(
        self,
        owner: str,
        lanes: Sequence[Mapping[str, Any]],
        *,
        max_concurrency: int,
        context: Mapping[str, Any] | None = None,
        deadline_s: float | None = None,
        idempotency_key: str | None = None,
    ) -> PlanResult:
        """Run the lanes concurrently (each lane in order); receipts come in input order."""
        operation = ops.parallel_plan(
            owner,
            lanes,
            max_concurrency=max_concurrency,
            context=context,
            deadline_s=deadline_s,
            idempotency_key=idempotency_key,
        )
        return self._plan(operation)

    def start_sequential(
        self,
        owner: str,
        calls: Sequence[Mapping[str, Any]],
        *,
        context: Mapping[str, Any] | None = None,
        deadline_s: float | None = None,
        idempotency_key: str | None = None,
    ) -> RunAccepted:
        """Start the plan in the background (`Prefer: respond-async`); follow `events`."""
        operation = ops.sequential_plan(
            owner,
            calls,
            context=context,
            deadline_s=deadline_s,
            idempotency_key=idempotency_key,
            respond_async=True,
        )
        return answers.expect_accepted(self._send(operation), operation)

    def start_parallel(
        self,
        owner: str,
        lanes: Sequence[Mapping[str, Any]],
        *,
        max_concurrency: int,
        context: Mapping[str, Any] | None = None,
        deadline_s: float | None = None,
        idempotency_key: str | None = None,
    ) -> RunAccepted:
        operation = ops.parallel_plan(
            owner,
            lanes,
            max_concurrency=max_concurrency,
            context=context,
            deadline_s=deadline_s,
            idempotency_key=idempotency_key,
            respond_async=True,
        )
        return answers.expect_accepted(self._send(operation), operation)

    def run_router(
        self, request: Mapping[str, Any], *, idempotency_key: str | None = None
    ) -> RouterRunResult:
        operation = ops.router_run(request, idempotency_key=idempotency_key)
        return answers.router_result(self._send(operation), operation)

    def start_router(
        self, request: Mapping[str, Any], *, idempotency_key: str | None = None
    ) -> RunAccepted:
        operation = ops.router_run(request, idempotency_key=idempotency_key, respond_async=True)
        return answers.expect_accepted(self._send(operation), operation)

    def resume(self, run_id: str, original_body: Mapping[str, Any]) -> PlanResult:
        """Run the calls of an interrupted plan that have no successful receipt."""
        return self._plan(ops.resume(run_id, original_body))

    # Control and approvals

    def cancel(self, run_id: str) -> str:
        return str(self._json(ops.post(f"/runs/{run_id}/cancel"))["status"])

    def decide(
        self, run_id: str, confirmation_id: str, *, approve: bool, reason: str | None = None
    ) -> dict[str, Any]:
        body = ops.without_none(approve=approve, reason=reason)
        return self._json(ops.post(f"/runs/{run_id}/confirmations/{confirmation_id}", body))

    def confirmations(self, status: str = "pending", **filters: Any) -> Iterator[Confirmation]:
        return self._pages("/confirmations", Confirmation.from_wire, status=status, **filters)

    # Reads

    def get_run(self, run_id: str) -> Run:
        return Run.from_wire(self._json(ops.get(f"/runs/{run_id}")))

    def runs(self, **filters: Any) -> Iterator[Run]:
        return self._pages("/runs", Run.from_wire, **filters)

    def run_receipts(self, run_id: str, *, limit: int | None = None) -> Iterator[Receipt]:
        return self._pages(f"/runs/{run_id}/receipts", Receipt.from_wire, limit=limit)

    def receipts(self, **filters: Any) -> Iterator[Receipt]:
        return self._pages("/receipts", Receipt.from_wire, **filters)

    def audit(self, run_id: str, *, limit: int | None = None) -> Iterator[AuditEvent]:
        return self._pages(f"/runs/{run_id}/audit", AuditEvent.from_wire, limit=limit)

    def usage(self, **filters: Any) -> Iterator[Usage]:
        """`GET /usage`: `bucket` ("hour" or "day"), owner, caller, profile, since, until."""
        return self._pages("/usage", Usage.from_wire, **filters)

    def tools(self) -> dict[str, Any]:
        return self._json(ops.get("/tools"))

    def events(self, run_id: str) -> Iterator[RunEvent]:
        """The run's receipts as they become durable, then its `end`. A dropped stream is
        opened again (the service replays what already happened; each receipt is passed
        on once). Heartbeats are not passed on."""
        seen: set[str] = set()
        attempt = 1
        while True:
            try:
                with self._http.stream("GET", f"/runs/{run_id}/events") as response:
                    if response.status_code >= 400:
                        response.read()
                        raise answers.problem_error(response, ops.get(""))
                    parser = EventParser()
                    for line in response.iter_lines():
                        event = parser.feed(line)
                        if event is None or event.kind == "heartbeat":
                            continue
                        if event.kind == "receipt":
                            receipt_id = str(event.data.get("receipt_id"))
                            if receipt_id in seen:
                                continue
                            seen.add(receipt_id)
                        attempt = 1
                        yield event
                        if event.kind == "end":
                            return
            except httpx.TransportError:
                pass
            if not self.retry.allows(attempt):
                raise ConnectionLost(
                    f"the events of run {run_id} stopped before its end", idempotency_key=None
                )
            time.sleep(self.retry.delay(attempt))
            attempt += 1

    def wait(self, run_id: str) -> Run:
        """Follow the run's events until it ends (or pauses), then read it."""
        for _ in self.events(run_id):
            pass
        return self.get_run(run_id)

    # Sending

    def _plan(self, operation: ops.Operation) -> PlanResult:
        return answers.plan_result(self._send(operation), operation)

    def _json(self, operation: ops.Operation) -> dict[str, Any]:
        body: dict[str, Any] = self._send(operation).json()
        return body

    def _pages(self, path: str, read: Callable[[dict[str, Any]], T], **params: Any) -> Iterator[T]:
        cursor: str | None = None
        while True:
            page = self._json(ops.get(path, **params, cursor=cursor))
            yield from (read(item) for item in page["items"])
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def _send(self, operation: ops.Operation) -> httpx.Response:
        attempt = 1
        while True:
            try:
                response = self._http.request(
                    operation.method,
                    operation.path,
                    json=operation.json,
                    params=operation.params,
                    headers=operation.headers,
                )
            except NOT_SENT as exc:
                if not self.retry.allows(attempt):
                    raise Unreachable(f"{operation.path}: {exc}") from exc
                time.sleep(self.retry.delay(attempt))
                attempt += 1
                continue
            except httpx.TransportError as exc:
                if operation.method == "GET" and self.retry.allows(attempt):
                    time.sleep(self.retry.delay(attempt))
                    attempt += 1
                    continue
                raise ConnectionLost(
                    f"{operation.path}: {exc}", idempotency_key=operation.idempotency_key
                ) from exc
            if response.status_code in RETRYABLE_STATUSES and self.retry.allows(attempt):
                time.sleep(self.retry.delay(attempt, response.headers.get("retry-after")))
                attempt += 1
                continue
            if response.status_code >= 400:
                raise answers.problem_error(response, operation)
            return response
