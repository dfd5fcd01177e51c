from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.store.repositories import InstanceRepository, Keyset, RunRepository
from tests.store.factories import CONTRACT_HASH, T0, create_run


async def test_create_get_and_finish(session: AsyncSession) -> None:
    runs = RunRepository(session)
    await create_run(session, "run-1", caller="ops")
    await session.commit()
    session.expunge_all()

    created = await runs.get("run-1")
    assert created is not None
    assert (created.status, created.kind, created.caller) == ("running", "sequential", "ops")
    assert (created.contract_hash, created.call_count) == (CONTRACT_HASH, 0)
    assert created.finished_at is None
    assert created.outcome is None

    assert await runs.finish(
        "run-1", status="succeeded", outcome={"receipts": 2}, call_count=2, finished_at=T0
    )
    await session.commit()
    session.expunge_all()

    finished = await runs.get("run-1")
    assert finished is not None
    assert (finished.status, finished.outcome, finished.call_count) == (
        "succeeded",
        {"receipts": 2},
        2,
    )
    assert finished.finished_at == T0
    assert await runs.get("run-2") is None
    assert await runs.finish("run-2", status="failed") is False


async def test_finish_many_ends_each_run_as_finish_would(session: AsyncSession) -> None:
    runs = RunRepository(session)
    for run_id in ("run-1", "run-2", "run-3"):
        await create_run(session, run_id)
    await session.commit()

    await runs.finish_many(
        [
            {
                "run_id": "run-1",
                "status": "succeeded",
                "outcome": {"receipts": 2},
                "call_count": 2,
                "finished_at": T0,
            },
            # No call count: the stored one stays; no outcome: none is stored.
            {"run_id": "run-2", "status": "interrupted", "call_count": None, "finished_at": T0},
            {"run_id": "nope", "status": "failed", "call_count": 1, "finished_at": T0},
        ]
    )
    await runs.finish_many([])
    await session.commit()
    session.expunge_all()

    ended = {run_id: await runs.get(run_id) for run_id in ("run-1", "run-2", "run-3")}
    summary = {
        run_id: (run.status, run.outcome, run.call_count, run.finished_at)
        for run_id, run in ended.items()
        if run is not None
    }
    assert summary == {
        "run-1": ("succeeded", {"receipts": 2}, 2, T0),
        "run-2": ("interrupted", None, 0, T0),
        "run-3": ("running", None, 0, None),
    }
    assert await runs.get("nope") is None


async def test_set_status(session: AsyncSession) -> None:
    runs = RunRepository(session)
    run = await create_run(session, "run-1", kind="router")

    assert await runs.set_status("run-1", "pending") is True
    assert run.status == "pending"
    assert await runs.set_status("nope", "done") is False


async def test_unknown_status_is_refused(session: AsyncSession) -> None:
    await create_run(session, "run-1")
    with pytest.raises(IntegrityError):
        await RunRepository(session).set_status("run-1", "exploded")


async def test_a_run_needs_its_contract_snapshot(session: AsyncSession) -> None:
    with pytest.raises(IntegrityError):
        await RunRepository(session).create(
            id="run-1",
            kind="sequential",
            owner="worker-a",
            contract_hash="sha256:unknown",
            instance_id="i",
        )


async def test_runs_of_dead_instances_are_marked_interrupted(session: AsyncSession) -> None:
    instances = InstanceRepository(session)
    stale_before = T0 - timedelta(seconds=30)
    await instances.register("current", hostname="h", pid=1, now=T0 - timedelta(hours=1))
    await instances.register("alive", hostname="h", pid=2, now=T0)
    await instances.register("dead", hostname="h", pid=3, now=T0 - timedelta(minutes=5))
    await create_run(session, "on-current", instance_id="current")
    await create_run(session, "on-alive", instance_id="alive")
    await create_run(session, "on-dead", instance_id="dead")
    await create_run(session, "on-vanished", instance_id="vanished")
    await create_run(session, "finished-on-dead", instance_id="dead")
    runs = RunRepository(session)
    await runs.finish("finished-on-dead", status="failed", finished_at=T0 - timedelta(hours=2))
    await session.commit()

    count = await runs.mark_interrupted_for_dead_instances("current", stale_before, now=T0)
    await session.commit()
    session.expunge_all()

    assert count == 2
    statuses = {}
    for run_id in ("on-current", "on-alive", "on-dead", "on-vanished", "finished-on-dead"):
        run = await runs.get(run_id)
        assert run is not None
        statuses[run_id] = (run.status, run.finished_at)
    assert statuses == {
        "on-current": ("running", None),
        "on-alive": ("running", None),
        "on-dead": ("interrupted", T0),
        "on-vanished": ("interrupted", T0),
        "finished-on-dead": ("failed", T0 - timedelta(hours=2)),
    }
    assert await runs.mark_interrupted_for_dead_instances("current", stale_before) == 0


async def test_list_page_walks_newest_first_with_filters(session: AsyncSession) -> None:
    for number in range(5):
        run = await create_run(
            session, f"run-{number}", owner="worker-b" if number == 2 else "worker-a"
        )
        run.created_at = T0 + timedelta(seconds=number // 2)
    await session.commit()
    runs = RunRepository(session)

    first = await runs.list_page(limit=2)
    second = await runs.list_page(limit=2, after=first.next)
    third = await runs.list_page(limit=2, after=second.next)

    assert [run.id for run in first.items + second.items + third.items] == [
        "run-4",
        "run-3",
        "run-2",
        "run-1",
        "run-0",
    ]
    assert third.next is None
    assert first.next == Keyset(created_at=T0 + timedelta(seconds=1), id="run-3")
    only_b = await runs.list_page(limit=10, owner="worker-b")
    assert [run.id for run in only_b.items] == ["run-2"]
    assert only_b.next is None
