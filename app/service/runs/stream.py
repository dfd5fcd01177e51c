"""A run's receipts as they become durable, then its final status: the events stream.

Subscribe first, then read what is stored: a receipt committed before the
subscription is in the store, one committed after it reaches the subscriber,
and the overlap is dropped by `seq`. A finished run replays its stored
receipts and ends at once. A run executing in this process is followed through
the hub; one running elsewhere (another replica, or Temporal's workers for a
run recorded `ORCHESTRATED`, even one this process started) through the hub
too when the processes executing it relay it (PostgreSQL: `follow`), its
status checked every `heartbeat_s`, otherwise by polling the store every
`poll_s`, until it ends there (or is marked interrupted when its process died).
When this process shuts down, its own runs end `interrupted` (an `end` event)
and a stream of a run going on elsewhere gets a final `shutdown` event.
"""

from __future__ import annotations

import asyncio
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
)
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.service.errors import RunNotFound, StorageUnavailable
from app.service.runs.events import RunEventHub, Subscription
from app.service.runs.reads import RunViewer, receipt_view
from app.service.runs.tasks import RunSupervisor
from app.store.models import Receipt as StoredReceipt
from app.store.models import Run
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.runs import ORCHESTRATED, RUNNING, RunRepository

PAGE = 500
# (run id, the instance executing it) -> whether that instance relays the run here.
FollowElsewhere = Callable[[str, str], Awaitable[bool]]
SHUTDOWN = "this service instance is shutting down; reconnect to follow the run"


@dataclass(frozen=True, slots=True)
class RunEvent:
    kind: Literal["receipt", "end", "heartbeat", "shutdown"]
    data: Mapping[str, Any] | None = None


class _Seen:
    """Sequence numbers already sent: one bit each, whatever the run's size; and the
    receipt ids of sent ones that had not succeeded, which a resume may replace."""

    __slots__ = ("_bits", "_replaceable", "count")

    def __init__(self) -> None:
        self._bits = bytearray()
        self._replaceable: dict[int, str] = {}
        self.count = 0

    def add_receipt(self, seq: int, receipt_id: str, status: str) -> bool:
        """False when this receipt was already sent (a replacement is news)."""
        new = self.add(seq) or self._replaceable.get(seq, receipt_id) != receipt_id
        if status == "succeeded":
            self._replaceable.pop(seq, None)
        else:
            self._replaceable[seq] = receipt_id
        return new

    def add(self, seq: int) -> bool:
        """False when `seq` was already sent."""
        byte, bit = divmod(seq, 8)
        if byte >= len(self._bits):
            self._bits.extend(bytes(byte + 1 - len(self._bits)))
        if self._bits[byte] & (1 << bit):
            return False
        self._bits[byte] |= 1 << bit
        self.count += 1
        return True


