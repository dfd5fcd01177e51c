"""A receipt's run: a foreign key on SQLite, triggers checking once per statement on
PostgreSQL (revision e3b9a4c70d15), with the same rules, errors and locks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

from app.store.database import create_database_engine, create_session_factory
from app.store.journal.batch import Batch
from app.store.journal.session import insert as journal_insert
from app.store.migrate import upgrade_database
from tests.store.factories import create_run, receipt_row
from tests.store.test_migrate import (
    downgrade_to,
    every_schema_difference,
    offline_scripts,
    schema_differences,
)

FOREIGN_KEY = "fk_receipts_run_id_runs"
TRIGGERS = {
    ("receipts", "receipts_run_exists_on_insert"),
    ("receipts", "receipts_run_exists_on_update"),
    ("runs", "runs_delete_receipts"),
    ("runs", "runs_keep_referenced_id"),
    ("runs", "runs_truncate_receipts"),
}


async def _with_runs(session: AsyncSession, *run_ids: str) -> None:
    for run_id in run_ids:
        await create_run(session, run_id)
    await session.commit()


async def _receipt_ids(session: AsyncSession) -> list[str]:
    return list((await session.execute(text("SELECT id FROM receipts ORDER BY id"))).scalars())


def _is_the_foreign_key_s(error: IntegrityError) -> bool:
    """The foreign key's own error: SQLite's message, PostgreSQL's SQLSTATE and names."""
    cause = error.orig
    if isinstance(cause, psycopg.Error):
        return (cause.sqlstate, cause.diag.constraint_name) == ("23503", FOREIGN_KEY)
    return "FOREIGN KEY constraint failed" in str(cause)


def _three_runs_receipts() -> list[dict[str, object]]:
    return [receipt_row(run_id, seq) for run_id in ("run-1", "run-2", "run-3") for seq in range(2)]


async def test_receipts_of_a_missing_run_are_refused_whole(session: AsyncSession) -> None:
    await _with_runs(session, "run-1")
    rows = [receipt_row("run-1", 0), receipt_row("no-such-run", 0)]
    with pytest.raises(IntegrityError) as refused:
        await journal_insert(session, Batch(receipts=rows))
    assert _is_the_foreign_key_s(refused.value)
    await session.rollback()
    assert await _receipt_ids(session) == []
    if session.bind.dialect.name == "postgresql":
        assert "Key (run_id)=(no-such-run) is not present" in str(refused.value)


async def test_a_receipt_moved_to_a_missing_run_is_refused(session: AsyncSession) -> None:
    await _with_runs(session, "run-1", "run-2")
    await journal_insert(session, Batch(receipts=[receipt_row("run-1", 0)]))
    await session.commit()
    moved = text("UPDATE receipts SET run_id = :run_id")
    await session.execute(moved, {"run_id": "run-2"})
    with pytest.raises(IntegrityError) as refused:
        await session.execute(moved, {"run_id": "no-such-run"})
    assert _is_the_foreign_key_s(refused.value)


async def test_deleting_runs_deletes_their_receipts(session: AsyncSession) -> None:
    await _with_runs(session, "run-1", "run-2", "run-3")
    await journal_insert(
        session,
        Batch(
            receipts=[
                receipt_row(run_id, seq)
                for run_id in ("run-1", "run-2", "run-3")
                for seq in range(2)
            ]
        ),
    )
    await session.commit()
    await session.execute(text("DELETE FROM runs WHERE id IN ('run-1', 'run-3')"))
    await session.commit()
    assert await _receipt_ids(session) == ["run-2-receipt-0", "run-2-receipt-1"]


async def test_the_id_of_a_run_with_receipts_cannot_change(session: AsyncSession) -> None:
    await _with_runs(session, "run-1", "run-2")
    await journal_insert(session, Batch(receipts=[receipt_row("run-1", 0)]))
    await session.commit()
    renamed = text("UPDATE runs SET id = :new WHERE id = :old")
    await session.execute(renamed, {"new": "run-9", "old": "run-2"})  # no receipts: allowed
    await session.execute(text("UPDATE runs SET status = 'failed' WHERE id = 'run-1'"))
    with pytest.raises(IntegrityError) as refused:
        await session.execute(renamed, {"new": "run-8", "old": "run-1"})
    assert _is_the_foreign_key_s(refused.value)


