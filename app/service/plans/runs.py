"""A recorded plan run under the supervisor: run its calls, then record and report its end.

A run that ended by itself answers with the engine's outcome. A run stopped
part-way (cancelled, or interrupted by shutdown) answers from its stored
receipts, the redacted copies, in the same shape, with the run's status.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import replace
from datetime import datetime
from itertools import accumulate
from typing import Any, Generic, Protocol, TypedDict, TypeVar, Unpack

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.engine import (
    CallPlace,
    ConfirmationDecision,
    Engine,
    ParallelOutcome,
    ParallelPlan,
    Receipt,
    ReceiptWriteFailed,
    ResumePoint,
    RunIdentity,
    SequentialOutcome,
    SequentialPlan,
    Settled,
    WaitingCall,
)
from app.foundation.stored_output import stored_output
from app.observability.answer_trace_ids import with_current_trace_id
from app.observability.plans import record_plan_finished
from app.service.errors import StorageUnavailable
from app.service.idempotency import IdempotencyClaim, completion_row
from app.service.plans.pause import plan_checkpoint, record_plan_pause
from app.service.runs.records import (
    record_run_end,
    run_end,
    run_end_committed,
    run_start_committed,
    stored_receipts,
)
from app.service.runs.tasks import RunResult
from app.store.journal.writer import GroupCommitWriter
from app.store.models import Receipt as StoredReceipt

T = TypeVar("T")
Outcome = TypeVar("Outcome", SequentialOutcome, ParallelOutcome)
Plan = TypeVar("Plan", SequentialPlan, ParallelPlan)
Admitted = TypeVar("Admitted")

Args = Sequence[Mapping[str, Any]]
PENDING = "pending"
# What a paused plan keeps of its deadline at the least: its next stretch then ends
# its calls `deadline` at once, as a run out of time does.
MIN_DEADLINE_LEFT_S = 0.001


class PlanPorts(Protocol):
    """What a plan run runs and records with (`PlanService` holds them)."""

    @property
    def engine(self) -> Engine: ...

    @property
    def sessions(self) -> async_sessionmaker[AsyncSession]: ...

    @property
    def writer(self) -> GroupCommitWriter: ...

    @property
    def max_stored_output_bytes(self) -> int: ...


class RunOptions(TypedDict, total=False):
    started: asyncio.Future[None] | None
    claim: IdempotencyClaim | None
    decisions: Mapping[CallPlace, ConfirmationDecision] | None


class _PlanRun(Generic[Plan, Admitted, Outcome]):
    kind = ""

    def __init__(
        self,
        ports: PlanPorts,
        identity: RunIdentity,
        plan: Plan,
        admitted: Admitted,
        resume: ResumePoint | None = None,
        *,
        started: asyncio.Future[None] | None = None,
        claim: IdempotencyClaim | None = None,
        decisions: Mapping[CallPlace, ConfirmationDecision] | None = None,
    ) -> None:
        """`admitted`: the preflighted arguments (per call, or per lane and call);
        `resume`: where a resumed run goes on; `started`: the run's start while it is
        queued, not yet committed (`PlanService`); `claim`: the idempotency key the run
        was started under, answered with its end; `decisions`: on the calls a paused
        run waited on (`plans.continuation`)."""
        self._engine = ports.engine
        self._plan: Plan = plan
        self._admitted: Admitted = admitted
        self._resume = resume
        self._decisions = decisions
        self._started = started
        self._claim = claim
        self._key_answered = False
        self._sessions = ports.sessions
        self._writer = ports.writer
        self._identity = identity
        self._max_output_bytes = ports.max_stored_output_bytes
        # The natural end, queued in the transaction of the run's last receipts.
        self._queued_end: asyncio.Future[None] | None = None
        # The active time this stretch spent running the plan (`_timed`).
        self._spent_s = 0.0

    @property
    def run_id(self) -> str:
        return self._identity.run_id

    async def _timed(self, work: Awaitable[Settled[Outcome]]) -> Settled[Outcome]:
        """The engine's run of the plan (`work`), its active time kept for a pause."""
        began = time.monotonic()
        try:
            return await _settle(work)
        finally:
            self._spent_s = time.monotonic() - began

    def _plan_to_keep(self) -> Plan:
        """The plan as its pause keeps it: `deadline_s` is the active time left, so the
        wait for a person does not count and the next stretch does not start afresh."""
        deadline_s = self._plan.deadline_s
        if deadline_s is None:
            return self._plan
        left = max(deadline_s - self._spent_s, MIN_DEADLINE_LEFT_S)
        return replace(self._plan, deadline_s=left)

    async def _durable(self, settled: Settled[Outcome], call_count: int) -> Outcome:
        """Queue the natural end with the last receipts, then wait until they are
        durable: the engine returned before the writer took them."""
        outcome = settled.outcome
        try:
            self._queue_end(
                outcome.status, call_count, settled.receipts, lambda: self._redacted(outcome)
            )
        except BaseException:
            with suppress(Exception):
                await settled.durable()
            raise
        return await settled.durable()

    def _queue_end(
        self,
        status: str,
        call_count: int,
        pending: Sequence[asyncio.Future[None]],
        redacted: Callable[[], dict[str, Any]],
    ) -> None:
        """Once every call settled: the end joins the receipts' transaction when the
        writer can promise it (one commit fewer to wait for), else `_end` queues it.
        With it goes the run's idempotency key's final response (the stored copy,
        `redacted`), so that the two commit together. A run that waits for
        confirmations does not end: `_finished` pauses it."""
        if status == PENDING:
            return
        end = run_end(self.run_id, status=status, call_count=call_count)
        claim = self._claim
        answer = None
        if claim is not None and claim.answered is not None:
            # Stored now, before a traced run's answer gets its trace id: add it here too.
            answer = completion_row(claim, claim.answered(with_current_trace_id(redacted())))
        self._queued_end = self._writer.end_run_with(pending, end, answer)
        self._key_answered = answer is not None and self._queued_end is not None

    async def _finished(self, outcome: Outcome, call_count: int) -> RunResult:
        """Record the natural end, or the pause of a run that waits for confirmations;
        the run's result."""
        if outcome.waiting:
            if self._started is not None:
                await run_start_committed(self._started)
            await record_plan_pause(
                self._sessions,
                self._writer,
                self._engine.contract,
                run_id=self.run_id,
                caller=self._identity.caller,
                call_count=call_count,
                checkpoint=self._checkpoint(outcome.waiting),
                waiting=outcome.waiting,
            )
            return RunResult(
                self.run_id, PENDING, outcome.to_response(), lambda: self._redacted(outcome)
            )
        await self._finish(outcome.status, call_count)
        return RunResult(
            self.run_id,
            outcome.status,
            outcome.to_response(),
            lambda: self._redacted(outcome),
            key_answered=self._key_answered,
        )

    def _redacted(self, outcome: Outcome) -> dict[str, Any]:
        """The stored (redacted) copy of the run's result."""
        raise NotImplementedError

    def _checkpoint(self, waiting: Sequence[WaitingCall]) -> dict[str, Any]:
        """What the run keeps while `waiting` wait for decisions (`plans.pause`)."""
        raise NotImplementedError

    async def _finish(self, status: str, call_count: int) -> None:
        """Record the natural end (queued with the receipts, when it could be)."""
        queued = self._queued_end
        if queued is None:
            await self._end(status, call_count)
            return
        await run_end_committed(queued)
        record_plan_finished(self.kind, status)

    async def _end(self, status: str, call_count: int) -> None:
        await record_run_end(
            self._sessions, self.run_id, status=status, call_count=call_count, writer=self._writer
        )
        record_plan_finished(self.kind, status)

    async def _stored(self) -> list[StoredReceipt]:
        if self._started is not None:  # a stopped run never recorded is not reported
            await run_start_committed(self._started)
        return await stored_receipts(self._sessions, self.run_id)

    def _head(self, status: str) -> dict[str, Any]:
        return {
            "plan_id": self.run_id,
            "kind": self.kind,
            "status": status,
            "contract_hash": self._identity.contract_hash,
        }


