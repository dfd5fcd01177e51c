from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import insert, select

from app.store.models import AuditEvent
from app.store.repositories.base import Repository
from app.store.repositories.bulk import insert_rows


class AuditRepository(Repository):
    async def add_many(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Append events in one executemany; keys are `AuditEvent` column names."""
        if rows:
            await self.session.execute(insert(AuditEvent), list(rows))

    async def add_bulk(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Append events as `add_many` does, through the driver's bulk path
        (`app.store.repositories.bulk`); ids are assigned in row order."""
        await insert_rows(self.session, AuditEvent, rows)

    async def list_for_run(
        self, run_id: str, *, after_id: int | None = None, limit: int | None = None
    ) -> list[AuditEvent]:
        """The run's events in the order they were written."""
        statement = select(AuditEvent).where(AuditEvent.run_id == run_id)
        if after_id is not None:
            statement = statement.where(AuditEvent.id > after_id)
        statement = statement.order_by(AuditEvent.id).limit(limit)
        return list((await self.session.scalars(statement)).all())
