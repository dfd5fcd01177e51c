"""Confirmations of every kind of run: listing them, and finding those that expire."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Select, select

from app.store.models import Confirmation, Run
from app.store.repositories.base import Repository
from app.store.repositories.pagination import Keyset, Page, newest_first, to_page

PENDING = "pending"


class ConfirmationRepository(Repository):
    async def list_page(
        self,
        *,
        limit: int,
        after: Keyset | None = None,
        status: str | None = None,
        caller: str | None = None,
    ) -> Page[tuple[Confirmation, Run]]:
        """Confirmations newest first with their run; `caller`: only that caller's runs."""
        statement: Select[Any] = select(Confirmation, Run).join(  # type: ignore[assignment]
            Run, Run.id == Confirmation.run_id
        )
        if status is not None:
            statement = statement.where(Confirmation.status == status)
        if caller is not None:
            statement = statement.where(Run.caller == caller)
        statement = newest_first(
            statement, Confirmation.created_at, Confirmation.id, limit=limit, after=after
        )
        rows = [(row[0], row[1]) for row in (await self.session.execute(statement)).all()]
        return to_page(rows, limit, lambda row: Keyset(row[0].created_at, row[0].id))

    async def pending_before(self, cutoff: datetime, limit: int) -> list[tuple[str, str]]:
        """(run id, confirmation id) of pending confirmations requested before `cutoff`,
        oldest first."""
        statement = (
            select(Confirmation.run_id, Confirmation.id)
            .where(Confirmation.status == PENDING, Confirmation.created_at < cutoff)
            .order_by(Confirmation.created_at, Confirmation.id)
            .limit(limit)
        )
        return [(row[0], row[1]) for row in (await self.session.execute(statement)).all()]
