"""An `interrupted` run's `call_count` counts its stored receipts, those of calls a
callable dispatched left out (as a run ending by itself counts)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.store.journal.batch import Batch
from app.store.journal.session import insert as journal_insert
from app.store.repositories import InstanceRepository, RunRepository
from tests.store.factories import T0, create_run, receipt_row


async def _with_receipts(session: AsyncSession, run_id: str, *, instance_id: str) -> None:
    await create_run(session, run_id, instance_id=instance_id)
    await journal_insert(
        session,
        Batch(
            receipts=[
                receipt_row(run_id, 0),
                receipt_row(run_id, 1, status="failed"),
                receipt_row(run_id, 2, parent_receipt_id=f"{run_id}-receipt-0"),
            ]
        ),
    )


async def test_the_sweep_counts_the_receipts_of_the_runs_it_interrupts(
    session: AsyncSession,
) -> None:
    await InstanceRepository(session).register("current", hostname="h", pid=1, now=T0)
    await _with_receipts(session, "on-vanished", instance_id="vanished")
    await create_run(session, "empty", instance_id="vanished")
    await session.commit()
    runs = RunRepository(session)

    assert await runs.mark_interrupted_for_dead_instances("current", T0 - timedelta(seconds=30))
    await session.commit()
    session.expunge_all()

    counted = {run_id: (await runs.get(run_id)) for run_id in ("on-vanished", "empty")}
    assert {k: (v.status, v.call_count) for k, v in counted.items() if v is not None} == {
        "on-vanished": ("interrupted", 2),
        "empty": ("interrupted", 0),
    }


async def test_an_interrupted_end_without_a_count_counts_the_receipts(
    session: AsyncSession,
) -> None:
    await _with_receipts(session, "broke", instance_id="current")
    await session.commit()
    runs = RunRepository(session)

    await runs.finish("broke", status="interrupted")
    await session.commit()
    session.expunge_all()

    run = await runs.get("broke")
    assert run is not None
    assert (run.status, run.call_count) == ("interrupted", 2)
