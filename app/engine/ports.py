"""What the engine needs from the outside world; the service implements these.

The engine never imports the store: receipts, audit events and cache entries
leave through these protocols. `app.engine.memory` has in-process versions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple, Protocol

from app.engine.receipt import Receipt


class AuditKind(StrEnum):
    CALL_STARTED = "call.started"
    CALL_RETRIED = "call.retried"
    CALL_TIMED_OUT = "call.timed_out"
    CALL_FINISHED = "call.finished"
    CALL_CACHE_HIT = "call.cache_hit"
    DISPATCH_REJECTED = "dispatch.rejected"
    EVIDENCE_FAILED = "evidence.failed"


class AuditEvent(NamedTuple):
    """One audit record; `detail` is already redacted. Immutable (a NamedTuple:
    two are built per call, and it is far cheaper to build than a frozen dataclass)."""

    kind: AuditKind
    at: datetime
    run_id: str | None
    caller: str | None
    tool: str | None
    call_key: str | None
    item_key: str | None
    detail: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class CachedOutput:
    """A successful output kept for reuse; only outputs that need no redaction are kept."""

    fingerprint: str
    definition_hash: str
    tool: str
    output: Any
    source_receipt_id: str
    created_at: datetime
    expires_at: datetime | None


class ReceiptSink(Protocol):
    def submit(
        self, receipt: Receipt, cache_entry: CachedOutput | None = None
    ) -> asyncio.Future[None]:
        """Queue `receipt.to_stored()` for writing; the future resolves once it is durable.

        A cache entry sourced from this receipt is written in the same transaction,
        so the cache never names a receipt that was lost, and a plan that answered
        has its cache entries in place. Must not block: the engine keeps running
        calls while writes are batched.
        """
        ...


class AuditSink(Protocol):
    def emit(self, event: AuditEvent) -> None:
        """Record an event without blocking (queue it; write it later)."""
        ...


class Backpressure(Protocol):
    def room(self) -> asyncio.Future[None] | None:
        """None when a new call may start now; otherwise a future (shared: never
        cancel it) to wait on first, resolved once the receipt writer has caught up."""
        ...


class CacheStore(Protocol):
    def get(self, fingerprint: str, definition_hash: str) -> Awaitable[CachedOutput | None]:
        """The entry for this exact call and tool definition, expired or not."""
        ...


class SharedLimits(Protocol):
    """Tools' admission limits held together with every other process sharing the
    database (`app.store.shared_limits`). Slots are fungible: a process gives back
    one of a tool's slots, not a particular one."""

    async def take_slot(self, tool_id: str, limit: int) -> None:
        """Wait until this process holds one more of the tool's `limit` slots.
        Cancelling the wait leaves no slot held."""
        ...

    def give_slot(self, tool_id: str) -> None:
        """Give back one slot a call used, without blocking; the process may keep it
        idle for its next call until another process asks for the tool's slots."""
        ...

    def take_idle_slot(self, tool_id: str, limit: int) -> bool:
        """Take one of the tool's slots this process holds unused, at once; False
        (nothing taken) when it holds none: wait in `take_slot`."""
        ...

    async def take_token(
        self, tool_id: str, per_second: float, burst: int, max_wait_s: float | None
    ) -> float | None:
        """Reserve the tool's next rate token; the delay before it may be used (0.0:
        now), or None (nothing taken) when that delay would exceed `max_wait_s`."""
        ...
