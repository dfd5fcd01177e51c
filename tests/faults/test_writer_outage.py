"""The receipt writer rides out a short outage, and replaces superseded receipts in place."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Literal

import psycopg
import pytest
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.service.errors import StorageUnavailable
from app.service.idempotency import (
    OPEN_MODE_CALLER,
    IdempotencyClaim,
    IdempotencyService,
    claim_row,
)
from app.service.runs.records import NOT_RUN, record_run_start, run_end, run_start_row
from app.store.database import create_session_factory, create_writer_engine
from app.store.journal import outage as outage_module
from app.store.journal.outage import is_transient, retry_transient
from app.store.journal.sqlite import statements as sqlite_statements
from app.store.journal.writer import GroupCommitWriter
from app.store.repositories.audit import AuditRepository
from app.store.repositories.idempotency import IdempotencyRepository
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.runs import RunRepository
from tests.aiosqlite_support import note_thread_calls
from tests.writer_support import HASH, engine_with_a_run, running_writer, succeeded_receipt


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    async with engine_with_a_run(database_url) as engine:
        yield engine


def _lost_connection() -> OperationalError:
    return OperationalError("COMMIT", {}, psycopg.OperationalError("server closed the connection"))


def test_only_connection_level_errors_are_transient() -> None:
    assert is_transient(_lost_connection())
    assert is_transient(OperationalError("x", {}, sqlite3.OperationalError("database is locked")))
    assert not is_transient(OperationalError("x", {}, sqlite3.OperationalError("no such table")))
    assert not is_transient(IntegrityError("x", {}, sqlite3.IntegrityError("UNIQUE failed")))
    assert not is_transient(ValueError("x"))


async def test_a_transient_failure_is_retried_and_others_are_not() -> None:
    failures = [_lost_connection(), _lost_connection()]

    async def flaky() -> str:
        if failures:
            raise failures.pop()
        return "done"

    assert await retry_transient(flaky, "flaky") == "done"

    async def broken() -> None:
        raise ValueError("not transient")

    with pytest.raises(ValueError, match="not transient"):
        await retry_transient(broken, "broken")
    failures[:] = [_lost_connection()]
    with pytest.raises(OperationalError):
        await retry_transient(flaky, "flaky", window_s=0.0)


class FlakySessions:
    """Sessions whose first transaction fails with a lost connection, before it wrote
    anything or after it committed (the commit went through, only its answer was lost)."""

    def __init__(
        self, real: async_sessionmaker[AsyncSession], when: Literal["before", "after"]
    ) -> None:
        self._real = real
        self._when = when
        self.failed = False

    @asynccontextmanager
    async def __call__(self) -> AsyncIterator[AsyncSession]:
        first = not self.failed
        self.failed = True
        async with self._real() as session:
            if first and self._when == "before":

                async def lost(*_args: Any, **_kwargs: Any) -> Any:
                    raise _lost_connection()

                session.connection = lost  # type: ignore[method-assign]
            yield session
        if first and self._when == "after":
            raise _lost_connection()


@asynccontextmanager
async def flaky_writer(
    engine: AsyncEngine, when: Literal["before", "after"]
) -> AsyncIterator[tuple[FlakySessions, GroupCommitWriter]]:
    """A started writer whose first transaction fails (`FlakySessions`), closed on the way out."""
    flaky = FlakySessions(create_session_factory(engine), when)
    writer = GroupCommitWriter(flaky)  # type: ignore[arg-type]
    writer.start()
    try:
        yield flaky, writer
    finally:
        await writer.aclose()


@pytest.mark.parametrize("when", ["before", "after"])
async def test_a_commit_lost_to_an_outage_is_retried_without_a_duplicate(
    engine: AsyncEngine,
    when: Literal["before", "after"],
) -> None:
    flaky = FlakySessions(create_session_factory(engine), when)
    writer = GroupCommitWriter(flaky)  # type: ignore[arg-type]
    writer.start()
    try:
        await writer.submit(succeeded_receipt(0, {"n": 0}))
    finally:
        await writer.aclose()
    assert flaky.failed
    async with create_session_factory(engine)() as session:
        stored = await ReceiptRepository(session).list_for_run("run-1")
    assert [(r.id, r.seq) for r in stored] == [("r0", 0)]


async def test_a_superseded_receipt_is_replaced_in_place_and_kept_in_audit(
    engine: AsyncEngine,
) -> None:
    sessions = create_session_factory(engine)
    writer = GroupCommitWriter(sessions)
    writer.start()
    old: dict[str, Any] = {"kind": "receipt.superseded", "detail": {"receipt_id": "r0"}}
    try:
        await writer.submit(succeeded_receipt(0, {"n": "first"}))
        writer.supersede(
            "run-1", {0: {**old, "run_id": "run-1", "at": succeeded_receipt(0, 0).started_at}}
        )
        await writer.submit(succeeded_receipt(0, {"n": "second"}, receipt_id="r0-new"))
        await writer.submit(succeeded_receipt(1, {"n": 1}))
        writer.supersede("run-1", {5: {**old, "run_id": "run-1"}})
        writer.forget_superseded("run-1")
    finally:
        await writer.aclose()
    async with sessions() as session:
        stored = await ReceiptRepository(session).list_for_run("run-1")
        events = await AuditRepository(session).list_for_run("run-1")
    assert [(r.id, r.seq, r.output) for r in stored] == [
        ("r0-new", 0, {"n": "second"}),
        ("r1", 1, {"n": 1}),
    ]
    assert [(e.kind, e.detail) for e in events] == [
        ("receipt.superseded", {"receipt_id": "r0", "superseded_by": "r0-new"})
    ]


@pytest.mark.postgres
async def test_a_connection_killed_under_the_bulk_insert_is_retried_without_a_duplicate(
    postgres_url: str,
) -> None:
    # The server ends the writer's connection after it was checked out (and pinged),
    # so the first statement to fail is the driver-level bulk insert itself.
    admin = make_url(postgres_url).set(drivername="postgresql").render_as_string(False)
    killed: list[int] = []

    def kill(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        if killed:
            return
        pid = dbapi_connection.driver_connection.info.backend_pid
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
        killed.append(pid)

    async with engine_with_a_run(postgres_url) as engine:
        event.listen(engine.sync_engine, "checkout", kill)
        writer = GroupCommitWriter(create_session_factory(engine))
        writer.start()
        try:
            await writer.submit(succeeded_receipt(0, {"n": 0}))
        finally:
            await writer.aclose()
        async with create_session_factory(engine)() as session:
            stored = await ReceiptRepository(session).list_for_run("run-1")
    assert killed
    assert [(r.id, r.seq, r.output) for r in stored] == [("r0", 0, {"n": 0})]


async def test_the_writers_own_connection_killed_while_idle_is_replaced_by_a_retry(
    postgres_url: str,
) -> None:
    # The writer's engine pings nothing before a batch: the first statement on the
    # dead connection fails, the connection is dropped, and the retry commits.
    admin = make_url(postgres_url).set(drivername="postgresql").render_as_string(False)
    pids: list[int] = []
    retries: list[str] = []
    async with engine_with_a_run(postgres_url) as engine:
        writer_engine = create_writer_engine(postgres_url, engine)
        event.listen(
            writer_engine.sync_engine,
            "connect",
            lambda dbapi_connection, _record: pids.append(dbapi_connection.info.backend_pid),
        )
        try:
            async with running_writer(writer_engine) as writer:
                await writer.submit(succeeded_receipt(0, {"n": 0}))
                with psycopg.connect(admin, autocommit=True) as connection:
                    connection.execute("SELECT pg_terminate_backend(%s, 5000)", (pids[0],))
                outage = writer.outage()
                outage.add_done_callback(lambda _future: retries.append("retried"))
                await writer.submit(succeeded_receipt(1, {"n": 1}))
        finally:
            await writer_engine.dispose()
        async with create_session_factory(engine)() as session:
            stored = await ReceiptRepository(session).list_for_run("run-1")
    assert len(pids) == 2  # a new connection replaced the killed one
    assert retries == ["retried"]
    assert [(r.id, r.output) for r in stored] == [("r0", {"n": 0}), ("r1", {"n": 1})]


class _CommitFailsOnce:
    """A sqlite3 connection whose next commit fails with SQLite's error `code`
    (a busy database, by default)."""

    def __init__(
        self, real: sqlite3.Connection, failures: list[str], code: int = sqlite3.SQLITE_BUSY
    ) -> None:
        self._real = real
        self._failures = failures
        self._code = code

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def commit(self) -> None:
        if not self._failures:
            self._failures.append("commit")
            error = sqlite3.OperationalError("database is locked")
            error.sqlite_errorcode = self._code
            raise error
        self._real.commit()


async def test_a_batch_whose_commit_fails_in_the_driver_is_rolled_back_and_retried(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The statements ran, the commit in the same driver call failed: the driver
    # rolled them back there, and the retry writes the batch once.
    if engine.dialect.name != "sqlite":
        pytest.skip("the driver-level commit in aiosqlite's thread is SQLite's")
    failures: list[str] = []
    original = sqlite_statements.execute_all

    def flaky(conn: sqlite3.Connection, *args: Any) -> None:
        original(_CommitFailsOnce(conn, failures), *args)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite_statements, "execute_all", flaky)
    writer = GroupCommitWriter(create_session_factory(engine))
    writer.start()
    try:
        await writer.submit(succeeded_receipt(0, {"n": 0}))
    finally:
        await writer.aclose()
    assert failures == ["commit"]
    async with create_session_factory(engine)() as session:
        stored = await ReceiptRepository(session).list_for_run("run-1")
    assert [(r.id, r.seq, r.output) for r in stored] == [("r0", 0, {"n": 0})]


@pytest.mark.parametrize(
    ("code", "sent_to_the_thread"),
    [
        # Busy: the batch goes to aiosqlite's thread at once, which commits it.
        (sqlite3.SQLITE_BUSY, 1),
        # Another failure: rolled back, and the writer's retry writes it on the loop.
        (sqlite3.SQLITE_IOERR, 0),
    ],
)
async def test_a_lone_run_s_end_whose_commit_fails_on_the_loop_s_thread_is_written_once(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch, code: int, sent_to_the_thread: int
) -> None:
    if engine.dialect.name != "sqlite":
        pytest.skip("the batch that ends a lone run is written on the loop's thread on SQLite")
    failures: list[str] = []
    original = sqlite_statements.execute_all

    def flaky(conn: sqlite3.Connection, *args: Any) -> None:
        original(_CommitFailsOnce(conn, failures, code), *args)  # type: ignore[arg-type]

    async with running_writer(engine) as writer:
        await writer.start_run(run_start_row(run_id="lone", **RUN_ROW))
        monkeypatch.setattr(sqlite_statements, "execute_all", flaky)
        sent = note_thread_calls(monkeypatch)
        durable = writer.submit(succeeded_receipt(0, {"n": 0})._replace(run_id="lone"))
        ended = writer.end_run_with([durable], run_end("lone", status="succeeded", call_count=1))
        assert ended is not None
        await ended
    assert failures == ["commit"]
    assert sent.count("flaky") == sent_to_the_thread
    async with create_session_factory(engine)() as session:
        stored = await ReceiptRepository(session).list_for_run("lone")
        run = await RunRepository(session).get("lone")
    assert [(r.id, r.seq) for r in stored] == [("r0", 0)]
    assert run is not None
    assert run.status == "succeeded"


RUN_START: dict[str, Any] = {
    "kind": "sequential",
    "owner": "owner-a",
    "contract_hash": HASH,
    "instance_id": "i",
    "caller": None,
}


@pytest.mark.parametrize("when", ["before", "after"])
async def test_a_run_start_caught_by_an_outage_answers_at_once_and_never_stays_running(
    engine: AsyncEngine,
    when: Literal["before", "after"],
) -> None:
    sessions = create_session_factory(engine)
    flaky = FlakySessions(sessions, when)
    writer = GroupCommitWriter(flaky)  # type: ignore[arg-type]
    writer.start()
    try:
        # Answered as soon as the write fails, not after the writer's retries.
        with pytest.raises(StorageUnavailable):
            await record_run_start(flaky, run_id="run-2", writer=writer, **RUN_START)  # type: ignore[arg-type]
        assert writer.in_outage
        # While the outage lasts, a new start is refused without being queued.
        with pytest.raises(StorageUnavailable):
            await record_run_start(flaky, run_id="run-3", writer=writer, **RUN_START)  # type: ignore[arg-type]
        await writer.flush()
        await writer.flush()  # the end queued once the late start committed
    finally:
        await writer.aclose()
    assert not writer.in_outage
    async with sessions() as session:
        runs = RunRepository(session)
        late = await runs.get("run-2")
        assert await runs.get("run-3") is None
    # Committed by the retry (or by the attempt whose answer was lost), then ended:
    # nothing ran, and the run does not stay `running`.
    assert late is not None
    assert (late.status, late.call_count, late.outcome) == ("failed", 0, {"error": NOT_RUN})


async def test_once_the_writer_gives_up_a_batch_the_next_start_tries_the_database_again(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No retry window: the first write fails for good at once.
    monkeypatch.setattr(outage_module, "retry_transient", partial(retry_transient, window_s=0.0))
    sessions = create_session_factory(engine)
    flaky = FlakySessions(sessions, "before")
    writer = GroupCommitWriter(flaky)  # type: ignore[arg-type]
    writer.start()
    try:
        with pytest.raises(StorageUnavailable):
            await record_run_start(flaky, run_id="run-2", writer=writer, **RUN_START)  # type: ignore[arg-type]
        assert not writer.in_outage
        # The database is back: the next start is written, not refused.
        await record_run_start(flaky, run_id="run-3", writer=writer, **RUN_START)  # type: ignore[arg-type]
    finally:
        await writer.aclose()
    async with sessions() as session:
        runs = RunRepository(session)
        assert await runs.get("run-2") is None
        stored = await runs.get("run-3")
    assert stored is not None
    assert stored.status == "running"


RUN_ROW: dict[str, Any] = {**RUN_START, "parallel_batch_id": None, "request_digest": None}


def _claim(key: str) -> IdempotencyClaim:
    return IdempotencyService(create_session_factory, 3600.0).claim(None, key, "d" * 64)  # type: ignore[arg-type]


@pytest.mark.parametrize("when", ["before", "after"])
async def test_a_claim_whose_commit_was_lost_still_answers_that_it_claimed(
    engine: AsyncEngine,
    when: Literal["before", "after"],
) -> None:
    # After a commit whose answer was lost, trying the claim again would find the
    # key held (by this very claim): the retry asks whether the run was stored.
    async with flaky_writer(engine, when) as (flaky, writer):
        key_row = claim_row(_claim("k"), "run-2")
        assert await writer.claim_run(key_row, run_start_row(run_id="run-2", **RUN_ROW)) is True
    assert flaky.failed
    async with create_session_factory(engine)() as session:
        run = await RunRepository(session).get("run-2")
        key = await IdempotencyRepository(session).get(OPEN_MODE_CALLER, "k")
    assert run is not None
    assert run.status == "running"
    assert key is not None
    assert key.run_id == "run-2"


@pytest.mark.parametrize("when", ["before", "after"])
async def test_a_keyed_start_caught_by_an_outage_answers_at_once_and_frees_its_key(
    engine: AsyncEngine,
    when: Literal["before", "after"],
) -> None:
    async with flaky_writer(engine, when) as (flaky, writer):
        with pytest.raises(StorageUnavailable):
            await record_run_start(
                flaky,  # type: ignore[arg-type]
                run_id="run-2",
                writer=writer,
                claim=_claim("k"),
                **RUN_START,
            )
        for _ in range(3):  # the claim's retry, then the end and the key's release
            await writer.flush()
    async with create_session_factory(engine)() as session:
        late = await RunRepository(session).get("run-2")
        key = await IdempotencyRepository(session).get(OPEN_MODE_CALLER, "k")
    # The 503 kept no key (a retry proceeds), and the run never stays `running`.
    assert key is None
    assert late is not None
    assert (late.status, late.call_count, late.outcome) == ("failed", 0, {"error": NOT_RUN})
