"""What a plan's run gives back once every call settled: its outcome, not yet durable."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Generic, TypeVar

from app.engine.errors import ReceiptWriteFailed
from app.foundation.waiting import wait_all

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Settled(Generic[T]):
    """`receipts`: the receipt sink's futures the outcome's receipts wait on; `start`:
    the run's start when it was still pending, queued before any of them (so it
    commits with them or earlier). What the caller queues on the same sink before
    the loop turns twice can share the last receipts' transaction. Nothing of the
    outcome may be reported before `durable()` returned."""

    outcome: T
    receipts: tuple[asyncio.Future[None], ...]
    start: asyncio.Future[None] | None = None

    async def durable(self) -> T:
        """The outcome once every receipt (and the start) is durable; ReceiptWriteFailed
        when one could not be stored. Waiting is cancellable; the writes are not."""
        pending = self.receipts if self.start is None else (self.start, *self.receipts)
        if not all(future.done() for future in pending):
            await wait_all(pending)
        for future in pending:
            if future.cancelled():
                raise ReceiptWriteFailed("a receipt write was cancelled")
            error = future.exception()
            if error is not None:
                what = "the run's start" if future is self.start else "a receipt"
                raise ReceiptWriteFailed(f"{what} could not be stored: {error}") from error
        return self.outcome