@pytest.fixture
async def postgres_engine(postgres_url: str) -> AsyncIterator[AsyncEngine]:
    await upgrade_database(postgres_url)
    engine = create_database_engine(postgres_url)
    async with create_session_factory(engine)() as session:
        await _with_runs(session, "run-1", "run-2")
    yield engine
    await engine.dispose()


async def _insert_receipt(connection: AsyncConnection, run_id: str, seq: int) -> None:
    await connection.execute(
        text(
            "INSERT INTO receipts (id, run_id, seq, call_key, tool, owner, status, "
            "output_truncated, attempts, cache_hit, fingerprint, idempotency_key, "
            "admission_wait_ms, started_at, created_at) VALUES (:id, :run_id, :seq, 'c', "
            "'t', 'o', 'succeeded', false, 1, false, 'f', 'k', 0, now(), now())"
        ),
        {"id": f"{run_id}-{seq}", "run_id": run_id, "seq": seq},
    )


async def _impatient(connection: AsyncConnection) -> None:
    await connection.execute(text("SET lock_timeout = '200ms'"))


@pytest.mark.postgres
async def test_a_run_whose_receipts_are_being_written_is_not_deleted_meanwhile(
    postgres_engine: AsyncEngine,
) -> None:
    async with postgres_engine.connect() as writing, postgres_engine.connect() as deleting:
        await _insert_receipt(writing, "run-1", 0)  # the run locked until this commits
        await _impatient(deleting)
        with pytest.raises(OperationalError, match="lock timeout"):
            await deleting.execute(text("DELETE FROM runs WHERE id = 'run-1'"))
        await deleting.rollback()
        await writing.commit()
        await deleting.execute(text("DELETE FROM runs WHERE id = 'run-1'"))
        await deleting.commit()
        count = await deleting.scalar(text("SELECT count(*) FROM receipts"))
        assert count == 0


@pytest.mark.postgres
async def test_a_receipt_waits_for_its_run_s_deletion_and_is_then_refused(
    postgres_engine: AsyncEngine,
) -> None:
    async with postgres_engine.connect() as writing, postgres_engine.connect() as deleting:
        await deleting.execute(text("DELETE FROM runs WHERE id = 'run-1'"))
        await _impatient(writing)
        with pytest.raises(OperationalError, match="lock timeout"):
            await _insert_receipt(writing, "run-1", 0)
        await writing.rollback()
        await deleting.commit()
        with pytest.raises(IntegrityError) as refused:
            await _insert_receipt(writing, "run-1", 0)
        assert _is_the_foreign_key_s(refused.value)


@pytest.mark.postgres
async def test_the_check_finds_runs_whatever_the_session_s_search_path(
    postgres_engine: AsyncEngine,
) -> None:
    async with postgres_engine.connect() as connection:
        schema = await connection.scalar(text("SELECT current_schema()"))
        await connection.execute(text("SET search_path = pg_catalog"))
        await connection.execute(
            text(
                f'INSERT INTO "{schema}".receipts (id, run_id, seq, call_key, tool, owner, '
                "status, output_truncated, attempts, cache_hit, fingerprint, "
                "idempotency_key, admission_wait_ms, started_at, created_at) VALUES "
                "('r', 'run-2', 0, 'c', 't', 'o', 'succeeded', false, 1, false, 'f', 'k', 0, "
                "now(), now())"
            )
        )
        await connection.execute(text(f'DELETE FROM "{schema}".runs'))
        assert await connection.scalar(text(f'SELECT count(*) FROM "{schema}".receipts')) == 0


