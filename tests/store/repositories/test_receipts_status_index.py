"""The receipts' status index holds the receipts that did not succeed, and a page
of one such status reads it even when its query is planned for any status."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql import Select

from app.store.database import create_database_engine
from app.store.migrate import upgrade_database
from app.store.models import Receipt
from app.store.repositories.receipts import page_statement
from tests.store.generic_plans import generic_plan

INDEX = "ix_receipts_status_created_at_id"
_NAMED = re.compile(r"%\((\w+)\)s")


def _page_of(status: str) -> Select[Receipt]:
    return page_statement(limit=50, after=None, status=status)


async def _definition(url: str) -> str:
    await upgrade_database(url)
    engine = create_database_engine(url)
    query = (
        "SELECT indexdef FROM pg_indexes WHERE indexname = :name"
        if url.startswith("postgresql")
        else "SELECT sql FROM sqlite_master WHERE name = :name"
    )
    try:
        async with engine.connect() as connection:
            found = (await connection.execute(text(query), {"name": INDEX})).scalar_one()
    finally:
        await engine.dispose()
    return str(found)


async def test_the_index_leaves_out_succeeded_receipts(database_url: str) -> None:
    definition = await _definition(database_url)
    assert re.search(r"WHERE \(*\(*status\)*(::text)? <> 'succeeded'", definition), definition


@pytest.mark.postgres
async def test_a_page_of_failed_receipts_reads_the_index_in_a_generic_plan(
    postgres_url: str,
) -> None:
    compiled = _page_of("failed").compile(dialect=postgresql.psycopg.dialect())
    names = _NAMED.findall(compiled.string)
    assert names == ["status_1", "param_1"]
    plan = await generic_plan(
        postgres_url,
        _NAMED.sub("%s", compiled.string),
        "text, integer",
        f"'{compiled.params['status_1']}', {compiled.params['param_1']}",
    )
    assert INDEX in plan, plan


async def test_a_page_of_failed_receipts_reads_the_index_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolloop.db'}"
    await upgrade_database(url)
    compiled = _page_of("failed").compile(dialect=sqlite.dialect())
    engine = create_database_engine(url)
    try:
        async with engine.connect() as connection:
            # SQLite plans a statement before its parameters are bound.
            result = await connection.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {compiled.string}", ("failed", 51, 0)
            )
            plan = " ".join(str(row[-1]) for row in result.all())
    finally:
        await engine.dispose()
    assert f"USING INDEX {INDEX}" in plan, plan


async def test_a_page_of_succeeded_receipts_does_not_ask_for_the_index() -> None:
    compiled = _page_of("succeeded").compile(dialect=sqlite.dialect())
    assert "'succeeded'" not in compiled.string