class SequentialRun(_PlanRun[SequentialPlan, Args, SequentialOutcome]):
    kind = "sequential"
    _outcome: SequentialOutcome | None = None

    async def execute(self) -> None:
        settled = await self._timed(
            self._engine.settle_sequential(
                self._identity,
                self._plan,
                self._admitted,
                resume=self._resume,
                started=self._started,
                decisions=self._decisions,
            )
        )
        call_count = len(settled.outcome.receipts)
        self._outcome = await _settle(self._durable(settled, call_count))

    async def finish(self) -> RunResult:
        outcome = self._outcome
        assert outcome is not None
        return await self._finished(outcome, len(outcome.receipts))

    def _redacted(self, outcome: SequentialOutcome) -> dict[str, Any]:
        return _with_pending(
            {
                **self._head(outcome.status),
                "receipts": [
                    _redacted(receipt, self._max_output_bytes) for receipt in outcome.receipts
                ],
                "dispatched": [
                    _redacted(receipt, self._max_output_bytes) for receipt in outcome.dispatched
                ],
            },
            outcome.waiting,
        )

    def _checkpoint(self, waiting: Sequence[WaitingCall]) -> dict[str, Any]:
        return plan_checkpoint(self._plan_to_keep(), [self._admitted], waiting)

    async def stop(self, status: str) -> RunResult:
        rows = await self._stored()
        await self._end(status, planned_count(self._plan, rows))
        response = stored_sequential_answer(self._head(status), self._plan, rows)
        return RunResult(self.run_id, status, response, lambda: response)


