"""Reading the usage ledger: sums per time bucket, owner, caller and profile.

A key without `runs:read:all` sees only the usage of the runs it created.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.foundation.money import shown
from app.service.errors import StorageUnavailable
from app.service.runs.reads import Listing, RunViewer
from app.store.repositories.usage import (
    Bucket,
    UsageFilters,
    UsagePosition,
    UsageRepository,
    UsageSum,
)

__all__ = ["UsageFilters", "UsagePosition", "UsageReads", "usage_view"]

logger = logging.getLogger("toolloop.reads")


@dataclass(frozen=True, slots=True)
class UsageReads:
    sessions: async_sessionmaker[AsyncSession]

    async def list_usage(
        self,
        bucket: Bucket,
        filters: UsageFilters,
        viewer: RunViewer,
        *,
        limit: int,
        after: UsagePosition | None,
    ) -> Listing[UsagePosition]:
        visible = viewer.visible_run_creator
        if visible is not None:
            if filters.caller not in (None, visible):
                return Listing(items=[], next=None)
            filters = replace(filters, caller=visible)
        try:
            async with self.sessions() as session:
                sums, following = await UsageRepository(session).sums(
                    bucket, filters, limit=limit, after=after
                )
        except SQLAlchemyError as exc:
            logger.error("a read from the store failed: %s", exc)
            raise StorageUnavailable("The store could not be read; retry shortly.") from exc
        return Listing(items=[usage_view(bucket, row) for row in sums], next=following)


def usage_view(bucket: Bucket, row: UsageSum) -> dict[str, Any]:
    return {
        "bucket": bucket,
        "start": row.bucket.isoformat(),
        "owner": row.owner,
        "caller": row.caller or None,
        "profile": row.profile,
        "requests": row.requests,
        "input_tokens": row.input_tokens,
        "output_tokens": row.output_tokens,
        "cost": None if row.cost_nanos is None else shown(row.cost_nanos),
    }
