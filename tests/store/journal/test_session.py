"""The journal's one insert path (`app.store.journal.session.insert`, a batch below
the ORM, in the session's transaction) stores exactly what SQLAlchemy's own
inserts store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from sqlalchemy import bindparam, event, insert, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.foundation.serialization import json_bytes
from app.store.database import (
    create_database_engine,
    create_session_factory,
    create_writer_engine,
)
from app.store.journal import rows as journal_rows
from app.store.journal.batch import Batch
from app.store.journal.postgres import encoding as postgres_encoding
from app.store.journal.postgres.encoding import (
    FINISH,
    FINISH_BY_ROW_MAX,
    FINISH_ROWS,
    Encoded,
    batch_json,
)
from app.store.journal.rows import RECEIPT_COLUMNS as RECEIPT_ORDER
from app.store.journal.rows import encode, layout_of
from app.store.journal.session import insert as journal_insert
from app.store.journal.session import write_on
from app.store.migrate import upgrade_database
from app.store.models import Receipt
from app.store.repositories import AuditRepository, ReceiptRepository, RunRepository
from app.store.repositories.contract_snapshots import ContractSnapshotRepository
from tests.store.factories import CONTRACT_HASH, T0, create_run, receipt_row
from tests.store.generic_plans import generic_plan

PLUS_TWO = timezone(timedelta(hours=2))
# What the columns hold, as text: JSON columns exactly as written, times as stored.
RECEIPT_COLUMNS = (
    "seq, call_key, item_key, parallel_batch_id, tool, owner, status, "
    "CAST(output AS TEXT), output_digest, output_truncated, CAST(error AS TEXT), attempts, "
    "cache_hit, cache_source_receipt_id, fingerprint, idempotency_key, parent_receipt_id, "
    "CAST(control AS TEXT), admission_wait_ms, started_at, finished_at, duration_ms, "
    "created_at, output IS NULL, error IS NULL, control IS NULL"
)
AUDIT_COLUMNS = "at, kind, caller, tool, call_key, item_key, CAST(detail AS TEXT)"


@pytest.fixture(params=["json", "copy"])
def through(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """On PostgreSQL, rows go as a JSON batch, or by binary COPY from any number of
    rows (as large batches do); SQLite ignores it and runs the test twice."""
    if request.param == "copy":
        monkeypatch.setattr(postgres_encoding, "COPY_MIN_ROWS", 1)
    return str(request.param)


def _receipts(run_id: str, text: str) -> list[dict[str, Any]]:
    """Rows covering every kind of value a receipt column takes."""
    rows = [
        receipt_row(run_id, 0, id=f"{run_id}-0"),
        receipt_row(
            run_id,
            1,
            id=f"{run_id}-1",
            output={"z": 1, "a": [1.5, None, True, 1e300], "text": text},
            item_key="lane-a",
            parallel_batch_id="batch-1",
            cache_hit=True,
            cache_source_receipt_id="source",
            admission_wait_ms=1.25,
            # Another offset and no microseconds: stored as UTC, microseconds written.
            started_at=datetime(2026, 1, 1, 14, 0, tzinfo=PLUS_TWO),
            finished_at=datetime(2026, 1, 1, 12, 0, 1, 500, tzinfo=UTC),
        ),
        receipt_row(
            run_id,
            2,
            id=f"{run_id}-2",
            status="failed",
            output=None,
            error={"kind": "timeout", "message": "tab\there\nnewline \\ backslash"},
            attempts=3,
            control={"continue": False, "tags": ["a", "b"]},
            output_digest="sha256:" + "d" * 64,
            output_truncated=True,
            finished_at=None,
            duration_ms=None,
        ),
        receipt_row(run_id, 3, id=f"{run_id}-3", output="just a string", parent_receipt_id="p"),
        receipt_row(run_id, 4, id=f"{run_id}-4", output=[], control={}),
    ]
    return [{**row, "idempotency_key": f"key:{row['seq']}"} for row in rows]


async def _stored(session: AsyncSession, table: str, columns: str, run_id: str) -> list[Any]:
    order = "seq" if table == "receipts" else "id"
    result = await session.execute(
        text(f"SELECT {columns} FROM {table} WHERE run_id = :run_id ORDER BY {order}"),
        {"run_id": run_id},
    )
    return [tuple(row) for row in result.all()]


# On PostgreSQL a NUL character in a JSON document sends the batch by COPY
# instead of json_populate_recordset: both are compared with the ORM's rows.
@pytest.mark.parametrize("text", ['ünïcode, \u2028, "quoted"', "nul\u0000"])
async def test_bulk_receipts_are_stored_exactly_as_the_orm_stores_them(
    session: AsyncSession, text: str, through: str
) -> None:
    await create_run(session, "orm")
    await create_run(session, "bulk")
    receipts = ReceiptRepository(session)
    await session.execute(insert(Receipt), _receipts("orm", text))
    await journal_insert(session, Batch(receipts=_receipts("bulk", text)))
    await session.commit()

    orm = await _stored(session, "receipts", RECEIPT_COLUMNS, "orm")
    bulk = await _stored(session, "receipts", RECEIPT_COLUMNS, "bulk")
    assert len(orm) == 5
    assert bulk == orm
    session.expunge_all()
    by_orm = await receipts.list_for_run("orm")
    by_bulk = await receipts.list_for_run("bulk")
    assert [r.output for r in by_bulk] == [r.output for r in by_orm]
    assert by_bulk[1].started_at == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert list(by_bulk[1].output) == ["z", "a", "text"]


# orjson refuses an integer beyond 64 bits: PostgreSQL falls back to COPY, SQLite's
# encoder to the stdlib. Its quicker path refuses keys that are not strings: they
# are written with OPT_NON_STR_KEYS instead, and read back as strings.
@pytest.mark.parametrize(
    ("output", "read_back"),
    [
        pytest.param({"n": 2**70, "m": [-(2**65)]}, {"n": 2**70, "m": [-(2**65)]}, id="big"),
        pytest.param({1: "one", "n": {2: [True]}}, {"1": "one", "n": {"2": [True]}}, id="keys"),
    ],
)
async def test_documents_orjson_refuses_at_first_are_stored_exactly_as_the_orm_stores_them(
    session: AsyncSession, through: str, output: Any, read_back: Any
) -> None:
    await create_run(session, "orm")
    await create_run(session, "bulk")
    receipts = ReceiptRepository(session)
    orm = [receipt_row("orm", 0, id="o", output=output, idempotency_key="k")]
    await session.execute(insert(Receipt), orm)
    bulk = [receipt_row("bulk", 0, id="b", output=output, idempotency_key="k")]
    await journal_insert(session, Batch(receipts=bulk))
    await session.commit()

    bulk = await _stored(session, "receipts", RECEIPT_COLUMNS, "bulk")
    assert bulk == await _stored(session, "receipts", RECEIPT_COLUMNS, "orm")
    session.expunge_all()
    assert (await receipts.list_for_run("bulk"))[0].output == read_back


async def test_bulk_audit_events_are_stored_as_the_orm_stores_them_in_row_order(
    session: AsyncSession, through: str
) -> None:
    def events(run_id: str) -> list[dict[str, Any]]:
        return [
            {
                "run_id": run_id,
                "at": T0 + timedelta(seconds=number),
                "kind": "call.finished",
                "caller": "alice" if number % 2 else None,
                "tool": "t",
                "call_key": str(number),
                "item_key": None,
                "detail": {"number": number, "error": None, "text": "ü\u2028"},
            }
            for number in range(5)
        ] + [
            # Keys left out take the column defaults, as with the ORM.
            {"run_id": run_id, "at": T0, "kind": "run.finished"},
        ]

    audit = AuditRepository(session)
    await audit.add_many(events("orm"))
    # Rows written as they are (as the receipts they record replaced are).
    await journal_insert(session, Batch(replaced_audit=events("bulk")))
    await session.commit()

    orm = await _stored(session, "audit_events", AUDIT_COLUMNS, "orm")
    bulk = await _stored(session, "audit_events", AUDIT_COLUMNS, "bulk")
    assert len(orm) == 6
    assert bulk == orm
    stored = await audit.list_for_run("bulk")
    assert [event.call_key for event in stored] == ["0", "1", "2", "3", "4", None]
    assert stored[-1].detail == {}
    assert stored[-1].id > stored[0].id


async def test_bulk_inserts_belong_to_the_transaction(engine: AsyncEngine) -> None:
    sessions = create_session_factory(engine)
    async with sessions.begin() as session:
        await create_run(session, "run-1")
    async with sessions() as session:
        batch = Batch(receipts=[receipt_row("run-1", 0)], audit=[{"run_id": "run-1", "kind": "x"}])
        await journal_insert(session, batch)
        await session.rollback()
    async with sessions() as session:
        assert await ReceiptRepository(session).list_for_run("run-1") == []
        assert await AuditRepository(session).list_for_run("run-1") == []


async def test_bulk_insert_errors_are_sqlalchemy_errors(engine: AsyncEngine) -> None:
    sessions = create_session_factory(engine)
    async with sessions.begin() as session:
        await create_run(session, "run-1")
        await journal_insert(session, Batch(receipts=[receipt_row("run-1", 0)]))
    with pytest.raises(IntegrityError):
        async with sessions.begin() as session:
            await journal_insert(session, Batch(receipts=[receipt_row("run-1", 0, id="again")]))
    with pytest.raises(IntegrityError):
        async with sessions.begin() as session:
            await journal_insert(session, Batch(receipts=[receipt_row("no-such-run", 0)]))
    async with sessions() as session:
        assert [r.id for r in await ReceiptRepository(session).list_for_run("run-1")] == [
            "run-1-receipt-0"
        ]


async def test_bulk_inserts_refuse_naive_datetimes(session: AsyncSession, through: str) -> None:
    await create_run(session, "run-1")
    naive = datetime(2026, 1, 1, 12, 0)
    with pytest.raises(ValueError, match="naive datetime"):
        await journal_insert(session, Batch(receipts=[receipt_row("run-1", 0, started_at=naive)]))


# A NUL character, and an integer beyond 64 bits (orjson refuses it; the stdlib
# writes it), in a JSON document: both paths still store the rows' text.
@pytest.mark.parametrize("text", ['ünïcode, \u2028, "quoted"', "nul\u0000"])
async def test_receipts_as_the_group_commit_queues_them_are_stored_as_their_rows(
    session: AsyncSession, through: str, text: str
) -> None:
    await create_run(session, "run-1")
    await create_run(session, "run-2")
    rows = [
        *_receipts("run-1", text),
        receipt_row("run-1", 5, id="run-1-5", output={"n": 2**70}, idempotency_key="k"),
    ]
    rows = [{**row, "created_at": T0} for row in rows]
    twins = [{**row, "run_id": "run-2", "id": f"{row['id']}-twin"} for row in rows]
    # The driver tuples the rows would make, less their shared `created_at`.
    values = [encoded[:-1] for encoded in encode(layout_of(Receipt), twins)]
    await journal_insert(session, Batch(receipts=rows))
    await journal_insert(session, Batch(encoded=values, created_at=T0))
    stored = {
        run_id: await _stored(session, "receipts", RECEIPT_COLUMNS, run_id)
        for run_id in ("run-1", "run-2")
    }
    assert stored["run-2"] == stored["run-1"]
    assert len(stored["run-1"]) == len(rows)


def test_receipts_encoded_for_postgresql_go_by_copy_from_the_threshold_asked() -> None:
    unchained = {"chain_seq": None, "chain_link": None, "created_at": T0}
    rows = [
        {name: {**receipt_row("run-1", seq), **unchained}[name] for name in RECEIPT_ORDER}
        for seq in range(3)
    ]
    values = [encoded[:-1] for encoded in encode(layout_of(Receipt), rows)]
    json_step = Encoded(layout_of(Receipt), values, T0, copy_min_rows=4)
    copy_step = Encoded(layout_of(Receipt), values, T0, copy_min_rows=3)
    assert json_step.json_batch() == batch_json(layout_of(Receipt), rows)
    assert copy_step.json_batch() is None
    assert copy_step.copied() == encode(layout_of(Receipt), rows)


async def test_bulk_inserts_of_no_rows_do_nothing(session: AsyncSession) -> None:
    assert await journal_insert(session, Batch(receipts=[], audit=[])) == set()


RUN_COLUMNS = (
    "id, kind, owner, status, caller, contract_hash, parallel_batch_id, request_digest, "
    "instance_id, CAST(outcome AS TEXT), outcome IS NULL, call_count, created_at, started_at, "
    "finished_at"
)


def _run_row(run_id: str) -> dict[str, Any]:
    return {
        "id": run_id,
        "kind": "sequential",
        "owner": "worker-a",
        "status": "running",
        "caller": None,
        "contract_hash": CONTRACT_HASH,
        "parallel_batch_id": None,
        "request_digest": "sha256:" + "e" * 64,
        "instance_id": "instance-1",
        "call_count": 0,
        "created_at": T0,
        "started_at": datetime(2026, 1, 1, 14, 0, tzinfo=PLUS_TWO),
    }


def _ends(run_ids: list[str], text: str) -> list[dict[str, Any]]:
    first, second = run_ids
    return [
        {
            "run_id": first,
            "status": "succeeded",
            "outcome": {"z": 1, "text": text},
            "call_count": 2,
            "finished_at": T0 + timedelta(seconds=3),
        },
        # No call count: the stored one stays; no outcome: none is stored.
        {"run_id": second, "status": "interrupted", "call_count": None, "finished_at": T0},
    ]


async def _runs_stored(session: AsyncSession, run_ids: list[str]) -> list[Any]:
    result = await session.execute(
        text(f"SELECT {RUN_COLUMNS} FROM runs WHERE id IN :ids ORDER BY id").bindparams(
            bindparam("ids", expanding=True)
        ),
        {"ids": run_ids},
    )
    return [tuple(row)[1:] for row in result.all()]


# A NUL in an outcome sends PostgreSQL's batch statement by statement (COPY and
# per-row parameters) instead of in one pipeline.
@pytest.mark.parametrize("text", ['ünïcode, \u2028, "quoted"', "nul\u0000"])
async def test_a_bulk_write_stores_runs_receipts_ends_and_audit_as_the_orm_does(
    session: AsyncSession, text: str, through: str
) -> None:
    await ContractSnapshotRepository(session).save_if_absent(CONTRACT_HASH, {"tools": {}}, 0)
    runs = RunRepository(session)
    await runs.add_many([_run_row("orm-a"), _run_row("orm-b")])
    await session.execute(insert(Receipt), _receipts("orm-a", text))
    await runs.finish_many(_ends(["orm-a", "orm-b"], text))
    await AuditRepository(session).add_many([{"run_id": "orm-a", "at": T0, "kind": "x"}])
    await session.commit()

    write = Batch(
        runs=[_run_row("bulk-a"), _run_row("bulk-b")],
        receipts=_receipts("bulk-a", text),
        ends=_ends(["bulk-a", "bulk-b"], text),
        audit=[{"run_id": "bulk-a", "at": T0, "kind": "x"}],
    )
    await journal_insert(session, write)
    await session.commit()

    assert await _runs_stored(session, ["bulk-a", "bulk-b"]) == await _runs_stored(
        session, ["orm-a", "orm-b"]
    )
    receipts = await _stored(session, "receipts", RECEIPT_COLUMNS, "bulk-a")
    assert receipts == await _stored(session, "receipts", RECEIPT_COLUMNS, "orm-a")
    audit = await _stored(session, "audit_events", AUDIT_COLUMNS, "bulk-a")
    assert audit == await _stored(session, "audit_events", AUDIT_COLUMNS, "orm-a")
    session.expunge_all()
    ended = await runs.get("bulk-a")
    assert ended is not None
    assert (ended.status, ended.outcome, ended.call_count) == (
        "succeeded",
        {"z": 1, "text": text},
        2,
    )


async def test_a_bulk_write_is_one_driver_call_per_batch_inside_the_transaction(
    engine: AsyncEngine,
) -> None:
    sessions = create_session_factory(engine)
    async with sessions.begin() as session:
        await create_run(session, "run-1")
    statements: list[str] = []
    event.listen(
        engine.sync_engine,
        "before_cursor_execute",
        lambda _c, _cur, statement, *_rest: statements.append(statement),
    )
    async with sessions() as session:
        batch = Batch(
            runs=[_run_row("run-2")],
            receipts=[receipt_row("run-2", 0)],
            ends=_ends(["run-1", "run-2"], "x"),
            audit=[{"run_id": "run-2", "kind": "x"}],
        )
        await journal_insert(session, batch)
        assert statements == []  # below SQLAlchemy's statement layer
        await session.rollback()
    async with sessions() as session:
        assert await RunRepository(session).get("run-2") is None
        run = await RunRepository(session).get("run-1")
        assert run is not None
        assert run.status == "running"


async def test_a_failed_bulk_write_is_a_sqlalchemy_error_and_nothing_of_it_stays(
    engine: AsyncEngine,
) -> None:
    sessions = create_session_factory(engine)
    async with sessions.begin() as session:
        await create_run(session, "run-1")
    with pytest.raises(IntegrityError):
        async with sessions.begin() as session:
            await journal_insert(
                session, Batch(runs=[_run_row("run-2")], receipts=[receipt_row("no-such-run", 0)])
            )
    async with sessions() as session:
        assert await RunRepository(session).get("run-2") is None


async def test_a_bulk_write_may_commit_in_its_own_driver_call(engine: AsyncEngine) -> None:
    commits: list[object] = []
    event.listen(engine.sync_engine, "commit", commits.append)
    sessions = create_session_factory(engine)
    async with sessions.begin() as session:
        await create_run(session, "run-1")
    commits.clear()
    async with sessions() as session:
        batch = Batch(receipts=[receipt_row("run-1", 0)], ends=_ends(["run-1", "nope"], "x"))
        await write_on(await session.connection(), batch, commit=True)
    # Committed (and seen by commit listeners) although the session only closed.
    assert len(commits) == 1
    async with sessions() as session:
        assert [r.seq for r in await ReceiptRepository(session).list_for_run("run-1")] == [0]
        run = await RunRepository(session).get("run-1")
        assert run is not None
        assert run.status == "succeeded"
    again = Batch(runs=[_run_row("run-2")], receipts=[receipt_row("run-1", 0, id="again")])
    with pytest.raises(IntegrityError):
        async with sessions() as session:
            await write_on(await session.connection(), again, commit=True)
    async with sessions() as session:
        assert await RunRepository(session).get("run-2") is None
    assert len(commits) == 1


@pytest.mark.postgres
async def test_run_ends_on_postgresql_find_their_runs_through_the_primary_key(
    postgres_url: str,
) -> None:
    """The batch UPDATE must not scan every run ever stored (its cost would grow
    with the table): planned with its parameters, it goes through the primary key."""
    await upgrade_database(postgres_url)
    engine = create_database_engine(postgres_url)
    try:
        sessions = create_session_factory(engine)
        async with sessions() as session:
            await ContractSnapshotRepository(session).save_if_absent(CONTRACT_HASH, {}, 0)
            rows = [_run_row(f"run-{index}") for index in range(3000)]
            await write_on(await session.connection(), Batch(runs=rows), commit=True)
        async with engine.connect() as connection:
            await connection.exec_driver_sql("ANALYZE runs")
            raw = await connection.get_raw_connection()
            driver = raw.driver_connection
            assert isinstance(driver, psycopg.AsyncConnection)
            ends = _ends(["run-1", "run-2"], "x")
            parameters = (json_bytes(ends).decode(), [end["run_id"] for end in ends])
            async with psycopg.AsyncClientCursor(driver) as cursor:
                await cursor.execute(f"EXPLAIN {FINISH}", parameters)
                plan = "\n".join(row[0] for row in await cursor.fetchall())
            await driver.rollback()
    finally:
        await engine.dispose()
    assert "pk_runs" in plan, plan
    assert "Seq Scan on runs" not in plan, plan


@pytest.mark.postgres
async def test_a_few_run_ends_on_postgresql_find_their_run_through_the_primary_key_in_any_kept_plan(
    postgres_url: str,
) -> None:
    """The UPDATE of a few ends is prepared (psycopg, from its fifth use), and the
    server may keep a generic plan made while `runs` was empty: even that plan must
    find the run through the primary key (a scan would grow with every run stored)."""
    plan = await generic_plan(
        postgres_url,
        FINISH_ROWS,
        "text, text, integer, timestamptz, text",
        "'succeeded', NULL, 1, now(), 'run-1'",
    )
    assert "Index Scan using pk_runs" in plan, plan
    assert "Seq Scan" not in plan, plan


@pytest.mark.postgres
async def test_run_ends_on_postgresql_are_planned_afresh_at_every_batch(
    postgres_url: str,
) -> None:
    """A plan kept from when `runs` was nearly empty would scan it whole as it grows:
    the UPDATE joined to a batch of ends is never prepared, however often it runs on
    one connection. The inserts, which scan no table, may be, and so may the UPDATE
    of a few ends, each found by its primary key. (In the caller's transaction:
    a transaction of the batch's own goes as one query, which prepares nothing.)"""
    await upgrade_database(postgres_url)
    shared = create_database_engine(postgres_url)
    engine = create_writer_engine(postgres_url, shared)  # one connection, reused
    many = FINISH_BY_ROW_MAX + 1
    try:
        sessions = create_session_factory(engine)
        async with sessions() as session:
            await ContractSnapshotRepository(session).save_if_absent(CONTRACT_HASH, {}, 0)
            await session.commit()
        for index in range(8):  # beyond psycopg's threshold for preparing (5)
            few = [f"few-{index}-{n}" for n in range(2)]
            for ends in (few, [f"many-{index}-{n}" for n in range(many)]):
                async with sessions() as session:
                    batch = Batch(
                        runs=[_run_row(run_id) for run_id in ends],
                        receipts=[receipt_row(ends[0], 0, id=f"r-{index}-{len(ends)}")],
                        ends=[_ends([run_id, "nope"], "x")[0] for run_id in ends],
                    )
                    await journal_insert(session, batch)
                    await session.commit()
        async with sessions() as session:
            result = await session.execute(text("SELECT statement FROM pg_prepared_statements"))
            kept = [row[0] for row in result.all()]
            result = await session.execute(
                text("SELECT count(*) FROM runs WHERE status = 'running'")
            )
            still_running = result.scalar_one()
    finally:
        await engine.dispose()
        await shared.dispose()
    assert any(statement.startswith('INSERT INTO "receipts"') for statement in kept), kept
    updates = [statement for statement in kept if statement.startswith('UPDATE "runs"')]
    assert updates, kept  # the few ends' statement
    assert not [statement for statement in updates if "json_to_recordset" in statement]
    assert still_running == 0


# The batch holds `ended` runs' ends and one of an unknown run: 3 and 8 ends take
# PostgreSQL's per-row statement, 9 and 41 the joined one.
@pytest.mark.parametrize("ended", [2, FINISH_BY_ROW_MAX - 1, FINISH_BY_ROW_MAX, 40])
async def test_run_ends_are_stored_as_the_orm_stores_them_however_many_a_batch_holds(
    session: AsyncSession, ended: int
) -> None:
    """PostgreSQL updates a few ends one by one and more through one joined statement;
    either way each run gets its own status, outcome and call count (None keeps it),
    and an end of an unknown run changes nothing."""
    await ContractSnapshotRepository(session).save_if_absent(CONTRACT_HASH, {"tools": {}}, 0)

    def ends_of(prefix: str) -> list[dict[str, Any]]:
        ends = []
        for index in range(ended):
            first, second = _ends([f"{prefix}-{index:02d}", "nope"], f"text {index}")
            ends.append(first if index % 2 else {**second, "run_id": first["run_id"]})
        return ends

    orm_ends, bulk_ends = ends_of("orm"), ends_of("bulk")
    runs = RunRepository(session)
    await runs.add_many([_run_row(end["run_id"]) for end in [*orm_ends, *bulk_ends]])
    await session.commit()
    await runs.finish_many(orm_ends)
    await session.commit()
    batch = Batch(ends=[*bulk_ends, _ends(["nope", "x"], "-")[0]])
    await write_on(await session.connection(), batch, commit=True)

    bulk = await _runs_stored(session, [end["run_id"] for end in bulk_ends])
    assert bulk == await _runs_stored(session, [end["run_id"] for end in orm_ends])
    session.expunge_all()
    last = await runs.get(bulk_ends[-1]["run_id"])
    assert last is not None
    assert (last.status, last.call_count) == (
        ("succeeded", 2) if (ended - 1) % 2 else ("interrupted", 0)
    )


def test_sqlite_times_are_rendered_as_isoformat_would_through_the_prefix_cache() -> None:
    """Naive UTC with microseconds always, whether the second's prefix is cached or not."""
    samples = [
        datetime(2026, 12, 1, 3, 4, 5, 0, tzinfo=UTC),
        datetime(2026, 12, 1, 3, 4, 5, 7, tzinfo=UTC),
        datetime(999, 1, 2, 3, 4, 5, 999_999, tzinfo=UTC),
        datetime(2026, 12, 31, 23, 59, 59, 123_456, tzinfo=UTC),
        datetime(2027, 1, 1, 1, 59, 59, 123_456, tzinfo=PLUS_TWO),
    ]
    # More distinct seconds than the cache keeps: it is emptied and refilled.
    samples += [T0 + timedelta(seconds=index, microseconds=index) for index in range(5000)]
    for value in samples * 2:
        expected = value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
        assert journal_rows.sqlite_time(value, {}) == expected
    assert len(journal_rows._SECOND_PREFIXES) <= journal_rows._MAX_SECOND_PREFIXES


def test_receipts_encoded_for_postgresql_with_an_integer_json_refuses_go_by_copy() -> None:
    rows = [{**receipt_row("run-1", 0, attempts=2**70), "created_at": T0}]
    values = [encoded[:-1] for encoded in encode(layout_of(Receipt), rows)]
    step = Encoded(layout_of(Receipt), values, T0)
    assert step.json_batch() is None
    assert batch_json(layout_of(Receipt), rows) is None
