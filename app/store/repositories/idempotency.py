from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update

from app.store.models import IdempotencyKey
from app.store.repositories.base import Repository, rowcount
from app.store.types import utc_now

IN_PROGRESS = "in_progress"
COMPLETED = "completed"


class IdempotencyRepository(Repository):
    async def get(self, caller: str, key: str) -> IdempotencyKey | None:
        statement = (
            select(IdempotencyKey)
            .where(IdempotencyKey.caller == caller, IdempotencyKey.key == key)
            .execution_options(populate_existing=True)
        )
        return (await self.session.scalars(statement)).one_or_none()

    async def insert(
        self,
        *,
        caller: str,
        key: str,
        request_digest: str,
        expires_at: datetime,
        run_id: str | None = None,
        now: datetime | None = None,
    ) -> bool:
        """Claim the key as `in_progress`; False when it is already held.

        The primary key decides a race: of two concurrent claims, one inserts
        and the other gets False. An expired key is reclaimed in place.
        """
        now = now or utc_now()
        statement = self.dialect_insert(IdempotencyKey).values(
            caller=caller,
            key=key,
            request_digest=request_digest,
            state=IN_PROGRESS,
            response_status=None,
            response_body=None,
            run_id=run_id,
            created_at=now,
            expires_at=expires_at,
        )
        excluded = statement.excluded
        claim = statement.on_conflict_do_update(
            index_elements=[IdempotencyKey.caller, IdempotencyKey.key],
            set_={
                "request_digest": excluded.request_digest,
                "state": excluded.state,
                "response_status": excluded.response_status,
                "response_body": excluded.response_body,
                "run_id": excluded.run_id,
                "created_at": excluded.created_at,
                "expires_at": excluded.expires_at,
            },
            where=IdempotencyKey.expires_at <= now,
        ).returning(IdempotencyKey.key)
        result = await self.session.execute(claim)
        return result.first() is not None

    async def complete(
        self,
        caller: str,
        key: str,
        *,
        response_status: int,
        response_body: Any,
        run_id: str | None = None,
    ) -> bool:
        values: dict[str, Any] = {
            "state": COMPLETED,
            "response_status": response_status,
            "response_body": response_body,
        }
        if run_id is not None:
            values["run_id"] = run_id
        result = await self.session.execute(
            update(IdempotencyKey)
            .where(IdempotencyKey.caller == caller, IdempotencyKey.key == key)
            .values(values)
        )
        return rowcount(result) == 1

    async def release(self, caller: str, key: str) -> bool:
        """Forget the key, e.g. when the request failed before anything ran."""
        result = await self.session.execute(
            delete(IdempotencyKey).where(IdempotencyKey.caller == caller, IdempotencyKey.key == key)
        )
        return rowcount(result) == 1

    async def delete_expired(self, now: datetime) -> int:
        result = await self.session.execute(
            delete(IdempotencyKey)
            .where(IdempotencyKey.expires_at <= now)
            .execution_options(synchronize_session=False)
        )
        return rowcount(result)
