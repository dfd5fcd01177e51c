"""Reads of the hash chain: runs' rows with their chain columns, and the checkpoints.

Rows come back as stored, one mapping of column values per row (an audit row
not expanded into its events: the chain links stored rows), in chain order,
rows written before chaining (no `chain_seq`) last.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Table, select

from app.store.models import AuditEvent, ChainCheckpoint, Receipt, Run
from app.store.repositories.base import Repository

# A run's checkpoints are written when it ends or later; this much earlier than
# its creation still finds them whatever the writers' clocks say.
_CLOCK_MARGIN = timedelta(hours=1)
_CHECKPOINT_PAGE = 500
# Runs' rows are read a few runs at a time: an IN list of bounded length.
_RUNS_PER_READ = 200

Row = dict[str, Any]


class ChainRepository(Repository):
    async def receipts_of(self, run_ids: Collection[str]) -> list[Row]:
        return await self._rows_of(Receipt.__table__, run_ids)

    async def audit_rows_of(self, run_ids: Collection[str]) -> list[Row]:
        return await self._rows_of(AuditEvent.__table__, run_ids)

    async def _rows_of(self, table: Any, run_ids: Collection[str]) -> list[Row]:
        assert isinstance(table, Table)
        ordered = sorted(run_ids)
        rows: list[Row] = []
        for start in range(0, len(ordered), _RUNS_PER_READ):
            statement = (
                select(table)
                .where(table.c.run_id.in_(ordered[start : start + _RUNS_PER_READ]))
                .order_by(
                    table.c.run_id, table.c.chain_seq.is_(None), table.c.chain_seq, table.c.id
                )
            )
            result = await self.session.execute(statement)
            rows.extend(dict(row) for row in result.mappings())
        return rows

    async def runless_audit_rows(self, since: datetime, until: datetime) -> list[Row]:
        """The audit rows of no run written at or after `since` and before `until`."""
        statement = (
            select(AuditEvent.__table__)
            .where(
                AuditEvent.run_id.is_(None),
                AuditEvent.at >= since,
                AuditEvent.at < until,
            )
            .order_by(AuditEvent.id)
        )
        return [dict(row) for row in (await self.session.execute(statement)).mappings()]

    async def run_ids_created(self, since: datetime, until: datetime | None) -> list[str]:
        statement = select(Run.id).where(Run.created_at >= since)
        if until is not None:
            statement = statement.where(Run.created_at < until)
        statement = statement.order_by(Run.created_at, Run.id)
        return list((await self.session.scalars(statement)).all())

    async def first_checkpoint_covering(
        self, run_ids: Collection[str], created_since: datetime
    ) -> int | None:
        """The seq of the first checkpoint holding any of these runs, written at or after
        `created_since` (less a margin for clocks), or None if none holds one yet."""
        wanted = set(run_ids)
        after = -1
        while True:
            statement = (
                select(ChainCheckpoint.seq, ChainCheckpoint.runs)
                .where(
                    ChainCheckpoint.created_at >= created_since - _CLOCK_MARGIN,
                    ChainCheckpoint.seq > after,
                )
                .order_by(ChainCheckpoint.seq)
                .limit(_CHECKPOINT_PAGE)
            )
            page = (await self.session.execute(statement)).all()
            for seq, runs in page:
                if any(held.get("run_id") in wanted for held in runs):
                    return int(seq)
            if len(page) < _CHECKPOINT_PAGE:
                return None
            after = int(page[-1][0])

    async def checkpoints_from(self, seq: int) -> list[Row]:
        """The checkpoints from `seq` to the latest, in order."""
        table = ChainCheckpoint.__table__
        assert isinstance(table, Table)
        statement = select(table).where(table.c.seq >= seq).order_by(table.c.seq)
        return [dict(row) for row in (await self.session.execute(statement)).mappings()]

    async def run_created_at(self, run_ids: Sequence[str]) -> datetime | None:
        """The earliest creation time of these runs."""
        if not run_ids:
            return None
        found = [
            moment
            for start in range(0, len(run_ids), _RUNS_PER_READ)
            for moment in (
                await self.session.scalars(
                    select(Run.created_at).where(
                        Run.id.in_(run_ids[start : start + _RUNS_PER_READ])
                    )
                )
            ).all()
        ]
        return min(found, default=None)
