"""The plan PostgreSQL keeps for a prepared statement when it plans it generically."""

from __future__ import annotations

from app.store.database import create_database_engine
from app.store.migrate import upgrade_database


async def generic_plan(postgres_url: str, statement: str, types: str, arguments: str) -> str:
    """`EXPLAIN` of `statement` (psycopg's `%s` placeholders) prepared with parameter
    `types` and planned generically, as a plan kept from an empty table would be,
    executed with `arguments` (SQL literals), on a freshly migrated database."""
    await upgrade_database(postgres_url)
    engine = create_database_engine(postgres_url)
    numbered = statement
    for index in range(1, statement.count("%s") + 1):
        numbered = numbered.replace("%s", f"${index}", 1)
    try:
        async with engine.connect() as connection:
            await connection.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
            await connection.exec_driver_sql(f"PREPARE probe({types}) AS {numbered}")
            result = await connection.exec_driver_sql(f"EXPLAIN EXECUTE probe({arguments})")
            plan = "\n".join(row[0] for row in result.all())
            await connection.rollback()
    finally:
        await engine.dispose()
    return plan
