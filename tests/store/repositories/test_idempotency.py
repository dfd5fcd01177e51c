from __future__ import annotations

import asyncio
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.store.database import create_session_factory
from app.store.repositories import IdempotencyRepository
from tests.store.factories import T0

LATER = T0 + timedelta(hours=24)


async def test_insert_claims_a_key_once(session: AsyncSession) -> None:
    keys = IdempotencyRepository(session)

    assert await keys.insert(caller="ops", key="k", request_digest="d1", expires_at=LATER, now=T0)
    assert not await keys.insert(
        caller="ops", key="k", request_digest="d2", expires_at=LATER, now=T0
    )
    assert await keys.insert(caller="other", key="k", request_digest="d3", expires_at=LATER, now=T0)

    claimed = await keys.get("ops", "k")
    assert claimed is not None
    assert (claimed.state, claimed.request_digest, claimed.response_status) == (
        "in_progress",
        "d1",
        None,
    )
    assert await keys.get("ops", "missing") is None


async def test_concurrent_claims_let_exactly_one_win(engine: AsyncEngine) -> None:
    sessions = create_session_factory(engine)
    async with sessions() as first, sessions() as second:
        won_first = await IdempotencyRepository(first).insert(
            caller="ops", key="k", request_digest="d1", expires_at=LATER, now=T0
        )
        # The second claim waits on the first transaction's row (or SQLite's write lock).
        pending = asyncio.create_task(
            IdempotencyRepository(second).insert(
                caller="ops", key="k", request_digest="d2", expires_at=LATER, now=T0
            )
        )
        await first.commit()
        won_second = await pending
        await second.commit()

    assert (won_first, won_second) == (True, False)


async def test_complete_stores_the_response(session: AsyncSession) -> None:
    keys = IdempotencyRepository(session)
    await keys.insert(caller="ops", key="k", request_digest="d1", expires_at=LATER, now=T0)

    assert await keys.complete(
        "ops", "k", response_status=200, response_body={"plan_id": "p"}, run_id="run-1"
    )

    completed = await keys.get("ops", "k")
    assert completed is not None
    assert (completed.state, completed.response_status, completed.run_id) == (
        "completed",
        200,
        "run-1",
    )
    assert completed.response_body == {"plan_id": "p"}
    assert not await keys.complete("ops", "missing", response_status=200, response_body=None)


async def test_an_expired_key_can_be_claimed_again(session: AsyncSession) -> None:
    keys = IdempotencyRepository(session)
    await keys.insert(caller="ops", key="k", request_digest="d1", expires_at=T0, now=T0)
    await keys.complete("ops", "k", response_status=200, response_body={"old": True})

    assert await keys.insert(
        caller="ops", key="k", request_digest="d2", expires_at=LATER, now=T0 + timedelta(seconds=1)
    )

    reclaimed = await keys.get("ops", "k")
    assert reclaimed is not None
    assert (reclaimed.state, reclaimed.request_digest, reclaimed.response_body) == (
        "in_progress",
        "d2",
        None,
    )


async def test_release_and_delete_expired(session: AsyncSession) -> None:
    keys = IdempotencyRepository(session)
    await keys.insert(caller="ops", key="a", request_digest="d", expires_at=T0, now=T0)
    await keys.insert(caller="ops", key="b", request_digest="d", expires_at=LATER, now=T0)
    await keys.insert(caller="ops", key="c", request_digest="d", expires_at=LATER, now=T0)

    assert await keys.release("ops", "c") is True
    assert await keys.release("ops", "c") is False
    assert await keys.delete_expired(T0) == 1
    assert await keys.get("ops", "a") is None
    assert await keys.get("ops", "b") is not None