class ParallelRun(_PlanRun[ParallelPlan, Sequence[Args], ParallelOutcome]):
    kind = "parallel"
    _outcome: ParallelOutcome | None = None

    def __init__(
        self,
        ports: PlanPorts,
        identity: RunIdentity,
        plan: ParallelPlan,
        admitted: Sequence[Args],
        parallel_batch_id: str,
        resume: ResumePoint | None = None,
        **options: Unpack[RunOptions],
    ) -> None:
        super().__init__(ports, identity, plan, admitted, resume, **options)
        self._batch_id = parallel_batch_id

    async def execute(self) -> None:
        settled = await self._timed(
            self._engine.settle_parallel(
                self._identity,
                self._plan,
                self._admitted,
                parallel_batch_id=self._batch_id,
                resume=self._resume,
                started=self._started,
                decisions=self._decisions,
            )
        )
        call_count = sum(len(lane.receipts) for lane in settled.outcome.lanes)
        self._outcome = await _settle(self._durable(settled, call_count))

    async def finish(self) -> RunResult:
        outcome = self._outcome
        assert outcome is not None
        return await self._finished(outcome, sum(len(lane.receipts) for lane in outcome.lanes))

    def _checkpoint(self, waiting: Sequence[WaitingCall]) -> dict[str, Any]:
        return plan_checkpoint(self._plan_to_keep(), self._admitted, waiting)

    def _redacted(self, outcome: ParallelOutcome) -> dict[str, Any]:
        return _with_pending(self._redacted_lanes(outcome), outcome.waiting)

    def _redacted_lanes(self, outcome: ParallelOutcome) -> dict[str, Any]:
        return {
            **self._head(outcome.status),
            "parallel_batch_id": self._batch_id,
            "lanes": [
                {
                    "item_key": lane.item_key,
                    "status": lane.status,
                    "receipts": [
                        _redacted(receipt, self._max_output_bytes) for receipt in lane.receipts
                    ],
                }
                for lane in outcome.lanes
            ],
            "dispatched": [
                _redacted(receipt, self._max_output_bytes) for receipt in outcome.dispatched
            ],
        }

    async def stop(self, status: str) -> RunResult:
        rows = await self._stored()
        await self._end(status, planned_count(self._plan, rows))
        response = stored_parallel_answer(self._head(status), self._plan, self._batch_id, rows)
        return RunResult(self.run_id, status, response, lambda: response)


