from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.service.idempotency import (
    OPEN_MODE_CALLER,
    AnsweringRuns,
    IdempotencyClaim,
    IdempotencyKeyInUse,
    IdempotencyKeyReused,
    IdempotencyKeyUnanswered,
    IdempotencyService,
    StoredResponse,
    request_digest,
)
from app.store.database import create_database_engine, create_session_factory
from app.store.migrate import upgrade_database
from app.store.repositories.idempotency import IdempotencyRepository
from app.store.repositories.instances import InstanceRepository
from app.store.repositories.runs import RunRepository
from tests.store.factories import create_run

DAY = 86_400.0
PROBLEM = StoredResponse(422, {"content-type": "application/problem+json"}, {"status": 422})


@pytest.fixture
async def sessions(database_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    await upgrade_database(database_url)
    engine = create_database_engine(database_url)
    yield create_session_factory(engine)
    await engine.dispose()


@pytest.fixture
def keys(sessions: async_sessionmaker[AsyncSession]) -> IdempotencyService:
    return IdempotencyService(sessions, ttl_s=DAY)


def test_the_digest_covers_method_path_mode_and_canonical_body() -> None:
    body = {"b": [1, 2.0], "a": "x"}
    same = request_digest("post", "/plans/sequential", "wait", {"a": "x", "b": [1, 2]})
    assert request_digest("POST", "/plans/sequential", "wait", body) == same
    assert request_digest("POST", "/plans/parallel", "wait", body) != same
    assert request_digest("POST", "/plans/sequential", "respond-async", body) != same
    assert request_digest("POST", "/plans/sequential", "wait", {**body, "a": "y"}) != same


async def test_a_recorded_response_is_found_again(keys: IdempotencyService) -> None:
    claim = keys.claim(None, "k", "d1")
    assert claim.caller == OPEN_MODE_CALLER
    assert claim.expires_at - datetime.now(UTC) > timedelta(hours=23)
    assert await keys.lookup(claim) is None

    assert await keys.record(claim, PROBLEM)
    assert not await keys.record(claim, PROBLEM)

    assert await keys.lookup(claim) == PROBLEM
    with pytest.raises(IdempotencyKeyReused):
        await keys.lookup(keys.claim(None, "k", "d2"))
    assert await keys.lookup(keys.claim("someone", "k", "d2")) is None


async def test_secrets_are_redacted_before_a_response_is_stored(keys: IdempotencyService) -> None:
    claim = keys.claim("ops", "k", "d1")
    secret = StoredResponse(422, {}, {"detail": "Bearer abcdefghijklmnopqrstuvwxyz0123456789"})
    await keys.record(claim, secret)

    stored = await keys.lookup(claim)
    assert stored is not None
    assert stored.body == {"detail": "Bearer [REDACTED]"}


async def test_a_key_in_progress_is_busy_until_completed(
    keys: IdempotencyService, sessions: async_sessionmaker[AsyncSession]
) -> None:
    claim = keys.claim("ops", "k", "d1")
    async with sessions.begin() as session:
        await IdempotencyRepository(session).insert(
            caller="ops", key="k", request_digest="d1", expires_at=claim.expires_at, run_id="r1"
        )
    with pytest.raises(IdempotencyKeyInUse) as busy:
        await keys.lookup(claim)
    assert busy.value.run_id == "r1"

    await keys.complete(claim, StoredResponse(200, {}, {"plan_id": "r1"}))
    assert await keys.lookup(claim) == StoredResponse(200, {}, {"plan_id": "r1"})


async def test_expired_keys_are_free_and_purged(
    keys: IdempotencyService, sessions: async_sessionmaker[AsyncSession]
) -> None:
    past = datetime.now(UTC) - timedelta(seconds=1)
    async with sessions.begin() as session:
        await IdempotencyRepository(session).insert(
            caller="ops", key="old", request_digest="d1", expires_at=past, now=past
        )
    assert await keys.lookup(keys.claim("ops", "old", "other")) is None

    assert await keys.purge_expired() == 1
    assert await keys.purge_expired() == 0


HERE = "instance-here"
STALE_AFTER_S = 20.0


async def _key_of_run(
    sessions: async_sessionmaker[AsyncSession],
    status: str,
    instance_id: str,
    heartbeat_age_s: float | None,
    active: set[str],
) -> tuple[IdempotencyService, IdempotencyClaim]:
    """A key in progress for run "r1" of `instance_id`, as the claim left it; the run
    now has `status`; the instance's row beats `heartbeat_age_s` ago (None: no row);
    `active`: the runs whose tasks this process (HERE) holds."""
    keys = IdempotencyService(
        sessions, ttl_s=DAY, answering=AnsweringRuns(HERE, STALE_AFTER_S, active.__contains__)
    )
    claim = keys.claim("ops", "k", "d1")
    async with sessions.begin() as session:
        await create_run(session, "r1", instance_id=instance_id)
        await RunRepository(session).set_status("r1", status)
        await IdempotencyRepository(session).insert(
            caller="ops", key="k", request_digest="d1", expires_at=claim.expires_at, run_id="r1"
        )
        if heartbeat_age_s is not None and instance_id != HERE:
            beat = datetime.now(UTC) - timedelta(seconds=heartbeat_age_s)
            await InstanceRepository(session).register(
                instance_id, hostname="elsewhere", pid=1, now=beat
            )
    return keys, claim


@pytest.mark.parametrize(
    ("status", "instance_id", "heartbeat_age_s", "active"),
    [
        # Still running, wherever: the answer may come.
        ("running", "gone", None, set()),
        ("running", HERE, None, set()),
        # Ended, and its process is alive: the answer may be being stored now.
        ("interrupted", "elsewhere", 1.0, set()),
        ("succeeded", HERE, None, {"r1"}),
    ],
)
async def test_a_key_stays_in_progress_while_its_run_can_still_answer(
    sessions: async_sessionmaker[AsyncSession],
    status: str,
    instance_id: str,
    heartbeat_age_s: float | None,
    active: set[str],
) -> None:
    keys, claim = await _key_of_run(sessions, status, instance_id, heartbeat_age_s, active)
    with pytest.raises(IdempotencyKeyInUse) as busy:
        await keys.lookup(claim)
    assert busy.value.run_id == "r1"


@pytest.mark.parametrize(
    ("status", "instance_id", "heartbeat_age_s", "active"),
    [
        # A crash: recovery marked the run; its process's row is gone, or stale.
        ("interrupted", "gone", None, set()),
        ("interrupted", "elsewhere", 2 * STALE_AFTER_S, set()),
        # Resumed here after the crash and ended: the resume answered its own request.
        ("succeeded", HERE, None, set()),
        ("failed", HERE, None, {"another run"}),
    ],
)
async def test_a_key_whose_run_stopped_with_nobody_left_to_answer_is_unanswered(
    sessions: async_sessionmaker[AsyncSession],
    status: str,
    instance_id: str,
    heartbeat_age_s: float | None,
    active: set[str],
) -> None:
    keys, claim = await _key_of_run(sessions, status, instance_id, heartbeat_age_s, active)
    with pytest.raises(IdempotencyKeyUnanswered) as unanswered:
        await keys.lookup(claim)
    assert (unanswered.value.run_id, unanswered.value.run_status) == ("r1", status)

    # Another request's key is still told apart first, and a late answer still lands.
    with pytest.raises(IdempotencyKeyReused):
        await keys.lookup(keys.claim("ops", "k", "d2"))
    await keys.complete(claim, StoredResponse(200, {}, {"plan_id": "r1"}))
    assert await keys.lookup(claim) == StoredResponse(200, {}, {"plan_id": "r1"})