@pytest.mark.postgres
@pytest.mark.parametrize(
    "statement",
    [
        "TRUNCATE runs CASCADE",
        "TRUNCATE runs, receipts, router_checkpoints, router_confirmations, router_recordings, "
        "router_exact_state",
        "TRUNCATE receipts, runs, router_checkpoints, router_confirmations, router_recordings, "
        "router_exact_state",
    ],
)
async def test_truncating_runs_empties_receipts(
    postgres_engine: AsyncEngine, statement: str
) -> None:
    async with postgres_engine.connect() as connection:
        await _insert_receipt(connection, "run-1", 0)
        await connection.execute(text(statement))
        assert await connection.scalar(text("SELECT count(*) FROM receipts")) == 0


def _triggers(connection: Connection) -> set[tuple[str, str]]:
    rows = connection.execute(
        text(
            "SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "WHERE NOT t.tgisinternal AND c.relname IN ('receipts', 'runs')"
        )
    )
    return {(str(table), str(name)) for table, name in rows.all()}


def _foreign_keys(connection: Connection) -> set[str | None]:
    return {key["name"] for key in inspect(connection).get_foreign_keys("receipts")}


def _differences_unfiltered(connection: Connection) -> list[tuple[str, str | None]]:
    return [(kind, key.name) for kind, key in every_schema_difference(connection)]


# The receipts' columns and index that revisions after this one add (the chain's).
LATER_ON_RECEIPTS = [
    ("add_column", "chain_seq"),
    ("add_column", "chain_link"),
    ("add_index", "ix_receipts_run_id_chain_seq"),
]


def _receipts_differences(connection: Connection) -> list[Any]:
    """The differences that touch the receipts table: an added column or index as
    (kind, its name); any other shape as it comes."""
    return [
        (difference[0], difference[-1].name)
        if difference[0] in ("add_column", "add_index")
        else difference
        for difference in every_schema_difference(connection)
        if "receipts" in repr(difference)
    ]


@pytest.mark.postgres
async def test_the_revision_swaps_the_foreign_key_for_triggers_and_back(postgres_url: str) -> None:
    await upgrade_database(postgres_url)
    engine = create_database_engine(postgres_url)
    try:
        async with engine.connect() as connection:
            assert await connection.run_sync(_triggers) == TRIGGERS
            assert await connection.run_sync(_foreign_keys) == set()
            # The models keep the key (SQLite's schema has it); only this one differs.
            assert await connection.run_sync(_differences_unfiltered) == [("add_fk", FOREIGN_KEY)]
            assert await connection.run_sync(schema_differences) == []

            await connection.run_sync(downgrade_to("c41e7b2d9a05"))
            await connection.commit()
            assert await connection.run_sync(_triggers) == set()
            assert await connection.run_sync(_foreign_keys) == {FOREIGN_KEY}
            # Receipts are as the models say, but for what later revisions add to them.
            assert await connection.run_sync(_receipts_differences) == LATER_ON_RECEIPTS
    finally:
        await engine.dispose()
    await upgrade_database(postgres_url)
    engine = create_database_engine(postgres_url)
    try:
        async with engine.connect() as connection:
            assert await connection.run_sync(_triggers) == TRIGGERS
    finally:
        await engine.dispose()


@pytest.mark.parametrize(
    ("url", "triggers"),
    [("postgresql+psycopg://postgres@127.0.0.1:5432/unasked", 5), ("sqlite:///unasked.db", 0)],
)
def test_the_revision_writes_its_statements_offline(
    url: str, triggers: int, capsys: pytest.CaptureFixture[str]
) -> None:
    upgrade, downgrade = offline_scripts(url, "c41e7b2d9a05", "e3b9a4c70d15", capsys)
    assert upgrade.count("CREATE TRIGGER") == downgrade.count("DROP TRIGGER") == triggers
    assert upgrade.count(f"DROP CONSTRAINT {FOREIGN_KEY}") == min(triggers, 1)
    assert downgrade.count(f"ADD CONSTRAINT {FOREIGN_KEY}") == min(triggers, 1)
