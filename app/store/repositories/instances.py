from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select, update

from app.store.models import ServiceInstance
from app.store.repositories.base import Repository, rowcount
from app.store.types import utc_now


class InstanceRepository(Repository):
    async def register(
        self, instance_id: str, *, hostname: str, pid: int, now: datetime | None = None
    ) -> ServiceInstance:
        now = now or utc_now()
        instance = ServiceInstance(
            id=instance_id, hostname=hostname, pid=pid, started_at=now, heartbeat_at=now
        )
        self.session.add(instance)
        await self.session.flush()
        return instance

    async def get(self, instance_id: str) -> ServiceInstance | None:
        return await self.session.get(ServiceInstance, instance_id)

    async def heartbeat(self, instance_id: str, now: datetime | None = None) -> bool:
        """Record that the instance is alive; False when its row is gone."""
        result = await self.session.execute(
            update(ServiceInstance)
            .where(ServiceInstance.id == instance_id)
            .values(heartbeat_at=now or utc_now())
        )
        return rowcount(result) == 1

    async def list_for_host(self, hostname: str) -> list[ServiceInstance]:
        statement = select(ServiceInstance).where(ServiceInstance.hostname == hostname)
        return list((await self.session.scalars(statement)).all())

    async def remove(self, instance_id: str) -> bool:
        result = await self.session.execute(
            delete(ServiceInstance).where(ServiceInstance.id == instance_id)
        )
        return rowcount(result) == 1

    async def delete_stale(self, stale_before: datetime) -> int:
        result = await self.session.execute(
            delete(ServiceInstance)
            .where(ServiceInstance.heartbeat_at < stale_before)
            .execution_options(synchronize_session=False)
        )
        return rowcount(result)