def planned_count(plan: SequentialPlan | ParallelPlan, rows: Sequence[StoredReceipt]) -> int:
    """How many of `rows` are receipts of the plan's own calls (not dispatched ones)."""
    if isinstance(plan, SequentialPlan):
        planned = len(plan.calls)
    else:
        planned = sum(len(lane.calls) for lane in plan.lanes)
    return sum(1 for row in rows if row.seq < planned)


def stored_sequential_answer(
    head: dict[str, Any], plan: SequentialPlan, rows: Sequence[StoredReceipt]
) -> dict[str, Any]:
    """A sequential plan's answer from its stored (redacted) receipts, `rows` in seq order."""
    planned = len(plan.calls)
    return {
        **head,
        "receipts": [_from_store(row) for row in rows if row.seq < planned],
        "dispatched": [_from_store(row) for row in rows if row.seq >= planned],
    }


def stored_parallel_answer(
    head: dict[str, Any], plan: ParallelPlan, batch_id: str, rows: Sequence[StoredReceipt]
) -> dict[str, Any]:
    """A parallel plan's answer from its stored (redacted) receipts, `rows` in seq order."""
    by_seq = {row.seq: row for row in rows}
    lanes = plan.lanes
    first_seqs = [0, *accumulate(len(lane.calls) for lane in lanes)]
    views = []
    for lane, first in zip(lanes, first_seqs, strict=False):
        stored = [by_seq[s] for s in range(first, first + len(lane.calls)) if s in by_seq]
        complete = len(stored) == len(lane.calls)
        succeeded = complete and all(row.status == "succeeded" for row in stored)
        views.append(
            {
                "item_key": lane.item_key,
                "status": "succeeded" if succeeded else "failed",
                "receipts": [_from_store(row) for row in stored],
            }
        )
    planned = first_seqs[-1]
    return {
        **head,
        "parallel_batch_id": batch_id,
        "lanes": views,
        "dispatched": [_from_store(row) for row in rows if row.seq >= planned],
    }


def _with_pending(view: dict[str, Any], waiting: Sequence[WaitingCall]) -> dict[str, Any]:
    if waiting:
        view["pending"] = [call.public() for call in waiting]
    return view


async def _settle(work: Awaitable[T]) -> T:
    try:
        return await work
    except ReceiptWriteFailed as exc:
        raise StorageUnavailable(str(exc)) from exc


def _redacted(receipt: Receipt, max_output_bytes: int) -> dict[str, Any]:
    """The stored (redacted, size-capped) copy, in the response's shape."""
    stored = receipt.to_stored()
    view = {key: stored[key] for key in receipt.to_response()}
    view["output"] = stored_output(view["output"], max_output_bytes).value
    return view


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _from_store(row: StoredReceipt) -> dict[str, Any]:
    return {
        "receipt_id": row.id,
        "plan_id": row.run_id,
        "call_key": row.call_key,
        "item_key": row.item_key,
        "parallel_batch_id": row.parallel_batch_id,
        "tool": row.tool,
        "status": row.status,
        "output": row.output,
        "error": row.error,
        "attempts": row.attempts,
        "cache_hit": row.cache_hit,
        "cache_source_receipt_id": row.cache_source_receipt_id,
        "fingerprint": row.fingerprint,
        "idempotency_key": row.idempotency_key,
        "parent_receipt_id": row.parent_receipt_id,
        "control": row.control,
        "admission_wait_ms": row.admission_wait_ms,
        "started_at": row.started_at.isoformat(),
        "finished_at": _iso(row.finished_at),
        "duration_ms": row.duration_ms,
    }
