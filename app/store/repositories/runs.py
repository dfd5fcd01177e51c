from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import ScalarSelect, Table, bindparam, func, insert, select, update

from app.store.models import Receipt, Run, ServiceInstance
from app.store.repositories.base import Repository, rowcount
from app.store.repositories.pagination import (
    Keyset,
    Page,
    created_within,
    newest_first,
    to_page,
)
from app.store.types import utc_now

RUNNING = "running"
INTERRUPTED = "interrupted"
# The instance of runs that an orchestrator (Temporal) runs: it outlives every
# ToolLoop process, so no process's end interrupts them; the orchestrator ends them.
ORCHESTRATED = "orchestrated"


def planned_receipt_count() -> ScalarSelect[int]:
    """The stored receipts of the run being updated, without those of calls a callable
    dispatched: what a run's `call_count` counts when it ends by itself."""
    return (
        select(func.count())
        .select_from(Receipt)
        .where(Receipt.run_id == Run.id, Receipt.parent_receipt_id.is_(None))
        .scalar_subquery()
    )


class RunRepository(Repository):
    async def create(
        self,
        *,
        id: str,
        kind: str,
        owner: str,
        contract_hash: str,
        instance_id: str,
        caller: str | None = None,
        parallel_batch_id: str | None = None,
        request_digest: str | None = None,
        status: str = RUNNING,
        started_at: datetime | None = None,
    ) -> Run:
        now = utc_now()
        run = Run(
            id=id,
            kind=kind,
            owner=owner,
            status=status,
            caller=caller,
            contract_hash=contract_hash,
            parallel_batch_id=parallel_batch_id,
            request_digest=request_digest,
            instance_id=instance_id,
            call_count=0,
            created_at=now,
            started_at=started_at or now,
        )
        self.session.add(run)
        await self.session.flush()
        return run

    async def get(self, run_id: str) -> Run | None:
        return await self.session.get(Run, run_id)

    async def trace_ids(self, run_ids: Collection[str]) -> dict[str, str]:
        """The trace ids of those of the runs that have one."""
        if not run_ids:
            return {}
        rows = await self.session.execute(
            select(Run.id, Run.trace_id).where(
                Run.id.in_(sorted(run_ids)), Run.trace_id.is_not(None)
            )
        )
        return {run_id: trace_id for run_id, trace_id in rows if trace_id is not None}

    async def set_status(self, run_id: str, status: str) -> bool:
        result = await self.session.execute(
            update(Run).where(Run.id == run_id).values(status=status)
        )
        return rowcount(result) == 1

    async def add_many(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert run rows in one executemany; keys are `Run` column names."""
        if rows:
            await self.session.execute(insert(Run), list(rows))

    async def finish(
        self,
        run_id: str,
        *,
        status: str,
        outcome: dict[str, Any] | None = None,
        call_count: int | None = None,
        finished_at: datetime | None = None,
    ) -> bool:
        values: dict[str, Any] = {
            "status": status,
            "outcome": outcome,
            "finished_at": finished_at or utc_now(),
        }
        if call_count is not None:
            values["call_count"] = call_count
        elif status == INTERRUPTED:
            # Nobody counted the calls of a run that broke off: its stored receipts did.
            values["call_count"] = planned_receipt_count()
        result = await self.session.execute(update(Run).where(Run.id == run_id).values(values))
        return rowcount(result) == 1

    async def finish_many(self, ends: Sequence[Mapping[str, Any]]) -> None:
        """`finish` for several runs in one executemany: each end has `run_id`, `status`,
        `outcome`, `call_count` (None keeps the stored count) and `finished_at`."""
        if not ends:
            return
        table = cast(Table, Run.__table__)
        statement = (
            update(table)
            .where(table.c.id == bindparam("b_run_id"))
            .values(
                status=bindparam("b_status"),
                outcome=bindparam("b_outcome", type_=table.c.outcome.type),
                call_count=func.coalesce(
                    bindparam("b_call_count", type_=table.c.call_count.type), table.c.call_count
                ),
                finished_at=bindparam("b_finished_at", type_=table.c.finished_at.type),
            )
        )
        await self.session.execute(
            statement,
            [
                {
                    "b_run_id": end["run_id"],
                    "b_status": end["status"],
                    "b_outcome": end.get("outcome"),
                    "b_call_count": end.get("call_count"),
                    "b_finished_at": end["finished_at"],
                }
                for end in ends
            ],
        )

    async def reopen_interrupted(self, run_id: str, instance_id: str) -> bool:
        """`interrupted` -> `running` under `instance_id` (a resume); False when the run
        was not interrupted any more (another resume won)."""
        result = await self.session.execute(
            update(Run)
            .where(Run.id == run_id, Run.status == INTERRUPTED)
            .values(status=RUNNING, instance_id=instance_id, finished_at=None)
            .execution_options(synchronize_session=False)
        )
        return rowcount(result) == 1

    async def mark_interrupted_for_dead_instances(
        self, current_instance_id: str, stale_before: datetime, *, now: datetime | None = None
    ) -> int:
        """Mark `interrupted` the running runs of instances gone or silent since `stale_before`,
        each with its `call_count` of stored receipts (`planned_receipt_count`).

        The current instance's runs are never touched, whatever its heartbeat says, nor
        the runs an orchestrator runs (`ORCHESTRATED`).
        """
        live_instances = select(ServiceInstance.id).where(
            ServiceInstance.heartbeat_at >= stale_before
        )
        result = await self.session.execute(
            update(Run)
            .where(
                Run.status == RUNNING,
                Run.instance_id != current_instance_id,
                Run.instance_id != ORCHESTRATED,
                Run.instance_id.not_in(live_instances),
            )
            .values(
                status=INTERRUPTED,
                finished_at=now or utc_now(),
                call_count=planned_receipt_count(),
            )
            .execution_options(synchronize_session="fetch")
        )
        return rowcount(result)

    async def list_page(
        self,
        *,
        limit: int,
        after: Keyset | None = None,
        owner: str | None = None,
        status: str | None = None,
        caller: str | None = None,
        kind: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Page[Run]:
        """Runs newest first; `since` is inclusive and `until` exclusive, on `created_at`."""
        statement = select(Run)
        if owner is not None:
            statement = statement.where(Run.owner == owner)
        if status is not None:
            statement = statement.where(Run.status == status)
        if caller is not None:
            statement = statement.where(Run.caller == caller)
        if kind is not None:
            statement = statement.where(Run.kind == kind)
        statement = created_within(statement, Run.created_at, since=since, until=until)
        statement = newest_first(statement, Run.created_at, Run.id, limit=limit, after=after)
        rows = (await self.session.scalars(statement)).all()
        return to_page(rows, limit, lambda run: Keyset(run.created_at, run.id))
