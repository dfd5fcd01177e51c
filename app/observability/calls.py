"""Call metrics from the engine's own output: its receipts and audit events.

The engine is not instrumented; the service hands it these sinks, which count
and pass everything on unchanged to the real writer.
"""

from __future__ import annotations

import asyncio

from app.contract.compiled import Contract
from app.engine.ports import AuditEvent, AuditKind, AuditSink, CachedOutput, ReceiptSink
from app.engine.receipt import Receipt, Status
from app.observability.labels import Children, Vocabulary
from app.observability.metrics import (
    ADMISSION_WAIT,
    AUDIT_EVENTS,
    CACHE_HITS,
    CACHE_MISSES,
    CALL_DURATION,
    CALL_ERRORS,
    CALLS,
    CALLS_IN_FLIGHT,
    RETRIES,
    TIMEOUTS,
)

_CALLS = Children(CALLS)
_CALL_ERRORS = Children(CALL_ERRORS)
_CALL_DURATION = Children(CALL_DURATION)
_ADMISSION_WAIT = Children(ADMISSION_WAIT)
_CALLS_IN_FLIGHT = Children(CALLS_IN_FLIGHT)
_CACHE_HITS = Children(CACHE_HITS)
_CACHE_MISSES = Children(CACHE_MISSES)
_RETRIES = Children(RETRIES)
_TIMEOUTS = Children(TIMEOUTS)
_AUDIT_EVENTS = Children(AUDIT_EVENTS)


class MeteredSinks:
    """A receipt sink and an audit sink that meter, then delegate.

    A call is in flight from its `call.started` event to its receipt; the
    engine looks the cache up just before `call.started`, so a started call of
    a cacheable tool is a cache miss. Tool and owner labels are the contract's
    names (anything else is `other`).
    """

    def __init__(self, receipts: ReceiptSink, audit: AuditSink, contract: Contract) -> None:
        self._receipts = receipts
        self._audit = audit
        self._tool = Vocabulary(contract.tools)
        self._owner = Vocabulary(contract.owners)
        self._cacheable = frozenset(tool.id for tool in contract.tools.values() if tool.cacheable)
        self._started: dict[str, str] = {}  # receipt id -> tool label, while in flight

    def submit(
        self, receipt: Receipt, cache_entry: CachedOutput | None = None
    ) -> asyncio.Future[None]:
        tool = self._tool(receipt.tool)
        _CALLS(tool, self._owner(receipt.owner), receipt.status.value).inc()
        if receipt.error is not None:
            _CALL_ERRORS(tool, receipt.error.kind.value).inc()
        if receipt.status is not Status.SKIPPED:
            _CALL_DURATION(tool).observe(receipt.duration_ms / 1000.0)
        if self._started.pop(receipt.receipt_id, None) is not None:
            _CALLS_IN_FLIGHT(tool).dec()
            _ADMISSION_WAIT(tool).observe(receipt.admission_wait_ms / 1000.0)
        if receipt.cache_hit:
            _CACHE_HITS(tool).inc()
        return self._receipts.submit(receipt, cache_entry)

    def emit(self, event: AuditEvent) -> None:
        kind = event.kind
        _AUDIT_EVENTS(kind.value).inc()
        tool = self._tool(event.tool)
        if kind is AuditKind.CALL_STARTED:
            receipt_id = event.detail.get("receipt_id")
            if isinstance(receipt_id, str):
                self._started[receipt_id] = tool
                _CALLS_IN_FLIGHT(tool).inc()
            if event.tool in self._cacheable:
                _CACHE_MISSES(tool).inc()
        elif kind is AuditKind.CALL_RETRIED:
            _RETRIES(tool).inc()
        elif kind is AuditKind.CALL_TIMED_OUT:
            _TIMEOUTS(tool).inc()
        self._audit.emit(event)
