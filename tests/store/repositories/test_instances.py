from __future__ import annotations

from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.store.repositories import InstanceRepository
from tests.store.factories import T0


async def test_register_and_heartbeat(session: AsyncSession) -> None:
    instances = InstanceRepository(session)
    await instances.register("i-1", hostname="host-a", pid=42, now=T0)

    assert await instances.heartbeat("i-1", T0 + timedelta(seconds=10)) is True
    assert await instances.heartbeat("gone", T0) is False
    await session.commit()
    session.expunge_all()

    instance = await instances.get("i-1")
    assert instance is not None
    assert (instance.hostname, instance.pid) == ("host-a", 42)
    assert (instance.started_at, instance.heartbeat_at) == (T0, T0 + timedelta(seconds=10))


async def test_remove_and_delete_stale(session: AsyncSession) -> None:
    instances = InstanceRepository(session)
    await instances.register("old", hostname="h", pid=1, now=T0 - timedelta(minutes=5))
    await instances.register("fresh", hostname="h", pid=2, now=T0)
    await instances.register("leaving", hostname="h", pid=3, now=T0)

    assert await instances.remove("leaving") is True
    assert await instances.delete_stale(T0 - timedelta(minutes=1)) == 1
    await session.commit()
    session.expunge_all()

    assert await instances.get("old") is None
    assert await instances.get("fresh") is not None
    assert await instances.get("leaving") is None
