from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy.exc import StatementError
from sqlalchemy.ext.asyncio import AsyncSession

from app.store.repositories import InstanceRepository
from tests.store.factories import T0


async def test_times_come_back_aware_and_in_utc(session: AsyncSession) -> None:
    plus_two = T0.astimezone(timezone(timedelta(hours=2)))
    await InstanceRepository(session).register("i-1", hostname="h", pid=1, now=plus_two)
    await session.commit()
    session.expunge_all()

    instance = await InstanceRepository(session).get("i-1")

    assert instance is not None
    assert instance.started_at == T0
    assert instance.started_at.utcoffset() == timedelta(0)


async def test_naive_times_are_refused(session: AsyncSession) -> None:
    with pytest.raises(StatementError, match="naive datetime"):
        await InstanceRepository(session).register(
            "i-1", hostname="h", pid=1, now=datetime(2026, 1, 1, 12, 0)
        )
