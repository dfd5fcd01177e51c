"""A run's usage totals read the ledger by its `run_id` index."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy.dialects import postgresql, sqlite

from app.store.database import create_database_engine
from app.store.migrate import upgrade_database
from app.store.repositories.usage import run_totals_statement
from tests.store.generic_plans import generic_plan

INDEX = "ix_model_usage_run_id"
_NAMED = re.compile(r"%\((\w+)\)s")


@pytest.mark.postgres
async def test_a_runs_totals_read_the_run_index_in_a_generic_plan(postgres_url: str) -> None:
    compiled = run_totals_statement("run-1").compile(dialect=postgresql.psycopg.dialect())
    assert _NAMED.findall(compiled.string) == ["coalesce_2", "coalesce_4", "run_id_1"]
    plan = await generic_plan(
        postgres_url, _NAMED.sub("%s", compiled.string), "integer, integer, text", "0, 0, 'run-1'"
    )
    assert INDEX in plan, plan


async def test_a_runs_totals_read_the_run_index_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolloop.db'}"
    await upgrade_database(url)
    compiled = run_totals_statement("run-1").compile(dialect=sqlite.dialect())
    engine = create_database_engine(url)
    try:
        async with engine.connect() as connection:
            result = await connection.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {compiled.string}", (0, 0, "run-1")
            )
            plan = " ".join(str(row[-1]) for row in result.all())
    finally:
        await engine.dispose()
    assert f"INDEX {INDEX}" in plan, plan
