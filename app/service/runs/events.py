"""In-process fan-out of a run's receipts, as they become durable, and of its end.

The group-commit writer publishes each batch's receipt rows after the commit;
the supervisor publishes a run's final status. Subscribers are local to this
process: a run executing in another replica is relayed here from there on
PostgreSQL (`app.service.runs.replicas`), and followed by polling the store.
A subscriber's queue is bounded; when it overflows, events are dropped and the
subscriber is marked `lagged`, so it reads the store again instead. The end is
never dropped.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any

DEFAULT_MAX_PENDING = 1000


class Subscription:
    __slots__ = ("_max_pending", "_rows", "_wake", "closed", "ended", "lagged", "run_id")

    def __init__(self, run_id: str, max_pending: int) -> None:
        self.run_id = run_id
        self._max_pending = max_pending
        self._rows: deque[Mapping[str, Any]] = deque()
        self._wake = asyncio.Event()
        self.lagged = False
        self.ended: str | None = None
        self.closed = False

    def drain(self) -> list[Mapping[str, Any]]:
        rows = list(self._rows)
        self._rows.clear()
        self._wake.clear()
        return rows

    async def wait(self, timeout_s: float) -> bool:
        """Wait for something new; False when `timeout_s` passed first."""
        if not (self._rows or self.lagged or self.ended is not None or self.closed):
            with suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await self._wake.wait()
        return bool(self._rows or self.lagged or self.ended is not None or self.closed)

    def _deliver(self, row: Mapping[str, Any]) -> None:
        if len(self._rows) >= self._max_pending:
            self.lagged = True
        else:
            self._rows.append(row)
        self._wake.set()

    def _end(self, status: str) -> None:
        self.ended = status
        self._wake.set()

    def _close(self) -> None:
        self.closed = True
        self._wake.set()


class RunEventHub:
    def __init__(self, max_pending: int = DEFAULT_MAX_PENDING) -> None:
        self._max_pending = max_pending
        self._subscribers: dict[str, set[Subscription]] = {}
        self._closed = False

    @contextmanager
    def subscribe(self, run_id: str) -> Iterator[Subscription]:
        subscription = Subscription(run_id, self._max_pending)
        if self._closed:
            subscription._close()
        self._subscribers.setdefault(run_id, set()).add(subscription)
        try:
            yield subscription
        finally:
            subscribers = self._subscribers.get(run_id)
            if subscribers is not None:
                subscribers.discard(subscription)
                if not subscribers:
                    del self._subscribers[run_id]

    def subscriber_count(self, run_id: str) -> int:
        return len(self._subscribers.get(run_id, ()))

    def publish_receipts(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """The writer's after-commit listener: every row is a durable, redacted receipt."""
        if not self._subscribers:
            return
        for row in rows:
            for subscription in self._subscribers.get(row["run_id"], ()):
                subscription._deliver(row)

    def lag(self, run_id: str) -> None:
        """The run's subscribers missed something: they read the store again."""
        for subscription in self._subscribers.get(run_id, ()):
            subscription.lagged = True
            subscription._wake.set()

    def end(self, run_id: str, status: str) -> None:
        for subscription in self._subscribers.get(run_id, ()):
            subscription._end(status)

    def close(self) -> None:
        """Shutdown: every subscriber stops waiting."""
        self._closed = True
        for subscribers in self._subscribers.values():
            for subscription in subscribers:
                subscription._close()