@dataclass(frozen=True, slots=True)
class RunEventStream:
    sessions: async_sessionmaker[AsyncSession]
    hub: RunEventHub
    supervisor: RunSupervisor
    heartbeat_s: float
    poll_s: float
    # None: no channel to the other processes (SQLite); their runs are polled.
    follow: FollowElsewhere | None = None

    async def open(self, run_id: str, viewer: RunViewer) -> AsyncGenerator[RunEvent, None]:
        """Check the run is visible (RunNotFound otherwise), then stream it."""
        run = await self._run(run_id)
        if run is None or not viewer.can_see_run(run.caller):
            raise RunNotFound(run_id)
        return self._events(run_id, run.instance_id if run.status == RUNNING else None)

    async def _events(self, run_id: str, owner: str | None) -> AsyncGenerator[RunEvent, None]:
        loop = asyncio.get_running_loop()
        with self.hub.subscribe(run_id) as subscription:
            seen = _Seen()
            # A run on Temporal writes its receipts in the workers, even when this
            # process supervises it (it started it and waits for its end).
            orchestrated = owner == ORCHESTRATED
            # Relayed from before the stored receipts are read: none falls in between.
            elsewhere = owner is not None and (
                orchestrated or not self.supervisor.is_active(run_id)
            )
            followed = elsewhere and await self._follow(run_id, owner)
            # Read before the receipts: a run seen finished has all its receipts stored.
            status = await self._status(run_id)
            async for event in self._unseen(run_id, seen):
                yield event
            last_sent = loop.time()
            while status == RUNNING:
                for event in _receipts(subscription.drain(), seen):
                    yield event
                    last_sent = loop.time()
                if subscription.lagged:
                    subscription.lagged = False
                    async for event in self._unseen(run_id, seen):
                        yield event
                if subscription.ended is not None:
                    async for event in self._last(subscription, seen, elsewhere):
                        yield event
                    status = subscription.ended
                    break
                if subscription.closed:
                    # This process is stopping; its own runs ended (`end` above) before
                    # the hub closed, so this run goes on elsewhere: say so, and close.
                    yield RunEvent(
                        "shutdown", {"run_id": run_id, "status": status, "detail": SHUTDOWN}
                    )
                    return
                local = not orchestrated and self.supervisor.is_active(run_id)
                relayed = local or followed
                if await subscription.wait(self.heartbeat_s if relayed else self.poll_s):
                    continue
                if not local:
                    # Polled: the process executing the run may have died (its run is then
                    # marked interrupted), or its relayed notices were lost.
                    status = await self._status(run_id)
                    if status != RUNNING or await self._count(run_id) > seen.count:
                        async for event in self._unseen(run_id, seen):
                            yield event
                            last_sent = loop.time()
                if status == RUNNING and loop.time() - last_sent >= self.heartbeat_s:
                    yield RunEvent("heartbeat")
                    last_sent = loop.time()
            if status is not None:
                yield RunEvent("end", {"run_id": run_id, "status": status})

    async def _last(
        self, subscription: Subscription, seen: _Seen, elsewhere: bool
    ) -> AsyncIterator[RunEvent]:
        """The receipts not sent yet once the run ended."""
        for event in _receipts(subscription.drain(), seen):
            yield event
        if elsewhere:
            # Ended elsewhere: its last receipts may still be on their way here.
            async for event in self._unseen(subscription.run_id, seen):
                yield event

    async def _follow(self, run_id: str, owner: str | None) -> bool:
        """Whether the process executing the run relays it here (PostgreSQL)."""
        if self.follow is None or owner is None:
            return False
        return await self.follow(run_id, owner)

    async def _unseen(self, run_id: str, seen: _Seen) -> AsyncIterator[RunEvent]:
        """Stored receipts not sent yet, page by page."""
        after: int | None = None
        while True:
            try:
                async with self.sessions() as session:
                    page = await ReceiptRepository(session).list_for_run(
                        run_id, after_seq=after, limit=PAGE
                    )
            except SQLAlchemyError as exc:
                raise StorageUnavailable(f"the run's receipts could not be read: {exc}") from exc
            for row in page:
                if seen.add_receipt(row.seq, row.id, row.status):
                    yield RunEvent("receipt", receipt_view(row))
            if len(page) < PAGE:
                return
            after = page[-1].seq

    async def _run(self, run_id: str) -> Run | None:
        try:
            async with self.sessions() as session:
                return await RunRepository(session).get(run_id)
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"the run could not be read: {exc}") from exc

    async def _status(self, run_id: str) -> str | None:
        """None when the run is gone from the store: the stream ends without a status."""
        run = await self._run(run_id)
        return None if run is None else run.status

    async def _count(self, run_id: str) -> int:
        try:
            async with self.sessions() as session:
                counts = await ReceiptRepository(session).count_by_status(run_id)
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"the run's receipts could not be read: {exc}") from exc
        return sum(counts.values())


def _receipts(rows: Iterable[Mapping[str, Any]], seen: _Seen) -> list[RunEvent]:
    return [
        RunEvent("receipt", receipt_view(StoredReceipt(**row)))
        for row in rows
        if seen.add_receipt(row["seq"], row["id"], row["status"])
    ]
