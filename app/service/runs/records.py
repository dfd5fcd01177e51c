"""The run row's start and end, shared by every use-case that starts a run."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.foundation.waiting import wait_first
from app.observability.trace_context import current_trace_id
from app.service.commits import committed
from app.service.errors import IdempotencyKeyTaken, StorageUnavailable
from app.service.idempotency import IdempotencyClaim, claim_key, claim_row
from app.store.journal.outage import retry_transient
from app.store.journal.writer import GroupCommitWriter
from app.store.models import Receipt as StoredReceipt
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.runs import RUNNING, RunRepository


async def record_run_start(
    sessions: async_sessionmaker[AsyncSession],
    *,
    run_id: str,
    kind: str,
    owner: str,
    contract_hash: str,
    instance_id: str,
    caller: str | None,
    parallel_batch_id: str | None = None,
    claim: IdempotencyClaim | None = None,
    request_digest: str | None = None,
    writer: GroupCommitWriter | None = None,
    committed_first: bool = True,
    context: Mapping[str, Any] | None = None,
) -> asyncio.Future[None] | None:
    """Commit the `running` row, and claim the idempotency key in the same transaction.

    `request_digest` identifies the request for a later resume (the body is never stored).
    `context`: the plan's context as it may be stored (redacted: `app.service.plans.context`).
    Given a `writer`, the start (and its claim) shares a group commit with other rows.

    Committed before the first call runs, so a crash leaves a trace; returns None.
    Raises IdempotencyKeyTaken (nothing recorded) when a duplicate claimed the key
    first. With `committed_first=False`, a start through the `writer` without a claim
    is only queued: returns its future at once (`queue_run_start`).
    """
    row = run_start_row(
        run_id=run_id,
        kind=kind,
        owner=owner,
        contract_hash=contract_hash,
        instance_id=instance_id,
        caller=caller,
        parallel_batch_id=parallel_batch_id,
        request_digest=request_digest,
        context=context,
    )
    if writer is not None:
        if claim is not None:
            await _claimed(writer, claim, row)
        elif committed_first:
            await _started(writer, row)
        else:
            return queue_run_start(writer, row)
        return None
    try:
        async with sessions.begin() as session:
            if claim is not None:
                await claim_key(session, claim, run_id)
            await RunRepository(session).add_many([row])
    except SQLAlchemyError as exc:
        raise StorageUnavailable(f"the run could not be recorded: {exc}") from exc
    return None


def queue_run_start(writer: GroupCommitWriter, row: dict[str, Any]) -> asyncio.Future[None]:
    """Queue the run's start (`run_start_row`) and return at once: the future it
    shares with its transaction (never cancel it). A run that goes on before it
    resolves gives it to the engine (`started`), so that no call with effects
    starts first. Raises StorageUnavailable while the database is known to be away."""
    if writer.in_outage:
        raise StorageUnavailable("the run could not be recorded: the database is unavailable")
    return writer.start_run(row)


def run_start_row(
    *,
    run_id: str,
    kind: str,
    owner: str,
    contract_hash: str,
    instance_id: str,
    caller: str | None,
    parallel_batch_id: str | None,
    request_digest: str | None,
    context: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A `running` run row for `GroupCommitWriter.start_run`, started now."""
    now = datetime.now(UTC)
    return {
        "context": None if context is None else dict(context),
        "id": run_id,
        "kind": kind,
        "owner": owner,
        "status": RUNNING,
        "caller": caller,
        "contract_hash": contract_hash,
        "parallel_batch_id": parallel_batch_id,
        "request_digest": request_digest,
        "trace_id": current_trace_id(),
        "instance_id": instance_id,
        "outcome": None,
        "call_count": 0,
        "created_at": now,
        "started_at": now,
        "finished_at": None,
    }


async def record_run_end(
    sessions: async_sessionmaker[AsyncSession],
    run_id: str,
    *,
    status: str,
    call_count: int | None = None,
    outcome: dict[str, Any] | None = None,
    writer: GroupCommitWriter | None = None,
) -> None:
    """Record the run's end; given a `writer`, in a group commit after its receipts."""
    if writer is not None:
        end = run_end(run_id, status=status, call_count=call_count, outcome=outcome)
        await run_end_committed(writer.end_run(end))
        return
    finished_at = datetime.now(UTC)

    async def write() -> None:
        async with sessions.begin() as session:
            await RunRepository(session).finish(
                run_id,
                status=status,
                outcome=outcome,
                call_count=call_count,
                finished_at=finished_at,
            )

    try:
        # A run left `running` by a short outage would stay so while this process lives.
        await retry_transient(write, "recording a run's end")
    except SQLAlchemyError as exc:
        raise StorageUnavailable(f"the run's end could not be recorded: {exc}") from exc


