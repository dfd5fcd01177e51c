from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.service.errors import (
    IdempotencyKeyInUse,
    IdempotencyKeyReused,
    IdempotencyKeyUnanswered,
)
from app.service.idempotency import (
    OPEN_MODE_CALLER,
    AnsweringRuns,
    IdempotencyClaim,
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
ANSWER_WITHIN_S = 60.0


async def _key_of_run(
    sessions: async_sessionmaker[AsyncSession],
    status: str,
    instance_id: str,
    heartbeat_age_s: float | None,
    active: set[str],
    ended_age_s: float = 1.0,
) -> tuple[IdempotencyService, IdempotencyClaim]:
    """A key in progress for run "r1" of `instance_id`, as the claim left it; the run
    now has `status` (ended `ended_age_s` ago unless running); the instance's row
    beats `heartbeat_age_s` ago (None: no row); `active`: the runs whose tasks this
    process (HERE) holds."""
    answering = AnsweringRuns(HERE, STALE_AFTER_S, active.__contains__, ANSWER_WITHIN_S)
    keys = IdempotencyService(sessions, ttl_s=DAY, answering=answering)
    claim = keys.claim("ops", "k", "d1")
    async with sessions.begin() as session:
        await create_run(session, "r1", instance_id=instance_id)
        if status == "running":
            await RunRepository(session).set_status("r1", status)
        else:
            ended = datetime.now(UTC) - timedelta(seconds=ended_age_s)
            await RunRepository(session).finish("r1", status=status, finished_at=ended)
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
    ("status", "instance_id", "heartbeat_age_s", "active", "ended_age_s"),
    [
        # Still running, wherever: the answer may come.
        ("running", "gone", None, set(), 0.0),
        ("running", HERE, None, set(), 0.0),
        # Ended lately, and its process is alive: the answer may be being stored now.
        ("interrupted", "elsewhere", 1.0, set(), 1.0),
        ("succeeded", "elsewhere", 1.0, set(), ANSWER_WITHIN_S - 5),
        # This process still holds its task, however long ago the run ended.
        ("succeeded", HERE, None, {"r1"}, 2 * ANSWER_WITHIN_S),
    ],
)
async def test_a_key_stays_in_progress_while_its_run_can_still_answer(
    sessions: async_sessionmaker[AsyncSession],
    status: str,
    instance_id: str,
    heartbeat_age_s: float | None,
    active: set[str],
    ended_age_s: float,
) -> None:
    keys, claim = await _key_of_run(
        sessions, status, instance_id, heartbeat_age_s, active, ended_age_s
    )
    with pytest.raises(IdempotencyKeyInUse) as busy:
        await keys.lookup(claim)
    assert busy.value.run_id == "r1"


@pytest.mark.parametrize(
    ("status", "instance_id", "heartbeat_age_s", "active", "ended_age_s"),
    [
        # A crash: recovery marked the run; its process's row is gone, or stale.
        ("interrupted", "gone", None, set(), 1.0),
        ("interrupted", "elsewhere", 2 * STALE_AFTER_S, set(), 1.0),
        # Resumed here after the crash and ended: the resume answered its own request.
        ("succeeded", HERE, None, set(), 1.0),
        ("failed", HERE, None, {"another run"}, 1.0),
        # Its process lives, but the run ended longer ago than an answer's writes
        # could take: that process's write of the answer failed for good.
        ("succeeded", "elsewhere", 1.0, set(), ANSWER_WITHIN_S + 5),
    ],
)
async def test_a_key_whose_run_stopped_with_nobody_left_to_answer_is_unanswered(
    sessions: async_sessionmaker[AsyncSession],
    status: str,
    instance_id: str,
    heartbeat_age_s: float | None,
    active: set[str],
    ended_age_s: float,
) -> None:
    keys, claim = await _key_of_run(
        sessions, status, instance_id, heartbeat_age_s, active, ended_age_s
    )
    with pytest.raises(IdempotencyKeyUnanswered) as unanswered:
        await keys.lookup(claim)
    assert (unanswered.value.run_id, unanswered.value.run_status) == ("r1", status)

    # Another request's key is still told apart first, and a late answer still lands.
    with pytest.raises(IdempotencyKeyReused):
        await keys.lookup(keys.claim("ops", "k", "d2"))
    await keys.complete(claim, StoredResponse(200, {}, {"plan_id": "r1"}))
    assert await keys.lookup(claim) == StoredResponse(200, {}, {"plan_id": "r1"})
