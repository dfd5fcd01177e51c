"""Idempotency keys in a bulk write: claimed with their runs, completed, freed, stored
exactly as `IdempotencyRepository` stores them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.store.journal.batch import Batch
from app.store.journal.postgres.encoding import COMPLETE, RELEASE
from app.store.journal.session import insert, write_on
from app.store.repositories import RunRepository
from app.store.repositories.contract_snapshots import ContractSnapshotRepository
from app.store.repositories.idempotency import COMPLETED, IN_PROGRESS, IdempotencyRepository
from tests.store import factories
from tests.store.factories import CONTRACT_HASH, T0
from tests.store.generic_plans import generic_plan

KEY_COLUMNS = (
    "request_digest, state, response_status, CAST(response_body AS TEXT), "
    "response_body IS NULL, created_at, expires_at"
)
# A NUL in a JSON document sends PostgreSQL's batch statement by statement
# (per-row parameters) instead of in one pipeline.
TEXTS = ['ünïcode, \u2028, "quoted"', "nul\u0000"]


def run_row(run_id: str) -> dict[str, Any]:
    return factories.run_row(run_id, caller="alice")


def key_row(key: str, run_id: str, body: Any = None, *, expired: bool = False) -> dict[str, Any]:
    return {
        "caller": "alice",
        "key": key,
        "request_digest": "d" * 64,
        "state": IN_PROGRESS if body is None else COMPLETED,
        "response_status": None if body is None else 202,
        "response_body": body,
        "run_id": run_id,
        "created_at": T0,
        "expires_at": T0 + timedelta(seconds=-1 if expired else 3600),
    }


def completion(key: str, body: Any, run_id: str | None = None) -> dict[str, Any]:
    return {
        "caller": "alice",
        "key": key,
        "state": COMPLETED,
        "response_status": 200,
        "response_body": body,
        "run_id": run_id,
    }


async def stored_key(session: AsyncSession, key: str) -> tuple[Any, ...] | None:
    result = await session.execute(
        text(f"SELECT {KEY_COLUMNS} FROM idempotency_keys WHERE caller = 'alice' AND key = :key"),
        {"key": key},
    )
    row = result.first()
    return None if row is None else tuple(row)


async def key_run(session: AsyncSession, key: str) -> str | None:
    row = await IdempotencyRepository(session).get("alice", key)
    return None if row is None else row.run_id


async def existing(session: AsyncSession, *run_ids: str) -> list[str]:
    runs = RunRepository(session)
    session.expunge_all()
    return [run_id for run_id in run_ids if await runs.get(run_id) is not None]


@pytest.fixture
async def keys(session: AsyncSession) -> IdempotencyRepository:
    await ContractSnapshotRepository(session).save_if_absent(CONTRACT_HASH, {"tools": {}}, 0)
    await session.commit()
    return IdempotencyRepository(session)


@pytest.mark.parametrize("value", TEXTS)
async def test_a_claim_stores_its_key_as_the_repository_does_and_inserts_its_run(
    session: AsyncSession, keys: IdempotencyRepository, value: str
) -> None:
    body = {"headers": {"location": "/runs/x"}, "body": {"text": value}}
    orm = key_row("orm", "orm-run", body)
    assert await keys.insert(
        caller="alice",
        key="orm",
        request_digest=orm["request_digest"],
        expires_at=orm["expires_at"],
        run_id="orm-run",
        now=T0,
    )
    await keys.complete("alice", "orm", response_status=202, response_body=body)
    new = key_row("new", "new-run", body)
    pending = key_row("pending", "pending-run")

    won = await insert(
        session, Batch(claims=[(new, run_row("new-run")), (pending, run_row("pending-run"))])
    )
    await session.commit()

    assert won == {"new-run", "pending-run"}
    assert await stored_key(session, "new") == await stored_key(session, "orm")
    assert (await stored_key(session, "pending"))[1:5] == (IN_PROGRESS, None, None, True)  # type: ignore[index]
    assert await existing(session, "new-run", "pending-run") == ["new-run", "pending-run"]


async def _committed(session: AsyncSession, batch: Batch) -> set[str]:
    """The batch written and committed in one driver call: the runs whose key it claimed."""
    return await write_on(await session.connection(), batch, commit=True)


@pytest.mark.parametrize("value", TEXTS)
async def test_a_held_key_is_not_claimed_and_its_run_not_inserted(
    session: AsyncSession, keys: IdempotencyRepository, value: str
) -> None:
    first = Batch(claims=[(key_row("k", "run-a", {"text": value}), run_row("run-a"))])
    await _committed(session, first)

    second = Batch(
        claims=[
            (key_row("k", "run-b", {"text": value}), run_row("run-b")),
            (key_row("old", "run-c", expired=True), run_row("run-c")),
        ],
        runs=[run_row("run-d")],
    )
    won = await _committed(session, second)

    assert won == {"run-c"}
    assert await key_run(session, "k") == "run-a"
    assert await existing(session, "run-a", "run-b", "run-c", "run-d") == [
        "run-a",
        "run-c",
        "run-d",
    ]
    # An expired key is claimed again in place.
    won = await _committed(session, Batch(claims=[(key_row("old", "run-e"), run_row("run-e"))]))
    assert won == {"run-e"}
    assert await key_run(session, "old") == "run-e"


@pytest.mark.parametrize("value", TEXTS)
async def test_completions_are_stored_as_the_repository_stores_them(
    session: AsyncSession, keys: IdempotencyRepository, value: str
) -> None:
    body = {"headers": {"content-type": "application/json"}, "body": {"text": value, "n": 1.5}}
    claims = [
        (key_row("orm", "run-a"), run_row("run-a")),
        (key_row("bulk", "run-b"), run_row("run-b")),
    ]
    await _committed(session, Batch(claims=claims))
    await keys.complete("alice", "orm", response_status=200, response_body=body)
    await session.commit()

    await _committed(session, Batch(completions=[completion("bulk", body)]))

    assert await stored_key(session, "bulk") == await stored_key(session, "orm")
    assert await key_run(session, "bulk") == "run-b"  # a None run_id keeps the stored one


@pytest.mark.parametrize("value", TEXTS)
async def test_a_release_frees_a_key_only_while_its_run_holds_it(
    session: AsyncSession, keys: IdempotencyRepository, value: str
) -> None:
    claims = [
        (key_row("mine", "run-a", {"text": value}), run_row("run-a")),
        (key_row("theirs", "run-b"), run_row("run-b")),
    ]
    await _committed(session, Batch(claims=claims))

    release = [
        {"caller": "alice", "key": "mine", "run_id": "run-a"},
        {"caller": "alice", "key": "theirs", "run_id": "run-a"},
    ]
    await _committed(
        session, Batch(completions=[completion("theirs", {"text": value})], releases=release)
    )

    assert await stored_key(session, "mine") is None
    assert await key_run(session, "theirs") == "run-b"


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("statement", "types", "arguments"),
    [
        (
            COMPLETE,
            "text, integer, json, text, text, text",
            "'completed', 200, '{}', NULL, 'alice', 'k'",
        ),
        (RELEASE, "text, text, text", "'alice', 'k', 'run-a'"),
    ],
)
async def test_key_writes_on_postgresql_find_their_key_through_the_primary_key_in_any_kept_plan(
    postgres_url: str, statement: str, types: str, arguments: str
) -> None:
    """psycopg prepares a statement run often on one connection, and the server may
    keep a generic plan made while the table was empty: even that plan must find
    the key through the primary key (a scan would grow with every key stored)."""
    plan = await generic_plan(postgres_url, statement, types, arguments)
    assert "Index Scan using pk_idempotency_keys" in plan, plan
    assert "Seq Scan" not in plan, plan
