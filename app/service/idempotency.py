"""Idempotency keys: one outcome per (caller, key), however often a request is retried.

A key is claimed in the transaction that records the run it starts
(`claim_key`), so of concurrent duplicates exactly one opens a run; the others
find the key in progress (409) or completed (the stored response, replayed).
A request that ends before any run exists stores its response only when it was
the request's own fault (a preflight 422); a server error stores nothing, so a
retry proceeds. Stored bodies are redacted (invariant 8): a replay returns the
stored copy, not the first caller's.

A key stays in progress when the process running its run stopped before
storing the answer (a crash, or a failed write of the answer). Once the run is
no longer `running` and no live process holds its task (`AnsweringRuns`), a
retry learns that the answer will never come, and which run to read or resume,
instead of being told to retry until the key expires.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.foundation.canonical import canonical_json, sha256_digest
from app.foundation.redaction import Redactor
from app.service.commits import committed
from app.service.errors import (
    IdempotencyKeyInUse,
    IdempotencyKeyReused,
    IdempotencyKeyTaken,
    IdempotencyKeyUnanswered,
    StorageUnavailable,
)
from app.store.journal.outage import RETRY_WINDOW_S
from app.store.journal.writer import GroupCommitWriter
from app.store.models import IdempotencyKey
from app.store.repositories.idempotency import COMPLETED, IN_PROGRESS, IdempotencyRepository
from app.store.repositories.instances import InstanceRepository
from app.store.repositories.runs import RUNNING, RunRepository

logger = logging.getLogger("toolloop.idempotency")

# The key scope of open mode (no API keys); not a valid key name, so never shared with one.
OPEN_MODE_CALLER = "(open)"


# How long after its run's end a live process may still store the key's answer:
# the end and the answer may be written apart, each retried through an outage
# for up to `RETRY_WINDOW_S`.
ANSWER_WITHIN_S = 2 * RETRY_WINDOW_S


@dataclass(frozen=True, slots=True)
class AnsweringRuns:
    """Whether a run whose key is still in progress can yet store the key's answer.

    A run stores its key's answer with its end or, in its task, right after it, so
    the answer can only still come while the run is `running` or while a live
    process holds its task: this one (`active_here`), or another whose heartbeat
    is fresh (its task may be storing the answer now), for `answer_within_s`
    after the run's end at most: past that, the answer's write failed for good
    and that process will not store it. A process that stopped cleanly removed
    its row after its runs' tasks ended.
    """

    instance_id: str
    stale_after_s: float
    active_here: Callable[[str], bool]
    answer_within_s: float = ANSWER_WITHIN_S

    async def stopped_status(self, session: AsyncSession, run_id: str) -> str | None:
        """The run's status when its key's answer can no longer come; else None
        (also for a run that is not stored: the key and its run commit together)."""
        run = await RunRepository(session).get(run_id)
        if run is None or run.status == RUNNING:
            return None
        if run.instance_id == self.instance_id:
            return None if self.active_here(run_id) else run.status
        now = datetime.now(UTC)
        instance = await InstanceRepository(session).get(run.instance_id)
        alive = instance is not None and instance.heartbeat_at >= now - timedelta(
            seconds=self.stale_after_s
        )
        ended = run.finished_at
        if alive and (ended is None or ended >= now - timedelta(seconds=self.answer_within_s)):
            return None
        return run.status


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """An HTTP response as kept for replays; `body` is JSON."""

    status: int
    headers: Mapping[str, str]
    body: Any

    def to_document(self) -> dict[str, Any]:
        return {"headers": dict(self.headers), "body": self.body}

    @classmethod
    def from_row(cls, row: IdempotencyKey) -> StoredResponse:
        document = row.response_body or {}
        return cls(
            status=row.response_status or 500,
            headers=dict(document.get("headers") or {}),
            body=document.get("body"),
        )


@dataclass(frozen=True, slots=True)
class IdempotencyClaim:
    """What a request claims: its key, in its caller's scope, for this exact request.

    `accepted`, when set, is the response known as soon as the run is recorded
    (a 202): it is stored in the same transaction, so the key never stays in
    progress for a run that goes on in the background.
    """

    caller: str
    key: str
    request_digest: str
    expires_at: datetime
    accepted: Callable[[str], StoredResponse] | None = field(default=None, compare=False)
    # The response to store for a run's stored (redacted) result, when a run that
    # ends by itself stores it with its end (`app.service.plans.runs`).
    answered: Callable[[Any], StoredResponse] | None = field(default=None, compare=False)


def request_digest(method: str, path: str, mode: str, body: Any) -> str:
    """Same method, path, response mode and JSON body (in any key order): same digest."""
    return sha256_digest(canonical_json([method.upper(), path, mode, body]))


def claim_row(claim: IdempotencyClaim, run_id: str) -> dict[str, Any]:
    """The key's row as `claim_key` stores it, claimed now for `run_id`: in progress,
    or completed already with the response known as soon as the run is recorded."""
    now = datetime.now(UTC)
    row: dict[str, Any] = {
        "caller": claim.caller,
        "key": claim.key,
        "request_digest": claim.request_digest,
        "state": IN_PROGRESS,
        "response_status": None,
        "response_body": None,
        "run_id": run_id,
        "created_at": now,
        "expires_at": claim.expires_at,
    }
    if claim.accepted is not None:
        row.update(completion_row(claim, claim.accepted(run_id), run_id))
    return row


def completion_row(
    claim: IdempotencyClaim, response: StoredResponse, run_id: str | None = None
) -> dict[str, Any]:
    """The key's final response as stored (redacted: invariant 8), for
    `GroupCommitWriter.complete_key`; a None `run_id` keeps the stored one."""
    redacted = StoredResponse(
        response.status, response.headers, Redactor.default().redact(response.body)
    )
    return {
        "caller": claim.caller,
        "key": claim.key,
        "state": COMPLETED,
        "response_status": redacted.status,
        "response_body": redacted.to_document(),
        "run_id": run_id,
    }


async def claim_key(session: AsyncSession, claim: IdempotencyClaim, run_id: str) -> None:
    """Claim the key for `run_id` inside the caller's transaction; roll it back on error."""
    keys = IdempotencyRepository(session)
    claimed = await keys.insert(
        caller=claim.caller,
        key=claim.key,
        request_digest=claim.request_digest,
        expires_at=claim.expires_at,
        run_id=run_id,
    )
    if not claimed:
        raise IdempotencyKeyTaken(claim.key)
    if claim.accepted is not None:
        await _complete(keys, claim, claim.accepted(run_id), run_id)


