"""Call metrics from the engine's own output: its receipts and audit events.

The engine is not instrumented; the service hands it these sinks, which pass
everything on unchanged to the real writer and count it in batches.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from prometheus_client import Counter, Gauge
from prometheus_client.metrics import MetricWrapperBase

from app.contract.compiled import Contract
from app.engine.ports import AuditEvent, AuditKind, AuditSink, CachedOutput, ReceiptSink
from app.engine.receipt import ErrorKind, Receipt, Status
from app.observability.exposition import flush_at_turn_end, flush_before_rendering
from app.observability.histograms import observe_all
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

_STARTED = AuditKind.CALL_STARTED
_RETRIED = AuditKind.CALL_RETRIED
_TIMED_OUT = AuditKind.CALL_TIMED_OUT
_SKIPPED = Status.SKIPPED
_NOT_STARTED = object()

K = TypeVar("K", bound=Hashable)
M = TypeVar("M", bound=MetricWrapperBase)
T = TypeVar("T")

Tally = dict[K, int]
CallKey = tuple[str, str, Status]  # a receipt's tool, owner and status


class _ChildrenBy(dict[K, M], Generic[K, M]):
    """A metric's children by what a receipt or event carries (a tool name,
    say), found with one dict lookup.

    `labels` turns a key into label values. Only keys that `bounded` accepts
    are kept: a name outside the contract is caller text, and maps to `other`.
    """

    def __init__(
        self,
        children: Children[M],
        labels: Callable[[K], tuple[str, ...]],
        bounded: Callable[[K], bool],
    ) -> None:
        super().__init__()
        self._children = children
        self._labels = labels
        self._bounded = bounded

    def __missing__(self, key: K) -> M:
        child = self._children(*self._labels(key))
        if self._bounded(key):
            self[key] = child
        return child


def _inc_each(children: _ChildrenBy[K, Counter] | _ChildrenBy[K, Gauge], tally: Tally[K]) -> None:
    for key, count in tally.items():
        if count:  # zero: an in-flight count of calls that started and settled in one batch
            children[key].inc(count)


class MeteredSinks:
    """A receipt sink and an audit sink that meter, then delegate.

    A call is in flight from its `call.started` event to its receipt; the
    engine looks the cache up just before `call.started`, so a started call of
    a cacheable tool is a cache miss. Tool and owner labels are the contract's
    names (anything else is `other`).

    Metering a call updated about ten prometheus_client values, each behind
    its own lock, which cost as much as running the call. So the sinks only
    keep what they pass on, and `flush` counts it, updating each touched series
    once (histograms too: `observe_all`). A flush runs
    at the end of each event-loop turn that kept something, before `/metrics`
    renders and when the runtime closes: a scrape of this process sees every
    call so far, other processes' (multiprocess mode) values at most one loop
    turn old.
    """

    def __init__(self, receipts: ReceiptSink, audit: AuditSink, contract: Contract) -> None:
        self._receipts = receipts
        self._audit = audit
        self._cacheable = frozenset(tool.id for tool in contract.tools.values() if tool.cacheable)
        tool, owner = Vocabulary(contract.tools), Vocabulary(contract.owners)
        tools, owners = frozenset(contract.tools), frozenset(contract.owners)

        def by_tool(children: Children[M]) -> _ChildrenBy[str | None, M]:
            return _ChildrenBy(children, lambda name: (tool(name),), tools.__contains__)

        self._calls = _ChildrenBy[CallKey, Counter](
            _CALLS,
            lambda key: (tool(key[0]), owner(key[1]), key[2]),
            lambda key: key[0] in tools and key[1] in owners,
        )
        self._errors = _ChildrenBy[tuple[str, ErrorKind], Counter](
            _CALL_ERRORS, lambda key: (tool(key[0]), key[1]), lambda key: key[0] in tools
        )
        self._audit_events = _ChildrenBy[AuditKind, Counter](
            _AUDIT_EVENTS, lambda kind: (kind,), lambda kind: True
        )
        self._durations = by_tool(_CALL_DURATION)
        self._admission_waits = by_tool(_ADMISSION_WAIT)
        self._in_flight = by_tool(_CALLS_IN_FLIGHT)
        self._cache_hits = by_tool(_CACHE_HITS)
        self._cache_misses = by_tool(_CACHE_MISSES)
        self._retries = by_tool(_RETRIES)
        self._timeouts = by_tool(_TIMEOUTS)
        self._started: dict[str, None] = {}  # receipt ids of the calls in flight
        # Kept since the last flush. Appended on the event loop; a flush takes
        # them from any thread (`/metrics` renders in a worker thread).
        self._new_receipts: list[Receipt] = []
        self._new_events: list[AuditEvent] = []
        self._flush_scheduled = False
        self._flushing = threading.Lock()
        flush_before_rendering(self)

    def submit(
        self, receipt: Receipt, cache_entry: CachedOutput | None = None
    ) -> asyncio.Future[None]:
        self._new_receipts.append(receipt)
        if not self._flush_scheduled:
            self._schedule_flush()
        return self._receipts.submit(receipt, cache_entry)

    def emit(self, event: AuditEvent) -> None:
        self._new_events.append(event)
        if not self._flush_scheduled:
            self._schedule_flush()
        self._audit.emit(event)

    def flush(self) -> None:
        """Count everything kept so far into the metrics. Safe from any thread."""
        with self._flushing:
            self._flush_scheduled = False
            # Receipts are taken first and counted last: a receipt taken here
            # has its `call.started` (one per receipt id) counted by now.
            receipts = _take(self._new_receipts)
            events = _take(self._new_events)
            in_flight: Tally[str | None] = {}  # calls started minus calls settled, by tool
            self._count_events(events, in_flight)
            self._count_receipts(receipts, in_flight)
            _inc_each(self._in_flight, in_flight)

    def _schedule_flush(self) -> None:
        self._flush_scheduled = flush_at_turn_end(self.flush)

    def _count_events(self, events: list[AuditEvent], in_flight: Tally[str | None]) -> None:
        kinds: Tally[AuditKind] = {}
        misses: Tally[str | None] = {}
        started, cacheable = self._started, self._cacheable
        for event in events:
            kind = event.kind
            kinds[kind] = kinds.get(kind, 0) + 1
            if kind is _STARTED:
                tool = event.tool
                receipt_id = event.detail.get("receipt_id")
                if isinstance(receipt_id, str):
                    started[receipt_id] = None
                    in_flight[tool] = in_flight.get(tool, 0) + 1
                if tool in cacheable:
                    misses[tool] = misses.get(tool, 0) + 1
        _inc_each(self._audit_events, kinds)
        _inc_each(self._cache_misses, misses)
        if _RETRIED in kinds or _TIMED_OUT in kinds:
            self._count_retries_and_timeouts(events)

    def _count_retries_and_timeouts(self, events: list[AuditEvent]) -> None:
        for event in events:
            if event.kind is _RETRIED:
                self._retries[event.tool].inc(1)
            elif event.kind is _TIMED_OUT:
                self._timeouts[event.tool].inc(1)

    def _count_receipts(self, receipts: list[Receipt], in_flight: Tally[str | None]) -> None:
        calls: Tally[CallKey] = {}
        hits: Tally[str | None] = {}
        durations: dict[str | None, list[float]] = {}
        waits: dict[str | None, list[float]] = {}
        started = self._started
        for receipt in receipts:
            tool = receipt.tool
            key = (tool, receipt.owner, receipt.status)
            calls[key] = calls.get(key, 0) + 1
            if receipt.status is not _SKIPPED:
                _append(durations, tool, receipt.duration_ms / 1000.0)
            if started.pop(receipt.receipt_id, _NOT_STARTED) is not _NOT_STARTED:
                in_flight[tool] = in_flight.get(tool, 0) - 1
                _append(waits, tool, receipt.admission_wait_ms / 1000.0)
            if receipt.cache_hit:
                hits[tool] = hits.get(tool, 0) + 1
            if receipt.error is not None:
                self._errors[tool, receipt.error.kind].inc(1)
        _inc_each(self._calls, calls)
        _inc_each(self._cache_hits, hits)
        for name, amounts in durations.items():
            observe_all(self._durations[name], amounts)
        for name, amounts in waits.items():
            observe_all(self._admission_waits[name], amounts)


def _append(lists: dict[K, list[float]], key: K, amount: float) -> None:
    found = lists.get(key)
    if found is None:
        lists[key] = [amount]
    else:
        found.append(amount)


def _take(items: list[T]) -> list[T]:
    """Remove and return the items so far; another thread may append meanwhile."""
    count = len(items)
    taken = items[:count]
    del items[:count]
    return taken
