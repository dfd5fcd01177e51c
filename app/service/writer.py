"""Group commit: receipts, their cache entries and audit events share transactions.

The engine submits a receipt and goes on; the writer collects whatever arrived
while the previous transaction was committing (plus a short linger) and writes
it in one transaction, then resolves each receipt's future. A plan answers only
after its own futures resolved, so a receipt is durable before it is reported,
yet concurrent plans never pay one commit per call.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.engine.ports import AuditEvent, CachedOutput
from app.engine.receipt import Receipt
from app.service.receipt_rows import audit_row, cache_entry_row, receipt_row
from app.store.repositories.audit import AuditRepository
from app.store.repositories.cache import CacheRepository
from app.store.repositories.receipts import ReceiptRepository

logger = logging.getLogger("toolloop.writer")


class GroupCommitWriter:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        *,
        linger_s: float = 0.002,
        max_batch: int = 1000,
    ) -> None:
        self._sessions = sessions
        self._linger_s = linger_s
        self._max_batch = max_batch
        self._receipts: list[
            tuple[dict[str, Any], dict[str, Any] | None, asyncio.Future[None]]
        ] = []
        self._audit: list[dict[str, Any]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._writing = False
        self._barriers: list[asyncio.Future[None]] = []

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="toolloop-group-commit")

    def submit(
        self, receipt: Receipt, cache_entry: CachedOutput | None = None
    ) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._closing:
            future.set_exception(RuntimeError("the receipt writer is closed"))
            return future
        cache_row = None if cache_entry is None else cache_entry_row(cache_entry)
        self._receipts.append((receipt_row(receipt), cache_row, future))
        self._wake.set()
        return future

    def emit(self, event: AuditEvent) -> None:
        self._audit.append(audit_row(event))
        self._wake.set()

    def emit_row(self, row: dict[str, Any]) -> None:
        """Queue an already redacted audit row written by the service itself."""
        self._audit.append(row)
        self._wake.set()

    async def flush(self) -> None:
        """Wait until everything queued before this call has been written (or failed)."""
        if not (self._receipts or self._audit or self._writing):
            return
        barrier: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._barriers.append(barrier)
        self._wake.set()
        await barrier

    async def aclose(self) -> None:
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            if self._linger_s and not self._closing:
                await asyncio.sleep(self._linger_s)
            self._wake.clear()
            self._writing = True
            while self._receipts or self._audit:
                await self._write_batch()
            self._writing = False
            barriers, self._barriers = self._barriers, []
            for barrier in barriers:
                if not barrier.done():
                    barrier.set_result(None)
            if self._closing:
                return

    async def _write_batch(self) -> None:
        batch, self._receipts = (
            self._receipts[: self._max_batch],
            self._receipts[self._max_batch :],
        )
        audit, self._audit = self._audit[: self._max_batch], self._audit[self._max_batch :]
        try:
            async with self._sessions.begin() as session:
                await ReceiptRepository(session).add_many([row for row, _, _ in batch])
                cache_rows = [row for _, row, _ in batch if row is not None]
                if cache_rows:
                    await CacheRepository(session).put_many(cache_rows)
                await AuditRepository(session).add_many(audit)
        except Exception as exc:  # resolved into every waiting plan, which reports it
            logger.error("group commit of %d receipts failed: %s", len(batch), exc)
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for _, _, future in batch:
            if not future.done():
                future.set_result(None)
