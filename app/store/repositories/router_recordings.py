"""Router recordings: a run's request and model replies, appended stretch by stretch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.store.models import RouterRecording
from app.store.repositories.base import Repository
from app.store.types import utc_now


class RouterRecordingRepository(Repository):
    async def append(
        self, run_id: str, request: Mapping[str, Any], replies: Sequence[Mapping[str, Any]]
    ) -> None:
        """Keep a stretch's replies after those kept before (the first stretch's request)."""
        row = await self.session.get(RouterRecording, run_id, with_for_update=True)
        now = utc_now()
        if row is None:
            self.session.add(
                RouterRecording(
                    run_id=run_id,
                    request=dict(request),
                    replies=[dict(r) for r in replies],
                    reply_count=len(replies),
                    created_at=now,
                    updated_at=now,
                )
            )
        elif replies:
            row.replies = [*row.replies, *(dict(r) for r in replies)]
            row.reply_count = len(row.replies)
            row.updated_at = now
        await self.session.flush()

    async def get(self, run_id: str) -> RouterRecording | None:
        return await self.session.get(RouterRecording, run_id)
