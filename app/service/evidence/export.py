"""Audit bundles: a run's chain, or those of the runs created in a window, with the
checkpoints from the first that covers one of them to the latest
(`app.foundation.audit_bundle` has the format).

A window also takes the audit rows of no run (chained per UTC day) of every
whole day it touches, so that each day's chain is complete.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.foundation import audit_bundle
from app.foundation.chain_check import chain_of_row
from app.service.errors import RunNotFound, StorageUnavailable
from app.service.evidence.stored import stored_rows
from app.store.repositories.chain import ChainRepository
from app.store.repositories.runs import RunRepository

logger = logging.getLogger("toolloop.evidence")

# Runs whose rows are read and written out together.
_RUNS_PER_STEP = 50
_DAY = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class RunSelection:
    run_id: str


@dataclass(frozen=True, slots=True)
class WindowSelection:
    """Runs created at or after `since` and before `until` (None: now)."""

    since: datetime
    until: datetime | None


Selection = RunSelection | WindowSelection


@dataclass(frozen=True, slots=True)
class ExportService:
    sessions: async_sessionmaker[AsyncSession]

    async def bundle(self, selection: Selection) -> AsyncIterator[bytes]:
        """The bundle's lines; raises `RunNotFound` for an unknown run and
        `StorageUnavailable` when the store cannot be read."""
        try:
            async with self.sessions() as session:
                async for line in _lines(ChainRepository(session), session, selection):
                    yield line
        except SQLAlchemyError as exc:
            logger.error("a read of the chain failed: %s", exc)
            raise StorageUnavailable("The store could not be read; retry shortly.") from exc


async def _lines(
    chain_rows: ChainRepository, session: AsyncSession, selection: Selection
) -> AsyncIterator[bytes]:
    now = datetime.now(UTC)
    if isinstance(selection, RunSelection):
        if await RunRepository(session).get(selection.run_id) is None:
            raise RunNotFound(selection.run_id)
        run_ids: list[str] = [selection.run_id]
        runless: list[dict[str, Any]] = []
        described: dict[str, Any] = {"run_id": selection.run_id}
    else:
        run_ids = await chain_rows.run_ids_created(selection.since, selection.until)
        first_day, end_day = _whole_days(selection.since, selection.until or now)
        runless = stored_rows(await chain_rows.runless_audit_rows(first_day, end_day))
        described = {"since": _text(selection.since), "until": _text(selection.until)}
    checkpoints = await _checkpoints(chain_rows, run_ids)
    days = sorted({chain_of_row(row) for row in runless})
    signed = [c["key_id"] for c in checkpoints if c.get("signature") is not None]
    yield audit_bundle.line(
        audit_bundle.header(
            created_at=_text(now) or "",
            selection=described,
            chains=[*run_ids, *days],
            key_id=signed[-1] if signed else None,
        )
    )
    count = 1
    for start in range(0, len(run_ids), _RUNS_PER_STEP):
        step = run_ids[start : start + _RUNS_PER_STEP]
        for row in stored_rows(await chain_rows.receipts_of(step)):
            yield audit_bundle.row_line(audit_bundle.RECEIPT_LINE, row)
            count += 1
        for row in stored_rows(await chain_rows.audit_rows_of(step)):
            yield audit_bundle.row_line(audit_bundle.AUDIT_LINE, row)
            count += 1
    for row in runless:
        yield audit_bundle.row_line(audit_bundle.AUDIT_LINE, row)
        count += 1
    for checkpoint in checkpoints:
        yield audit_bundle.row_line(audit_bundle.CHECKPOINT_LINE, checkpoint)
        count += 1
    yield audit_bundle.end_line(count)


async def _checkpoints(chain_rows: ChainRepository, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    created = await chain_rows.run_created_at(run_ids)
    if created is None:
        return []
    first = await chain_rows.first_checkpoint_covering(run_ids, created)
    return [] if first is None else stored_rows(await chain_rows.checkpoints_from(first))


def _whole_days(since: datetime, until: datetime) -> tuple[datetime, datetime]:
    """[the start of `since`'s UTC day, the end of the UTC day before `until`'s end)."""
    first = datetime.combine(since.astimezone(UTC).date(), time(), tzinfo=UTC)
    last = datetime.combine(until.astimezone(UTC).date(), time(), tzinfo=UTC)
    return first, last if last == until else last + _DAY


def _text(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