def run_end(
    run_id: str, *, status: str, call_count: int | None, outcome: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A run's end for `GroupCommitWriter.end_run`, finished now."""
    return {
        "run_id": run_id,
        "status": status,
        "outcome": outcome,
        "call_count": call_count,
        "finished_at": datetime.now(UTC),
    }


async def run_start_committed(durable: asyncio.Future[None]) -> None:
    """Wait for a queued run start (`queue_run_start`) to commit; StorageUnavailable if
    it failed."""
    await committed(durable, "the run could not be recorded")


async def run_end_committed(durable: asyncio.Future[None]) -> None:
    """Wait for a queued run end (`run_end`) to commit; StorageUnavailable if it failed."""
    await committed(durable, "the run's end could not be recorded")


NOT_RUN = (
    "not run: the database became unavailable while the run's start was being "
    "recorded, and the request was answered 503"
)


async def _started(writer: GroupCommitWriter, row: dict[str, Any]) -> None:
    """Wait for the run's start to commit, or answer 503 as soon as the database is seen
    to be away: a short outage is retried by the writer for up to 30 s, too long to hold
    a request whose plan has not started. A start committed after that answer is ended
    at once as `failed` (nothing ran), so it never stays `running`."""
    failure = "the run could not be recorded"
    if writer.in_outage:
        raise StorageUnavailable(f"{failure}: the database is unavailable")
    durable = writer.start_run(row)
    if not durable.done():
        await wait_first((durable, writer.outage()))
    if not durable.done():
        writer.end_once_started(durable, _not_run(row["id"]))
        raise StorageUnavailable(f"{failure}: the database is unavailable")
    await committed(durable, failure)


async def _claimed(writer: GroupCommitWriter, claim: IdempotencyClaim, row: dict[str, Any]) -> None:
    """`_started` for a start under an idempotency key: the key's claim and the run
    commit together, or neither when the key is held (IdempotencyKeyTaken). A start
    committed after a 503 is ended `failed` and its key freed, as the 503 promised
    (a server error keeps no key)."""
    failure = "the run could not be recorded"
    if writer.in_outage:
        raise StorageUnavailable(f"{failure}: the database is unavailable")
    claimed = writer.claim_run(claim_row(claim, row["id"]), row)
    if not claimed.done():
        await wait_first((claimed, writer.outage()))
    if not claimed.done():
        writer.end_once_started(claimed, _not_run(row["id"]))
        writer.release_once_claimed(claimed, claim.caller, claim.key, row["id"])
        raise StorageUnavailable(f"{failure}: the database is unavailable")
    if not await committed(claimed, failure):
        raise IdempotencyKeyTaken(claim.key)


def _not_run(run_id: str) -> dict[str, Any]:
    """The end of a run whose start committed after its request was answered 503."""
    return {
        "run_id": run_id,
        "status": "failed",
        "outcome": {"error": NOT_RUN},
        "call_count": 0,
        "finished_at": datetime.now(UTC),
    }


async def stored_receipts(
    sessions: async_sessionmaker[AsyncSession], run_id: str
) -> list[StoredReceipt]:
    """Every stored receipt of the run, in `seq` order."""
    try:
        async with sessions() as session:
            return await ReceiptRepository(session).list_for_run(run_id)
    except SQLAlchemyError as exc:
        raise StorageUnavailable(f"the run's receipts could not be read: {exc}") from exc


async def stored_receipts_at(
    sessions: async_sessionmaker[AsyncSession], run_id: str, seqs: Collection[int]
) -> list[StoredReceipt]:
    """The run's stored receipts at these `seq` numbers (an indexed read), in `seq` order."""
    try:
        async with sessions() as session:
            return await ReceiptRepository(session).list_at(run_id, seqs)
    except SQLAlchemyError as exc:
        raise StorageUnavailable(f"the run's receipts could not be read: {exc}") from exc


async def stored_seqs_below(
    sessions: async_sessionmaker[AsyncSession], run_id: str, seq: int
) -> set[int]:
    """The `seq` numbers of the run's stored receipts below `seq` (its plan's own calls)."""
    try:
        async with sessions() as session:
            return await ReceiptRepository(session).seqs_below(run_id, seq)
    except SQLAlchemyError as exc:
        raise StorageUnavailable(f"the run's receipts could not be read: {exc}") from exc


async def stored_receipts_below(
    sessions: async_sessionmaker[AsyncSession], run_id: str, seq: int
) -> int:
    """How many receipts the run has stored below `seq` (its plan's own calls)."""
    try:
        async with sessions() as session:
            return await ReceiptRepository(session).count_below(run_id, seq)
    except SQLAlchemyError as exc:
        raise StorageUnavailable(f"the run's receipts could not be counted: {exc}") from exc
