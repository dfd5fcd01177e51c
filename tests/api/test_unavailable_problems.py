"""A 503 says what the caller needs (retry later), never the database's own words: no
SQL, no driver text, no address. Those go to the log."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from app.api.problems import install_problem_handlers
from app.service.commits import committed
from app.service.errors import DATABASE_UNAVAILABLE
from app.store.database import create_database_engine

STATEMENT = "INSERT INTO no_such_table (secret_column) VALUES (1)"


async def _database_failure(database_url: str) -> Exception:
    """What the database itself says of a statement it refuses."""
    engine = create_database_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text(STATEMENT))
    except Exception as exc:
        return exc
    finally:
        await engine.dispose()
    raise AssertionError("the statement was accepted")


@pytest.fixture
async def failing_app(database_url: str) -> FastAPI:
    failure = await _database_failure(database_url)
    assert "no_such_table" in str(failure)
    app = FastAPI()
    install_problem_handlers(app)

    @app.post("/write")
    async def write() -> None:
        durable: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        durable.set_exception(failure)
        await committed(durable, "the run could not be recorded")

    return app


async def test_a_storage_failure_answers_503_without_the_database_s_words(
    failing_app: FastAPI, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    transport = httpx.ASGITransport(app=failing_app)
    with caplog.at_level(logging.WARNING, logger="toolloop.api"):
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            response = await client.post("/write")

    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["retry-after"]
    assert response.json()["detail"] == DATABASE_UNAVAILABLE
    for leaked in ("no_such_table", "INSERT", "sqlalche.me", "127.0.0.1", "toolloop.db"):
        assert leaked not in response.text
    # The operator still learns what failed, and why.
    (record,) = [r for r in caplog.records if r.name == "toolloop.api"]
    assert "the run could not be recorded" in record.getMessage()
    assert "no_such_table" in record.getMessage()
