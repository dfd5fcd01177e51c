"""`AsyncClient`: ToolLoop over HTTP from asyncio code."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
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
from toolloop.client.sync import auth_headers

T = TypeVar("T")


class AsyncClient:
    """A ToolLoop service at `base_url`. Each plan is sent under an Idempotency-Key minted
    for it (or the one given), and every retry of it reuses that key."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        retry: RetryPolicy | None = None,
        timeout_s: float = 300.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=auth_headers(api_key),
            timeout=timeout_s,
            transport=transport,
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    # Plans and router runs

    async def run_sequential(
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
        return await self._plan(operation)

    async def run_parallel(
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
        return await self._plan(operation)

    async def start_sequential(
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
        return answers.expect_accepted(await self._send(operation), operation)

    async def start_parallel(
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
        return answers.expect_accepted(await self._send(operation), operation)

    async def run_router(
        self, request: Mapping[str, Any], *, idempotency_key: str | None = None
    ) -> RouterRunResult:
        operation = ops.router_run(request, idempotency_key=idempotency_key)
        return answers.router_result(await self._send(operation), operation)

    async def start_router(
        self, request: Mapping[str, Any], *, idempotency_key: str | None = None
    ) -> RunAccepted:
        operation = ops.router_run(request, idempotency_key=idempotency_key, respond_async=True)
        return answers.expect_accepted(await self._send(operation), operation)

    async def resume(self, run_id: str, original_body: Mapping[str, Any]) -> PlanResult:
        """Run the calls of an interrupted plan that have no successful receipt."""
        return await self._plan(ops.resume(run_id, original_body))

    # Control and approvals

    async def cancel(self, run_id: str) -> str:
        return str((await self._json(ops.post(f"/runs/{run_id}/cancel")))["status"])

    async def decide(
        self, run_id: str, confirmation_id: str, *, approve: bool, reason: str | None = None
    ) -> dict[str, Any]:
        body = ops.without_none(approve=approve, reason=reason)
        return await self._json(ops.post(f"/runs/{run_id}/confirmations/{confirmation_id}", body))

    def confirmations(self, status: str = "pending", **filters: Any) -> AsyncIterator[Confirmation]:
        return self._pages("/confirmations", Confirmation.from_wire, status=status, **filters)

    # Reads

    async def get_run(self, run_id: str) -> Run:
        return Run.from_wire(await self._json(ops.get(f"/runs/{run_id}")))

    def runs(self, **filters: Any) -> AsyncIterator[Run]:
        return self._pages("/runs", Run.from_wire, **filters)

    def run_receipts(self, run_id: str, *, limit: int | None = None) -> AsyncIterator[Receipt]:
        return self._pages(f"/runs/{run_id}/receipts", Receipt.from_wire, limit=limit)

    def receipts(self, **filters: Any) -> AsyncIterator[Receipt]:
        return self._pages("/receipts", Receipt.from_wire, **filters)

    def audit(self, run_id: str, *, limit: int | None = None) -> AsyncIterator[AuditEvent]:
        return self._pages(f"/runs/{run_id}/audit", AuditEvent.from_wire, limit=limit)

    def usage(self, **filters: Any) -> AsyncIterator[Usage]:
        """`GET /usage`: `bucket` ("hour" or "day"), owner, caller, profile, since, until."""
        return self._pages("/usage", Usage.from_wire, **filters)

    async def tools(self) -> dict[str, Any]:
        return await self._json(ops.get("/tools"))

    async def events(self, run_id: str) -> AsyncIterator[RunEvent]:
        """The run's receipts as they become durable, then its `end`. A dropped stream is
        opened again (the service replays what already happened; each receipt is passed
        on once). Heartbeats are not passed on."""
        seen: set[str] = set()
        attempt = 1
        while True:
            try:
                async with self._http.stream("GET", f"/runs/{run_id}/events") as response:
                    if response.status_code >= 400:
                        await response.aread()
                        raise answers.problem_error(response, ops.get(""))
                    parser = EventParser()
                    async for line in response.aiter_lines():
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
            await asyncio.sleep(self.retry.delay(attempt))
            attempt += 1

    async def wait(self, run_id: str) -> Run:
        """Follow the run's events until it ends (or pauses), then read it."""
        async for _ in self.events(run_id):
            pass
        return await self.get_run(run_id)

    # Sending

    async def _plan(self, operation: ops.Operation) -> PlanResult:
        return answers.plan_result(await self._send(operation), operation)

    async def _json(self, operation: ops.Operation) -> dict[str, Any]:
        body: dict[str, Any] = (await self._send(operation)).json()
        return body

    async def _pages(
        self, path: str, read: Callable[[dict[str, Any]], T], **params: Any
    ) -> AsyncIterator[T]:
        cursor: str | None = None
        while True:
            page = await self._json(ops.get(path, **params, cursor=cursor))
            for item in page["items"]:
                yield read(item)
            cursor = page.get("next_cursor")
            if not cursor:
                return

    async def _send(self, operation: ops.Operation) -> httpx.Response:
        attempt = 1
        while True:
            try:
                response = await self._http.request(
                    operation.method,
                    operation.path,
                    json=operation.json,
                    params=operation.params,
                    headers=operation.headers,
                )
            except NOT_SENT as exc:
                if not self.retry.allows(attempt):
                    raise Unreachable(f"{operation.path}: {exc}") from exc
                await asyncio.sleep(self.retry.delay(attempt))
                attempt += 1
                continue
            except httpx.TransportError as exc:
                if operation.method == "GET" and self.retry.allows(attempt):
                    await asyncio.sleep(self.retry.delay(attempt))
                    attempt += 1
                    continue
                raise ConnectionLost(
                    f"{operation.path}: {exc}", idempotency_key=operation.idempotency_key
                ) from exc
            if response.status_code in RETRYABLE_STATUSES and self.retry.allows(attempt):
                await asyncio.sleep(self.retry.delay(attempt, response.headers.get("retry-after")))
                attempt += 1
                continue
            if response.status_code >= 400:
                raise answers.problem_error(response, operation)
            return response
