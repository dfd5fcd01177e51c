"""The runtime's SQLite WAL checkpointer and the databases' writer processes:
started with the service, stopped with it."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from app.service.runtime import Runtime, _postgres_writer_process
from app.settings import Settings
from app.store.database import DatabaseUnavailable
from app.store.journal.postgres.backend import PostgresConnection
from tests.observability.metrics_reading import value
from tests.support.app import running
from tests.support.waiting import wait_for

EXAMPLE_REGISTRY = Path(__file__).resolve().parents[2] / "registries" / "example.yml"
WAL_HEADER_BYTES = 32
FRAME_HEADER_BYTES = 24
PAGE_BYTES = 4096  # SQLite's default page size, which the migrations keep


@asynccontextmanager
async def _running(settings: Settings) -> AsyncIterator[tuple[Runtime, httpx.AsyncClient]]:
    async with running(settings) as (app, client):
        yield app.state.runtime, client


async def _autocheckpoint(runtime: Runtime) -> int:
    async with runtime.database.connect() as connection:
        pages: int = (await connection.execute(text("PRAGMA wal_autocheckpoint"))).scalar_one()
    return pages


async def test_a_sqlite_file_gets_a_checkpointer_for_the_life_of_the_service(
    sqlite_url: str,
) -> None:
    settings = Settings(
        registries=[EXAMPLE_REGISTRY], database_url=sqlite_url, sqlite_wal_long_pages=600
    )
    async with _running(settings) as (runtime, _client):
        checkpointer = runtime.checkpointer
        assert checkpointer is not None
        assert checkpointer.running
        assert runtime.writer.wal is checkpointer
        assert await _autocheckpoint(runtime) == 1200  # twice the long WAL: a safety net
    assert not checkpointer.running


async def test_no_checkpointer_when_its_interval_is_zero(sqlite_url: str) -> None:
    settings = Settings(
        registries=[EXAMPLE_REGISTRY], database_url=sqlite_url, sqlite_checkpoint_interval_s=0
    )
    async with _running(settings) as (runtime, _client):
        assert runtime.checkpointer is None
        assert runtime.writer.wal is None
        assert await _autocheckpoint(runtime) == 1000  # SQLite's own: checkpoints in commits


@pytest.mark.postgres
async def test_postgresql_gets_a_writer_process_for_the_life_of_the_service(
    postgres_url: str,
) -> None:
    settings = Settings(registries=[EXAMPLE_REGISTRY], database_url=postgres_url)
    starts = value("toolloop_postgres_writer_starts_total")
    async with _running(settings) as (runtime, client):
        assert runtime.checkpointer is None
        assert runtime.sqlite_process is None
        process = runtime.postgres_process
        assert process is not None
        assert runtime.writer.backend.process is process
        assert runtime.writer.linger_s == 0.002
        assert value("toolloop_postgres_writer_starts_total") == starts + 1  # before any batch
        pid = process.pid
        assert pid is not None
        assert pid != os.getpid()
        database = make_url(postgres_url).database
        assert database is not None
        # The connection string went through the pipe: `ps` shows arguments to everyone.
        assert not any(database in argument for argument in _arguments(pid))
        response = await client.post("/plans/sequential", json=PLAN)
        assert response.status_code == 200
        assert process.commits >= 1
        async with runtime.sessions() as session:
            receipts = await session.scalar(text("SELECT count(*) FROM receipts"))
        assert receipts == 1
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.postgres
async def test_no_postgresql_writer_process_when_switched_off(postgres_url: str) -> None:
    settings = Settings(
        registries=[EXAMPLE_REGISTRY], database_url=postgres_url, postgres_writer_process=False
    )
    async with _running(settings) as (runtime, client):
        assert runtime.postgres_process is None
        # Through the writer's own connection, on the loop.
        assert isinstance(runtime.writer.backend, PostgresConnection)
        response = await client.post("/plans/sequential", json=PLAN)
        assert response.status_code == 200


async def test_a_postgresql_writer_process_that_cannot_connect_is_an_unavailable_database() -> None:
    url = "postgresql+psycopg://postgres:secret@127.0.0.1:1/x"
    settings = Settings(registries=[EXAMPLE_REGISTRY], database_url=url)
    with pytest.raises(DatabaseUnavailable) as raised:
        await _postgres_writer_process(settings)
    message = str(raised.value)
    assert message.startswith("database unavailable at 127.0.0.1:1/x: ")
    assert "secret" not in message


def _arguments(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_text().split("\0")


PLAN = {
    "owner": "text-worker",
    "calls": [{"call_key": "a", "tool": "word_count", "args": {"text": "a b c"}}],
}


async def test_a_sqlite_file_gets_a_writer_process_for_the_life_of_the_service(
    sqlite_url: str,
) -> None:
    settings = Settings(
        registries=[EXAMPLE_REGISTRY], database_url=sqlite_url, sqlite_wal_long_pages=600
    )
    starts = value("toolloop_sqlite_writer_starts_total")
    async with _running(settings) as (runtime, client):
        process = runtime.sqlite_process
        assert process is not None
        assert runtime.writer.backend.process is process
        assert value("toolloop_sqlite_writer_starts_total") == starts + 1  # before any batch
        pid = process.pid
        assert pid is not None
        assert pid != os.getpid()
        assert "wal_autocheckpoint=1200" in _arguments(pid)  # the same safety net as ours
        response = await client.post("/plans/sequential", json=PLAN)
        assert response.status_code == 200
        assert process.commits >= 1
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_no_writer_process_when_switched_off(sqlite_url: str) -> None:
    settings = Settings(
        registries=[EXAMPLE_REGISTRY], database_url=sqlite_url, sqlite_writer_process=False
    )
    async with _running(settings) as (runtime, client):
        assert runtime.sqlite_process is None
        assert runtime.writer.backend.process is None
        assert runtime.writer.linger_s == 0.002  # commits on this process's thread
        response = await client.post("/plans/sequential", json=PLAN)
        assert response.status_code == 200


async def test_commits_through_the_writer_process_do_not_linger(sqlite_url: str) -> None:
    settings = Settings(registries=[EXAMPLE_REGISTRY], database_url=sqlite_url)
    async with _running(settings) as (runtime, _client):
        assert runtime.sqlite_process is not None
        assert runtime.writer.linger_s == 0


@pytest.mark.parametrize("writer_process", [True, False])
async def test_a_configured_linger_holds_whichever_way_commits_go(
    sqlite_url: str, writer_process: bool
) -> None:
    settings = Settings(
        registries=[EXAMPLE_REGISTRY],
        database_url=sqlite_url,
        sqlite_writer_process=writer_process,
        group_commit_linger_s=0.005,
    )
    async with _running(settings) as (runtime, _client):
        assert runtime.writer.linger_s == 0.005


def _on_file(database: Path, **options: Any) -> Settings:
    return Settings(
        registries=[EXAMPLE_REGISTRY], database_url=f"sqlite+aiosqlite:///{database}", **options
    )


def _word_counts(calls: int) -> dict[str, Any]:
    return {
        "owner": "text-worker",
        "calls": [
            {"call_key": str(n), "tool": "word_count", "args": {"text": "a b c"}}
            for n in range(calls)
        ],
    }


async def test_the_checkpointer_sleeps_until_the_writer_commits(tmp_path: Path) -> None:
    settings = _on_file(
        tmp_path / "toolloop.db",
        sqlite_checkpoint_interval_s=0.001,
        sqlite_checkpoint_idle_interval_s=3600,
    )
    body = _word_counts(1)
    async with _running(settings) as (runtime, client):
        checkpointer = runtime.checkpointer
        assert checkpointer is not None
        # The service's own start wrote to the file; no receipt batch committed yet.
        await asyncio.sleep(0.2)  # room for many passes at the busy interval
        assert checkpointer.passes == 0

        response = await client.post("/plans/sequential", json=body)
        assert response.status_code == 200
        await wait_for(lambda: checkpointer.passes, "a pass after the commit")
        assert checkpointer.last is not None
        assert checkpointer.last.copied_frames >= 1


async def test_the_wal_starts_over_while_plans_keep_writing(tmp_path: Path) -> None:
    database = tmp_path / "toolloop.db"
    settings = _on_file(database, sqlite_checkpoint_interval_s=0.005, sqlite_wal_long_pages=500)
    body = _word_counts(10)
    async with _running(settings) as (runtime, client):
        checkpointer = runtime.checkpointer
        assert checkpointer is not None

        def wal_frames() -> int:
            return -1 if checkpointer.last is None else checkpointer.last.wal_frames

        async def a_plan_then(condition: Callable[[], bool]) -> bool:
            response = await client.post("/plans/sequential", json=body)
            assert response.status_code == 200
            return condition()

        # A reader on an old snapshot keeps every later frame from being copied back,
        # so the plans' commits make the WAL long however fast the passes come.
        reader = sqlite3.connect(database, isolation_level=None)
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM runs").fetchone()
            await wait_for(
                lambda: a_plan_then(lambda: wal_frames() >= 500), "a pass found the WAL long"
            )
        finally:
            reader.close()
        passes = checkpointer.passes
        await wait_for(
            lambda: a_plan_then(lambda: checkpointer.passes > passes and wal_frames() < 500),
            "the WAL started over",
        )
        caught_up = checkpointer.caught_up
        wal_bytes = (tmp_path / "toolloop.db-wal").stat().st_size
    frames = (wal_bytes - WAL_HEADER_BYTES) // (PAGE_BYTES + FRAME_HEADER_BYTES)
    assert caught_up >= 1  # the writer waited for a pass once the WAL was long
    # Never far past the safety net, which a commit enforces itself: one batch at most.
    assert frames <= 2 * 500 + 200


async def test_the_writer_lingers_from_the_configured_number_of_open_runs(
    sqlite_url: str,
) -> None:
    settings = Settings(
        registries=[EXAMPLE_REGISTRY], database_url=sqlite_url, group_commit_linger_min_open_runs=7
    )
    async with _running(settings) as (runtime, _client):
        assert runtime.writer.linger_min_open_runs == 7
    assert Settings(registries=[EXAMPLE_REGISTRY]).group_commit_linger_min_open_runs == 5
