"""Paused router runs: their checkpoint, the calls waiting for confirmation, and the
compare-and-set moves of the run row between `running` and `pending`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update

from app.store.models import RouterCheckpoint, RouterConfirmation, Run
from app.store.repositories.base import Repository, rowcount
from app.store.types import utc_now

PENDING = "pending"
RUNNING = "running"


class RouterRunRepository(Repository):
    async def lock_run(self, run_id: str) -> Run | None:
        """The run row, locked until the transaction ends (PostgreSQL; SQLite locks on write)."""
        statement = select(Run).where(Run.id == run_id).with_for_update()
        return (await self.session.scalars(statement)).one_or_none()

    async def pause(
        self,
        run_id: str,
        *,
        outcome: dict[str, Any] | None,
        call_count: int,
        checkpoint: dict[str, Any],
        confirmations: Sequence[Mapping[str, Any]],
    ) -> None:
        """Move a running run to `pending`, with its checkpoint and its waiting calls
        (a router run's or a plan run's; a plan run keeps no outcome)."""
        await self.session.execute(
            update(Run)
            .where(Run.id == run_id)
            .values(status=PENDING, outcome=outcome, call_count=call_count, finished_at=None)
        )
        await self.session.execute(
            delete(RouterCheckpoint).where(RouterCheckpoint.run_id == run_id)
        )
        self.session.add(RouterCheckpoint(run_id=run_id, document=checkpoint, created_at=utc_now()))
        now = utc_now()
        for ordinal, row in enumerate(confirmations):
            self.session.add(
                RouterConfirmation(
                    run_id=run_id, ordinal=ordinal, status=PENDING, created_at=now, **row
                )
            )
        await self.session.flush()

    async def checkpoint(self, run_id: str) -> dict[str, Any] | None:
        row = await self.session.get(RouterCheckpoint, run_id)
        return None if row is None else row.document

    async def confirmations(self, run_id: str) -> list[RouterConfirmation]:
        statement = (
            select(RouterConfirmation)
            .where(RouterConfirmation.run_id == run_id)
            .order_by(RouterConfirmation.ordinal)
        )
        return list((await self.session.scalars(statement)).all())

    async def decide(
        self,
        confirmation_id: str,
        *,
        status: str,
        reason: str | None,
        decided_by: str | None,
        decided_at: datetime | None = None,
    ) -> bool:
        """Record a decision on a confirmation still pending; False if it was not."""
        result = await self.session.execute(
            update(RouterConfirmation)
            .where(RouterConfirmation.id == confirmation_id, RouterConfirmation.status == PENDING)
            .values(
                status=status,
                reason=reason,
                decided_by=decided_by,
                decided_at=decided_at or utc_now(),
            )
        )
        return rowcount(result) == 1

    async def count_pending(self, run_id: str) -> int:
        statement = select(func.count()).where(
            RouterConfirmation.run_id == run_id, RouterConfirmation.status == PENDING
        )
        return int((await self.session.execute(statement)).scalar_one())

    async def claim(self, run_id: str, instance_id: str) -> bool:
        """`pending` -> `running` on this instance; False when someone else moved it first."""
        result = await self.session.execute(
            update(Run)
            .where(Run.id == run_id, Run.status == PENDING)
            .values(status=RUNNING, instance_id=instance_id)
        )
        return rowcount(result) == 1

    async def release(self, run_id: str) -> None:
        """Forget a resumed (or closed) run's checkpoint and every kept argument."""
        await self.session.execute(
            delete(RouterCheckpoint).where(RouterCheckpoint.run_id == run_id)
        )
        await self.session.execute(
            update(RouterConfirmation).where(RouterConfirmation.run_id == run_id).values(args=None)
        )
