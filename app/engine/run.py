"""Who a run is (identity) and what the engine tracks while it runs (state)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from app.engine.confirmation import CallPlace, ConfirmationDecision, WaitingCall
from app.engine.errors import ReceiptWriteFailed
from app.engine.receipt import Receipt
from app.engine.requirements import RunRequirements
from app.engine.watchdog import Deadlines
from app.foundation.waiting import wait_all

if TYPE_CHECKING:
    from app.engine.context import Dispatcher


class RunKind(StrEnum):
    SEQUENTIAL = "sequential"
    PARALLEL = "parallel"
    ROUTER = "router"


@dataclass(frozen=True, slots=True)
class RunIdentity:
    """Out-of-band identity; never part of a callable's arguments."""

    run_id: str
    owner: str
    caller: str | None
    context: Mapping[str, Any]
    contract_hash: str

    def __post_init__(self) -> None:
        if not isinstance(self.context, MappingProxyType):
            object.__setattr__(self, "context", MappingProxyType(dict(self.context)))


class RunState:
    """Mutable bookkeeping of one run inside the engine.

    Created inside the event loop that runs the calls. `deadline` is on that
    loop's clock (`loop.time()`), or None.
    Sequence numbers after the plan's own calls go to dispatched calls.

    `started`: the run's start, queued on the receipt sink but not yet known to be
    durable (None: it is). No call of a tool with effects starts before it is; once
    it failed, no call starts at all. It is among the `pending` futures, so the
    run's final flush raises if it failed.

    `requirements`: what the run did so far that tools' `requires` ask about.
    """

    __slots__ = (
        "deadline",
        "deadlines",
        "decisions",
        "dispatched",
        "dispatcher",
        "identity",
        "kind",
        "loop",
        "next_seq",
        "parallel_batch_id",
        "pending",
        "requirements",
        "unconfirmed_start",
        "waiting",
    )

    def __init__(
        self,
        identity: RunIdentity,
        kind: RunKind,
        dispatcher: Dispatcher,
        *,
        deadline: float | None,
        next_seq: int,
        parallel_batch_id: str | None = None,
        deadlines: Deadlines | None = None,
        started: asyncio.Future[None] | None = None,
    ) -> None:
        self.identity = identity
        # The calls' watchdogs; the engine shares one per event loop across runs, made
        # on the running loop (its loop saves a system call: `app.foundation.waiting`).
        if deadlines is None:
            deadlines = Deadlines(asyncio.get_running_loop())
        self.loop = deadlines.loop
        self.deadlines = deadlines
        self.kind = kind
        self.dispatcher = dispatcher
        self.deadline = deadline
        self.next_seq = next_seq
        self.parallel_batch_id = parallel_batch_id
        self.pending: list[asyncio.Future[None]] = [] if started is None else [started]
        self.unconfirmed_start = started
        self.dispatched: list[Receipt] = []
        self.requirements = RunRequirements()
        # Decisions on calls that require a confirmation, and the calls stopped at
        # the gate for want of one (`app.engine.confirmation`).
        self.decisions: dict[CallPlace, ConfirmationDecision] = {}
        self.waiting: list[WaitingCall] = []

    def allocate_seq(self) -> int:
        seq = self.next_seq
        self.next_seq = seq + 1
        return seq

    async def start_recorded(self) -> bool:
        """Wait until the run's start is durable (`started`); False if it failed."""
        started = self.unconfirmed_start
        if started is None:
            return True
        if not started.done():
            # Waited on, never cancelled: the future is shared by the sink's transaction.
            await wait_all((started,))
        if started.cancelled() or started.exception() is not None:
            return False
        self.unconfirmed_start = None
        return True

    async def flush(self) -> None:
        """Wait until every receipt submitted so far is durable; raise the first write error."""
        pending, self.pending = self.pending, []
        if not pending:
            return
        if not all(future.done() for future in pending):
            # Not gather: a cancelled flush must not cancel the sink's futures.
            await wait_all(pending)
        for future in pending:
            if future.cancelled():
                raise ReceiptWriteFailed("a receipt write was cancelled")
            error = future.exception()
            if error is not None:
                what = "the run's start" if future is self.unconfirmed_start else "a receipt"
                raise ReceiptWriteFailed(f"{what} could not be stored: {error}") from error
