"""Use-cases for operators: read runs, receipts and audit events as stored (redacted).

Visibility is decided by the viewer: a run someone else created does not exist
for a viewer who may not see it (`RunNotFound`), and listings keep only the
runs and receipts the viewer may see.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.service.errors import RunNotFound, StorageUnavailable
from app.store.models import Receipt, Run
from app.store.repositories.audit import (
    AuditRepository,
    StoredAuditEvent,
    event_id_of_two_per_row,
)
from app.store.repositories.pagination import Keyset as Keyset
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.runs import RunRepository

K = TypeVar("K")
R = TypeVar("R")

logger = logging.getLogger("toolloop.reads")

RECEIPT_STATUSES = ("succeeded", "failed", "timed_out", "skipped", "denied")


class RunViewer(Protocol):
    """Who reads; `app.api.auth.Principal` is one."""

    def can_see_run(self, created_by: str | None) -> bool: ...

    @property
    def visible_run_creator(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class RunFilters:
    owner: str | None = None
    status: str | None = None
    kind: str | None = None
    caller: str | None = None
    since: datetime | None = None
    until: datetime | None = None


@dataclass(frozen=True, slots=True)
class ReceiptFilters:
    run_id: str | None = None
    tool: str | None = None
    owner: str | None = None
    status: str | None = None
    item_key: str | None = None
    cache_hit: bool | None = None
    since: datetime | None = None
    until: datetime | None = None


@dataclass(frozen=True, slots=True)
class Listing(Generic[K]):
    """Rendered items and the position the next page starts after (None: no more)."""

    items: list[dict[str, Any]]
    next: K | None


@dataclass(frozen=True, slots=True)
class ReadService:
    sessions: async_sessionmaker[AsyncSession]

    async def get_run(self, run_id: str, viewer: RunViewer) -> dict[str, Any]:
        async with self._session() as session:
            run = await self._visible_run(session, run_id, viewer)
            counts = await ReceiptRepository(session).count_by_status(run_id)
        view = run_view(run)
        view["receipt_counts"] = dict.fromkeys(RECEIPT_STATUSES, 0) | counts
        view["receipt_count"] = sum(counts.values())
        view["outcome"] = run.outcome
        view["context"] = run.context
        return view

    async def list_runs(
        self, filters: RunFilters, viewer: RunViewer, *, limit: int, after: Keyset | None
    ) -> Listing[Keyset]:
        visible = viewer.visible_run_creator
        if visible is not None and filters.caller not in (None, visible):
            return Listing(items=[], next=None)
        caller = filters.caller if visible is None else visible
        async with self._session() as session:
            page = await RunRepository(session).list_page(
                limit=limit,
                after=after,
                owner=filters.owner,
                status=filters.status,
                kind=filters.kind,
                caller=caller,
                since=filters.since,
                until=filters.until,
            )
        return Listing(items=[run_view(run) for run in page.items], next=page.next)

    async def list_run_receipts(
        self, run_id: str, viewer: RunViewer, *, limit: int, after_seq: int | None
    ) -> Listing[int]:
        async with self._session() as session:
            run = await self._visible_run(session, run_id, viewer)
            rows = await ReceiptRepository(session).list_for_run(
                run_id, after_seq=after_seq, limit=limit + 1
            )
        trace_id = run.trace_id
        return _in_run_order(
            rows,
            limit,
            lambda receipt: receipt_view(receipt, trace_id),
            lambda receipt: receipt.seq,
        )

    async def list_receipts(
        self, filters: ReceiptFilters, viewer: RunViewer, *, limit: int, after: Keyset | None
    ) -> Listing[Keyset]:
        async with self._session() as session:
            page = await ReceiptRepository(session).list_page(
                limit=limit,
                after=after,
                run_id=filters.run_id,
                tool=filters.tool,
                owner=filters.owner,
                status=filters.status,
                item_key=filters.item_key,
                cache_hit=filters.cache_hit,
                since=filters.since,
                until=filters.until,
                run_caller=viewer.visible_run_creator,
            )
            trace_ids = await RunRepository(session).trace_ids({row.run_id for row in page.items})
        return Listing(
            items=[receipt_view(row, trace_ids.get(row.run_id)) for row in page.items],
            next=page.next,
        )

    async def list_run_audit(
        self, run_id: str, viewer: RunViewer, *, limit: int, after_id: int | None
    ) -> Listing[int]:
        async with self._session() as session:
            await self._visible_run(session, run_id, viewer)
            rows = await AuditRepository(session).list_for_run(
                run_id, after_id=after_id, limit=limit + 1
            )
        # Event ids, not row ids: a row may hold several events (`AuditRepository`).
        return _in_run_order(rows, limit, audit_view, lambda event: event.id)

    @staticmethod
    def audit_event_id_of_earlier_version(earlier_id: int, maximum: int) -> int:
        """The id an audit event has now, from the id an earlier version showed
        (two ids to a stored row), at most `maximum`."""
        return min(event_id_of_two_per_row(earlier_id), maximum)

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[AsyncSession]:
        try:
            async with self.sessions() as session:
                yield session
        except SQLAlchemyError as exc:
            logger.error("a read from the store failed: %s", exc)
            raise StorageUnavailable("The store could not be read; retry shortly.") from exc

    @staticmethod
    async def _visible_run(session: AsyncSession, run_id: str, viewer: RunViewer) -> Run:
        run = await RunRepository(session).get(run_id)
        if run is None or not viewer.can_see_run(run.caller):
            raise RunNotFound(run_id)
        return run


def _in_run_order(
    rows: Sequence[R],
    limit: int,
    render: Callable[[R], dict[str, Any]],
    position: Callable[[R], int],
) -> Listing[int]:
    """A page from `limit + 1` rows fetched in order: the extra row only says more follow."""
    page = rows[:limit]
    more = len(rows) > limit
    return Listing(items=[render(row) for row in page], next=position(page[-1]) if more else None)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def run_view(run: Run) -> dict[str, Any]:
    finished = run.finished_at
    return {
        "run_id": run.id,
        "kind": run.kind,
        "owner": run.owner,
        "status": run.status,
        "caller": run.caller,
        "contract_hash": run.contract_hash,
        "parallel_batch_id": run.parallel_batch_id,
        "trace_id": run.trace_id,
        "call_count": run.call_count,
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at.isoformat(),
        "finished_at": _iso(finished),
        "duration_ms": None
        if finished is None
        else (finished - run.started_at).total_seconds() * 1000,
    }


def receipt_view(receipt: Receipt, trace_id: str | None = None) -> dict[str, Any]:
    """`trace_id`: its run's (receipts are traced through their run)."""
    return {
        "receipt_id": receipt.id,
        "run_id": receipt.run_id,
        "plan_id": receipt.run_id,
        "seq": receipt.seq,
        "owner": receipt.owner,
        "call_key": receipt.call_key,
        "item_key": receipt.item_key,
        "parallel_batch_id": receipt.parallel_batch_id,
        "tool": receipt.tool,
        "status": receipt.status,
        "output": receipt.output,
        "output_truncated": receipt.output_truncated,
        "output_digest": receipt.output_digest,
        "error": receipt.error,
        "attempts": receipt.attempts,
        "cache_hit": receipt.cache_hit,
        "cache_source_receipt_id": receipt.cache_source_receipt_id,
        "fingerprint": receipt.fingerprint,
        "idempotency_key": receipt.idempotency_key,
        "parent_receipt_id": receipt.parent_receipt_id,
        "control": receipt.control,
        "admission_wait_ms": receipt.admission_wait_ms,
        "started_at": receipt.started_at.isoformat(),
        "finished_at": _iso(receipt.finished_at),
        "duration_ms": receipt.duration_ms,
        "created_at": receipt.created_at.isoformat(),
        "trace_id": trace_id,
    }


def audit_view(event: StoredAuditEvent) -> dict[str, Any]:
    return {
        "id": event.id,
        "run_id": event.run_id,
        "at": event.at.isoformat(),
        "kind": event.kind,
        "caller": event.caller,
        "tool": event.tool,
        "call_key": event.call_key,
        "item_key": event.item_key,
        "detail": event.detail,
    }