async def _complete(
    keys: IdempotencyRepository,
    claim: IdempotencyClaim,
    response: StoredResponse,
    run_id: str | None = None,
) -> None:
    row = completion_row(claim, response, run_id)
    await keys.complete(
        claim.caller,
        claim.key,
        response_status=row["response_status"],
        response_body=row["response_body"],
        run_id=run_id,
    )


async def _as_the_run_is_now(
    session: AsyncSession, accepted: StoredResponse, run_id: str
) -> StoredResponse:
    """The stored 202 of a background run (`{"run_id", "status": "running"}`), with the
    run's status as stored now and, once it ended, its `call_count`: the 202 is stored
    when the run starts, and a retry (after a crash, say) must not read `running` for a
    run that ended."""
    run = await RunRepository(session).get(run_id)
    if run is None or not isinstance(accepted.body, dict):
        return accepted
    body = {**accepted.body, "status": run.status}
    if run.status != RUNNING:
        body["call_count"] = run.call_count
    return StoredResponse(accepted.status, accepted.headers, body)


@dataclass(frozen=True, slots=True)
class IdempotencyService:
    """`writer`: given, a claimed key's final response is stored in a group commit.
    `answering`: given, a key whose run can no longer answer it is told apart from
    one in progress (`IdempotencyKeyUnanswered`)."""

    sessions: async_sessionmaker[AsyncSession]
    ttl_s: float
    writer: GroupCommitWriter | None = None
    answering: AnsweringRuns | None = None

    def claim(
        self,
        caller: str | None,
        key: str,
        digest: str,
        accepted: Callable[[str], StoredResponse] | None = None,
        answered: Callable[[Any], StoredResponse] | None = None,
    ) -> IdempotencyClaim:
        return IdempotencyClaim(
            caller=OPEN_MODE_CALLER if caller is None else caller,
            key=key,
            request_digest=digest,
            expires_at=datetime.now(UTC) + timedelta(seconds=self.ttl_s),
            accepted=accepted,
            answered=answered,
        )

    async def lookup(self, claim: IdempotencyClaim) -> StoredResponse | None:
        """The stored response, or None when the key is free (never used, or expired).

        Raises IdempotencyKeyReused, IdempotencyKeyInUse or IdempotencyKeyUnanswered.
        """
        try:
            async with self.sessions() as session:
                row = await IdempotencyRepository(session).get(claim.caller, claim.key)
                if row is None or row.expires_at <= datetime.now(UTC):
                    return None
                if row.request_digest != claim.request_digest:
                    raise IdempotencyKeyReused(claim.key)
                if row.state != COMPLETED:
                    await self._raise_unanswered(session, row.run_id)
                    raise IdempotencyKeyInUse(row.run_id)
                stored = StoredResponse.from_row(row)
                if claim.accepted is not None and row.run_id is not None:
                    stored = await _as_the_run_is_now(session, stored, row.run_id)
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"the idempotency key could not be read: {exc}") from exc
        return stored

    async def _raise_unanswered(self, session: AsyncSession, run_id: str | None) -> None:
        if self.answering is None or run_id is None:
            return
        status = await self.answering.stopped_status(session, run_id)
        if status is not None:
            raise IdempotencyKeyUnanswered(run_id, status)

    async def record(self, claim: IdempotencyClaim, response: StoredResponse) -> bool:
        """Store the response of a request that started no run; False if the key is taken."""
        try:
            async with self.sessions.begin() as session:
                keys = IdempotencyRepository(session)
                claimed = await keys.insert(
                    caller=claim.caller,
                    key=claim.key,
                    request_digest=claim.request_digest,
                    expires_at=claim.expires_at,
                )
                if claimed:
                    await _complete(keys, claim, response)
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"the idempotency key could not be stored: {exc}") from exc
        return claimed

    async def complete(self, claim: IdempotencyClaim, response: StoredResponse) -> None:
        """Store the final response of a claimed key."""
        failure = "the idempotency key could not be stored"
        if self.writer is not None:
            await committed(self.writer.complete_key(completion_row(claim, response)), failure)
            return
        try:
            async with self.sessions.begin() as session:
                await _complete(IdempotencyRepository(session), claim, response)
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"{failure}: {exc}") from exc

    async def purge_expired(self) -> int:
        async with self.sessions.begin() as session:
            return await IdempotencyRepository(session).delete_expired(datetime.now(UTC))

    async def purge_forever(self, interval_s: float) -> None:
        """Delete expired keys every `interval_s`; each pass removes one interval's worth."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                count = await self.purge_expired()
            except SQLAlchemyError as exc:
                logger.warning("purging expired idempotency keys failed: %s", exc)
                continue
            if count:
                logger.info("purged %d expired idempotency key(s)", count)
