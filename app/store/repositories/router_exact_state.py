"""The exact state a router run on the Temporal executor keeps out of Temporal's history:
its conversation between stretches, and the non-idempotent calls its stretches started."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import delete, select

from app.store.models import RouterExactState
from app.store.repositories.base import Repository
from app.store.types import utc_now


class RouterExactStateRepository(Repository):
    async def keep_conversation(
        self, run_id: str, conversation: Sequence[Mapping[str, Any]]
    ) -> None:
        row = await self._row(run_id)
        row.conversation = [dict(message) for message in conversation]
        row.updated_at = utc_now()
        await self.session.flush()

    async def conversation(self, run_id: str) -> list[dict[str, Any]] | None:
        row = await self.session.get(RouterExactState, run_id)
        return None if row is None else row.conversation

    async def add_started_call(self, run_id: str, call: Mapping[str, Any]) -> None:
        """Keep a call about to start (committed before it starts)."""
        row = await self._row(run_id)
        row.started_calls = [*row.started_calls, dict(call)]
        row.updated_at = utc_now()
        await self.session.flush()

    async def started_calls(self, run_id: str) -> list[dict[str, Any]]:
        row = await self.session.get(RouterExactState, run_id)
        return [] if row is None else list(row.started_calls)

    async def forget(self, run_id: str) -> None:
        await self.session.execute(
            delete(RouterExactState).where(RouterExactState.run_id == run_id)
        )

    async def _row(self, run_id: str) -> RouterExactState:
        """The run's row, created when missing, locked until the transaction ends (two
        calls of one turn that start together take turns)."""
        await self.session.execute(
            self.dialect_insert(RouterExactState)
            .values(run_id=run_id, conversation=None, started_calls=[], updated_at=utc_now())
            .on_conflict_do_nothing()
        )
        statement = (
            select(RouterExactState)
            .where(RouterExactState.run_id == run_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        return (await self.session.scalars(statement)).one()
